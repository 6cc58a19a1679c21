// Parsing and validation of OpenAI request bodies (/v1/chat/completions, /v1/completions).
// Every problem becomes an ApiException with a 4xx status and the offending field in `param`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hymoe/engine/sampling_params.h"
#include "hymoe/server/api_error.h"
#include "hymoe/server/json_schema.h"

namespace hymoe::server {

// Limits the server applies while parsing (from the server config).
struct RequestLimits {
  int32_t max_stop_sequences = 4;
  size_t max_stop_length = 256;       // bytes per stop string
  int32_t max_top_logprobs = 20;
  int32_t max_tokens_limit = 1 << 20; // upper bound on max_tokens
  int32_t max_logit_bias = 300;       // logit_bias entries (OpenAI's documented limit)
  int32_t max_n = 128;                // choices per request (OpenAI's limit)
  // Deepest nesting of arrays and objects a body may have (the body's own object is level 1).
  // Checked on the bytes before parsing: everything that walks a parsed document recursively
  // (copies, the chat template's values, dump) then stays far from the stack's end.
  int32_t max_json_depth = 128;
};

// tool_choice: what the model may do with `tools`. The default is kAuto with tools, kNone
// without.
// kRequired and kFunction are forced by constrained decoding (tool_calls.h, tool_call_grammar).
struct ToolChoice {
  enum class Mode { kNone, kAuto, kRequired, kFunction };
  Mode mode = Mode::kNone;
  std::string function;  // kFunction: the function's name (one of `tools`)
  // kRequired: every tool; kFunction: the named one. Each with its `parameters` compiled
  // (json_schema.h); null (any JSON object) where it declares none, or where they are outside the
  // supported subset and the function is not `strict` (strict: a 400 instead).
  struct Forced {
    std::string name;
    std::shared_ptr<const JsonSchema> parameters;
  };
  std::vector<Forced> forced;
};

// response_format. kJsonObject: the output is one JSON object; kJsonSchema: one that conforms to
// `schema` (constrained decoding, applied by the routes through a JsonConstraintFactory).
struct ResponseFormat {
  enum class Type { kText, kJsonObject, kJsonSchema };
  Type type = Type::kText;
  std::string schema_name;                   // kJsonSchema: json_schema.name
  std::shared_ptr<const JsonSchema> schema;  // kJsonSchema: compiled; null when the request gave none (any object)
};

struct ChatCompletionRequest {
  std::string model;
  // Validated OpenAI messages (key order kept for templates). Normalised for the chat templates:
  // "developer" becomes "system", content parts are joined, an assistant's tool_calls have
  // type "function" and `arguments` as a JSON string (an object is serialised), an empty or null
  // tool_calls is removed, and content "" beside tool calls becomes null (the DeepSeek templates
  // test `content is none` to find a tool-call turn).
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;     // validated array of {"type":"function","function":{...}}, or null
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  ResponseFormat response_format;   // json_object/json_schema only with tool_choice none (or no tools)
  SamplingParams sampling;
  // Choices, each its own sequence (seed + i when a seed is given). The route holds choices
  // 1..n-1 until choice 0 has its first token (or ends), when its prompt's full blocks are in the
  // prefix cache, so that the others prefill only the last partial block.
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
};

struct CompletionRequest {
  std::string model;
  std::string prompt;               // text prompt, or
  std::vector<int32_t> prompt_ids;  // token ids (when the prompt is an array of integers)
  bool prompt_is_tokens = false;
  bool echo = false;
  ResponseFormat response_format;   // a vLLM extension on this endpoint
  SamplingParams sampling;          // max_tokens 16 (OpenAI's default) unless the body gives it
  bool max_tokens_given = false;    // whether it did (the server's configured default applies otherwise)
  int32_t n = 1;                    // choices, as in chat
  bool stream = false;
  bool include_usage = false;
  std::string user;
};

// Parses a request body (raw bytes). Malformed JSON, wrong types and out-of-range values throw
// ApiException (400; n outside [1, max_n] included); unsupported options throw 400 with code
// "unsupported".
// logit_bias becomes SamplingParams::logit_bias (sorted by id; keys must be decimal ids, values
// numbers in [-100, 100], at most max_logit_bias entries, one entry per id).
// response_format: {"type": "text"}, {"type": "json_object"} or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict"}}; a schema outside the supported subset
// (json_schema.h) is a 400 with param "response_format.json_schema.schema" naming the keyword and
// path (code "unsupported" for valid JSON Schema the subset lacks). json_object and json_schema are
// a 400 beside ignore_eos, and (chat) beside tools unless tool_choice is "none".
ChatCompletionRequest parse_chat_request(std::string_view body, const RequestLimits& limits = {});
CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits = {});

// logit_bias meets the model: every id must be below `vocab_size` (the tokenizer's vocabulary,
// which the sampler is limited to), else ApiException 400 with param "logit_bias". Called by the
// routes before anything is queued (parsing does not know the model).
void check_logit_bias_vocab(const SamplingParams& sampling, int64_t vocab_size);

// A client's JSON body as an object: valid UTF-8, nested at most limits.max_json_depth deep,
// well-formed JSON, an object at the top. Anything else throws ApiException 400 with param
// "body" and code invalid_encoding | json_too_deep | invalid_json.
nlohmann::ordered_json parse_json_object(std::string_view body, const RequestLimits& limits = {});

// The deepest nesting of arrays and objects in JSON text (0 for a scalar, 1 for `[]` or `{}`),
// counted over the bytes ([ { ] } outside strings) without parsing, so that it is safe on any
// input; it stops counting at `stop_after` + 1. Malformed text gets a count too (the parser
// refuses it afterwards).
int32_t json_nesting_depth(std::string_view text, int32_t stop_after = INT32_MAX);

// True when `text` is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view text);

// `text` with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD: what
// error messages, logs and JSON use when they quote client bytes (nlohmann::json::dump throws on
// invalid UTF-8).
std::string to_valid_utf8(std::string_view text);

}  // namespace hymoe::server
