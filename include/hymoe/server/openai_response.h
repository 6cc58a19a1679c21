// JSON bodies of OpenAI responses: chat.completion, chat.completion.chunk, text_completion
// (streamed and not), usage and logprobs, as the official SDKs parse them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hymoe/server/tool_calls.h"

namespace hymoe::server {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
  // {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}
  nlohmann::json to_json() const;
};

// One generated token's log-probability entry (chat format; completions convert it).
struct TokenLogprob {
  std::string token;       // its text (may be a partial UTF-8 character: `bytes` is exact)
  std::string bytes;       // raw bytes
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // (token text, logprob), best first
  std::vector<std::string> top_bytes;
};

struct ResponseHead {
  std::string id;          // "chatcmpl-..." or "cmpl-..."
  std::string model;
  int64_t created = 0;     // unix seconds
};

// Non-streamed chat completion. With tool calls the message has `tool_calls` and its content is
// null when no text came besides them.
nlohmann::json chat_completion(const ResponseHead& head, const std::string& content,
                               const std::optional<std::string>& reasoning, const char* finish_reason,
                               const Usage& usage, const std::vector<TokenLogprob>* logprobs,
                               const std::vector<ToolCall>& tool_calls = {});
// A streamed call as OpenAI sends it: a first delta with index, id, type, function.name and empty
// arguments, then one with the arguments. Each is the value of a chunk's delta.
std::vector<nlohmann::json> tool_call_deltas(const ToolCall& call);
// One streamed chat chunk. `delta` holds role/content/reasoning_content as present;
// finish_reason null until the last chunk.
nlohmann::json chat_chunk(const ResponseHead& head, nlohmann::json delta, const char* finish_reason,
                          const std::vector<TokenLogprob>* logprobs);
// The usage-only final chunk (stream_options.include_usage): empty choices.
nlohmann::json chat_usage_chunk(const ResponseHead& head, const Usage& usage);

nlohmann::json text_completion(const ResponseHead& head, const std::string& text, const char* finish_reason,
                               const Usage& usage, const std::vector<TokenLogprob>* logprobs,
                               int64_t text_offset_base);
nlohmann::json text_completion_chunk(const ResponseHead& head, const std::string& text,
                                     const char* finish_reason, const std::vector<TokenLogprob>* logprobs,
                                     int64_t text_offset_base);
nlohmann::json text_usage_chunk(const ResponseHead& head, const Usage& usage);

// "data: {json}\n\n" and the terminator "data: [DONE]\n\n".
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// A random id with the given prefix ("chatcmpl-" + 24 hex digits).
std::string make_response_id(const char* prefix);

}  // namespace hymoe::server
