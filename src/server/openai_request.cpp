#include "hymoe/server/openai_request.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace hymoe::server {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void fail(std::string message, std::string param, const char* code = nullptr) {
  throw ApiException(ApiError::invalid(std::move(message), std::move(param),
                                       code ? std::optional<std::string>(code) : std::nullopt));
}

const char* type_name(const json& v) { return v.type_name(); }

// Optional number in [lo, hi]; null counts as absent.
void read_number(const json& j, const char* key, double lo, double hi, double& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_number()) fail(fmt::format("'{}' must be a number, got {}", key, type_name(*it)), key);
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    fail(fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, v), key);
  }
  out = v;
}

void read_int(const json& j, const char* key, int64_t lo, int64_t hi, int64_t& out, bool& present) {
  present = false;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (d != std::floor(d)) fail(fmt::format("'{}' must be an integer, got {}", key, d), key);
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
      fail(fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, d), key);
    }
    out = static_cast<int64_t>(d);
  } else if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      fail(fmt::format("'{}' must be between {} and {}", key, lo, hi), key);
    }
    int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) fail(fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, v), key);
    out = v;
  } else {
    fail(fmt::format("'{}' must be an integer, got {}", key, type_name(*it)), key);
  }
  present = true;
}

bool read_bool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(fmt::format("'{}' must be a boolean, got {}", key, type_name(*it)), key);
  return it->get<bool>();
}

std::string read_string(const json& j, const char* key, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) fail(fmt::format("'{}' is required", key), key);
    return {};
  }
  if (!it->is_string()) fail(fmt::format("'{}' must be a string, got {}", key, type_name(*it)), key);
  return it->get<std::string>();
}

// Options shared by both endpoints.
void read_common(const json& j, const RequestLimits& limits, SamplingParams& s, bool& stream,
                 bool& include_usage, std::string& user) {
  read_number(j, "temperature", 0.0, 2.0, s.temperature);
  read_number(j, "top_p", 0.0, 1.0, s.top_p);
  if (j.contains("top_p") && !j["top_p"].is_null() && s.top_p <= 0.0) {
    fail("'top_p' must be greater than 0", "top_p");
  }
  read_number(j, "min_p", 0.0, 1.0, s.min_p);
  read_number(j, "presence_penalty", -2.0, 2.0, s.presence_penalty);
  read_number(j, "frequency_penalty", -2.0, 2.0, s.frequency_penalty);
  int64_t v = 0;
  bool present = false;
  read_int(j, "top_k", -1, std::numeric_limits<int32_t>::max(), v, present);
  if (present) s.top_k = v < 0 ? 0 : static_cast<int32_t>(v);  // -1 means off, as in vLLM
  read_int(j, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), v,
           present);
  if (present) s.seed = static_cast<uint64_t>(v);
  read_int(j, "n", 1, 128, v, present);
  if (present && v != 1) fail("only n=1 is supported", "n", "unsupported");
  s.ignore_eos = read_bool(j, "ignore_eos", false);

  // stop: a string or an array of strings.
  if (auto it = j.find("stop"); it != j.end() && !it->is_null()) {
    std::vector<std::string> stops;
    if (it->is_string()) {
      stops.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& e : *it) {
        if (!e.is_string()) fail("'stop' must be a string or an array of strings", "stop");
        stops.push_back(e.get<std::string>());
      }
    } else {
      fail(fmt::format("'stop' must be a string or an array of strings, got {}", type_name(*it)), "stop");
    }
    if (static_cast<int32_t>(stops.size()) > limits.max_stop_sequences) {
      fail(fmt::format("at most {} stop sequences are allowed", limits.max_stop_sequences), "stop");
    }
    for (const auto& st : stops) {
      if (st.empty()) fail("stop sequences must not be empty", "stop");
      if (st.size() > limits.max_stop_length) {
        fail(fmt::format("stop sequences must be at most {} bytes", limits.max_stop_length), "stop");
      }
    }
    s.stop = std::move(stops);
  }

  stream = read_bool(j, "stream", false);
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) fail("'stream_options' must be an object", "stream_options");
    if (!stream) fail("'stream_options' is only allowed with stream=true", "stream_options");
    include_usage = read_bool(*it, "include_usage", false);
  }
  user = read_string(j, "user", false);
}

void read_max_tokens(const json& j, const RequestLimits& limits, SamplingParams& s,
                     const char* alt_key) {
  int64_t v = 0;
  bool present = false;
  read_int(j, "max_tokens", 1, limits.max_tokens_limit, v, present);
  if (present) s.max_tokens = static_cast<int32_t>(v);
  if (alt_key) {
    read_int(j, alt_key, 1, limits.max_tokens_limit, v, present);
    if (present) s.max_tokens = static_cast<int32_t>(v);  // the newer name wins
  }
}

// Chat content: a string, null, or an array of {"type":"text","text":...} parts (joined).
json normalise_content(const json& content, size_t index) {
  const std::string param = fmt::format("messages[{}].content", index);
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) fail(fmt::format("'{}' must be a string or an array of parts", param), param);
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      fail(fmt::format("each part of '{}' must be an object with a 'type'", param), param);
    }
    const std::string type = part["type"].get<std::string>();
    if (type != "text") {
      fail(fmt::format("content part type '{}' is not supported (text only)", type), param, "unsupported");
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      fail(fmt::format("text parts of '{}' need a string 'text'", param), param);
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// Length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 when none starts there.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t len = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_sequence_length(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

int32_t json_nesting_depth(std::string_view text, int32_t stop_after) {
  int32_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > stop_after) return deepest;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

json parse_json_object(std::string_view body, const RequestLimits& limits) {
  if (!is_valid_utf8(body)) fail("request body is not valid UTF-8", "body", "invalid_encoding");
  if (json_nesting_depth(body, limits.max_json_depth) > limits.max_json_depth) {
    fail(fmt::format("request body is nested too deeply: at most {} levels of arrays and objects",
                     limits.max_json_depth), "body", "json_too_deep");
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail("request body is not valid JSON", "body", "invalid_json");
  if (!j.is_object()) fail("request body must be a JSON object", "body");
  return j;
}

ChatCompletionRequest parse_chat_request(std::string_view body, const RequestLimits& limits) {
  json j = parse_json_object(body, limits);
  ChatCompletionRequest r;
  r.model = read_string(j, "model", true);
  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) fail("'messages' is required", "messages");
  if (!it->is_array()) fail(fmt::format("'messages' must be an array, got {}", type_name(*it)), "messages");
  if (it->empty()) fail("'messages' must not be empty", "messages");
  r.messages = json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) fail(fmt::format("'{}' must be an object", param), param);
    if (!m.contains("role") || !m["role"].is_string()) {
      fail(fmt::format("'{}.role' must be a string", param), param + ".role");
    }
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" &&
        role != "tool") {
      fail(fmt::format("'{}.role' must be system, developer, user, assistant or tool, got '{}'",
                       param, role), param + ".role");
    }
    json out = m;
    out["role"] = role == "developer" ? "system" : role;
    json content = m.contains("content") ? normalise_content(m["content"], i) : json(nullptr);
    const bool has_tool_calls = m.contains("tool_calls") && m["tool_calls"].is_array() &&
                                !m["tool_calls"].empty();
    if (content.is_null() && !(role == "assistant" && has_tool_calls)) {
      fail(fmt::format("'{}.content' is required", param), param + ".content");
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null() && !m["tool_calls"].is_array()) {
      fail(fmt::format("'{}.tool_calls' must be an array", param), param + ".tool_calls");
    }
    out["content"] = content;
    r.messages.push_back(std::move(out));
  }
  if (auto t = j.find("tools"); t != j.end() && !t->is_null()) {
    if (!t->is_array()) fail("'tools' must be an array", "tools");
    r.tools = *t;
  }
  read_common(j, limits, r.sampling, r.stream, r.include_usage, r.user);
  read_max_tokens(j, limits, r.sampling, "max_completion_tokens");
  r.sampling.logprobs = read_bool(j, "logprobs", false);
  int64_t v = 0;
  bool present = false;
  read_int(j, "top_logprobs", 0, limits.max_top_logprobs, v, present);
  if (present) {
    if (!r.sampling.logprobs && v > 0) fail("'top_logprobs' requires 'logprobs': true", "top_logprobs");
    r.sampling.top_logprobs = static_cast<int32_t>(v);
  }
  if (auto rf = j.find("response_format"); rf != j.end() && !rf->is_null()) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      fail("'response_format' must be an object with a 'type'", "response_format");
    }
    if ((*rf)["type"] != "text") {
      fail("only response_format type 'text' is supported", "response_format", "unsupported");
    }
  }
  return r;
}

CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits) {
  json j = parse_json_object(body, limits);
  CompletionRequest r;
  r.model = read_string(j, "model", true);
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) fail("'prompt' is required", "prompt");
  if (it->is_string()) {
    r.prompt = it->get<std::string>();
  } else if (it->is_array()) {
    if (it->empty()) fail("'prompt' must not be empty", "prompt");
    if ((*it)[0].is_number_integer()) {
      r.prompt_is_tokens = true;
      for (const auto& e : *it) {
        if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
            e.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
          fail("a token prompt must be an array of non-negative integers", "prompt");
        }
        r.prompt_ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
      }
    } else if (it->size() == 1 && (*it)[0].is_string()) {
      r.prompt = (*it)[0].get<std::string>();
    } else {
      fail("'prompt' must be a string, an array of one string, or an array of token ids "
           "(batched prompts are not supported)", "prompt", "unsupported");
    }
  } else {
    fail(fmt::format("'prompt' must be a string or an array, got {}", type_name(*it)), "prompt");
  }
  if (!r.prompt_is_tokens && r.prompt.empty()) fail("'prompt' must not be empty", "prompt");
  read_common(j, limits, r.sampling, r.stream, r.include_usage, r.user);
  r.sampling.max_tokens = 16;  // the OpenAI default for completions
  read_max_tokens(j, limits, r.sampling, nullptr);
  r.echo = read_bool(j, "echo", false);
  int64_t v = 0;
  bool present = false;
  read_int(j, "logprobs", 0, limits.max_top_logprobs, v, present);
  if (present) {
    r.sampling.logprobs = true;
    r.sampling.top_logprobs = static_cast<int32_t>(v);
  }
  if (auto s = j.find("suffix"); s != j.end() && !s->is_null()) {
    fail("'suffix' is not supported", "suffix", "unsupported");
  }
  return r;
}

}  // namespace hymoe::server
