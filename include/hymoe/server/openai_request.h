// Parsing and validation of OpenAI request bodies (/v1/chat/completions, /v1/completions).
// Every problem becomes an ApiException with a 4xx status and the offending field in `param`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hymoe/engine/sampling_params.h"
#include "hymoe/server/api_error.h"

namespace hymoe::server {

// Limits the server applies while parsing (from the server config).
struct RequestLimits {
  int32_t max_stop_sequences = 4;
  size_t max_stop_length = 256;       // bytes per stop string
  int32_t max_top_logprobs = 20;
  int32_t max_tokens_limit = 1 << 20; // upper bound on max_tokens
};

struct ChatCompletionRequest {
  std::string model;
  nlohmann::ordered_json messages;  // validated OpenAI messages (key order kept for templates)
  nlohmann::ordered_json tools;     // array or null
  SamplingParams sampling;
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
  SamplingParams sampling;
  bool stream = false;
  bool include_usage = false;
  std::string user;
};

// Parses a request body (raw bytes). Malformed JSON, wrong types and out-of-range values throw
// ApiException (400); n != 1 and other unsupported options throw 400 with code "unsupported".
ChatCompletionRequest parse_chat_request(std::string_view body, const RequestLimits& limits = {});
CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits = {});

// True when `text` is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view text);

}  // namespace hymoe::server
