#include "hymoe/server/openai_request.h"

#include <algorithm>
#include <cctype>
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

// logit_bias: {"<token id>": bias, ...} with at most limits.max_logit_bias entries. The ids'
// range is checked against the model by check_logit_bias_vocab.
void read_logit_bias(const json& j, const RequestLimits& limits, SamplingParams& s) {
  auto it = j.find("logit_bias");
  if (it == j.end() || it->is_null()) return;
  const char* key = "logit_bias";
  if (!it->is_object()) {
    fail(fmt::format("'logit_bias' must be an object mapping token ids to biases, got {}", type_name(*it)), key);
  }
  if (it->size() > static_cast<size_t>(limits.max_logit_bias)) {
    fail(fmt::format("'logit_bias' may have at most {} entries (OpenAI's documented limit), got {}",
                     limits.max_logit_bias, it->size()), key);
  }
  std::vector<std::pair<int32_t, float>> bias;
  bias.reserve(it->size());
  for (const auto& [id_text, value] : it->items()) {
    // A decimal token id: digits only, within int32 (the vocabulary's range is checked later).
    int64_t id = 0;
    bool ok = !id_text.empty() && id_text.size() <= 10;
    for (char c : id_text) {
      if (c < '0' || c > '9') ok = false;
      if (ok) id = id * 10 + (c - '0');
    }
    if (!ok || id > std::numeric_limits<int32_t>::max()) {
      fail(fmt::format("'logit_bias' keys must be token ids (decimal integers), got '{}'", id_text), key);
    }
    if (!value.is_number()) {
      fail(fmt::format("'logit_bias' values must be numbers, got {} for token {}", type_name(value), id), key);
    }
    const double b = value.get<double>();
    if (!std::isfinite(b) || b < -100.0 || b > 100.0) {
      fail(fmt::format("'logit_bias' values must be between -100 and 100, got {} for token {}", b, id), key);
    }
    bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  std::sort(bias.begin(), bias.end());
  for (size_t i = 1; i < bias.size(); ++i) {
    if (bias[i].first == bias[i - 1].first) {
      fail(fmt::format("'logit_bias' names token {} twice", bias[i].first), key);
    }
  }
  s.logit_bias = std::move(bias);
}

// response_format: {"type": "text" | "json_object" | "json_schema"}. A json_schema's schema is
// compiled here (json_schema.h): anything outside the supported subset is a 400 naming it.
ResponseFormat read_response_format(const json& j, const SamplingParams& s) {
  ResponseFormat f;
  auto rf = j.find("response_format");
  if (rf == j.end() || rf->is_null()) return f;
  if (!rf->is_object()) {
    fail(fmt::format("'response_format' must be an object with a 'type', got {}", type_name(*rf)), "response_format");
  }
  auto type = rf->find("type");
  if (type == rf->end() || !type->is_string()) {
    fail("'response_format.type' must be a string: 'text', 'json_object' or 'json_schema'", "response_format.type");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return f;
  if (t != "json_object" && t != "json_schema") {
    fail(fmt::format("'response_format.type' must be 'text', 'json_object' or 'json_schema', got '{}'", t),
         "response_format.type");
  }
  if (t == "json_schema") {
    auto js = rf->find("json_schema");
    if (js == rf->end() || !js->is_object()) {
      fail("'response_format.json_schema' must be an object with a 'name' and a 'schema'", "response_format.json_schema");
    }
    // name: as OpenAI has it, a-z, A-Z, 0-9, '_' and '-', at most 64.
    auto name = js->find("name");
    if (name == js->end() || !name->is_string() || name->get_ref<const std::string&>().empty() ||
        name->get_ref<const std::string&>().size() > 64 ||
        !std::all_of(name->get_ref<const std::string&>().begin(), name->get_ref<const std::string&>().end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; })) {
      fail("'response_format.json_schema.name' must be 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-'",
           "response_format.json_schema.name");
    }
    f.schema_name = name->get<std::string>();
    if (auto strict = js->find("strict"); strict != js->end() && !strict->is_null() && !strict->is_boolean()) {
      fail("'response_format.json_schema.strict' must be a boolean", "response_format.json_schema.strict");
    }
    auto schema = js->find("schema");
    if (schema != js->end() && !schema->is_null()) {
      if (!schema->is_object()) {
        fail(fmt::format("'response_format.json_schema.schema' must be an object, got {}", type_name(*schema)),
             "response_format.json_schema.schema");
      }
      try {
        f.schema = compile_json_schema(*schema);
      } catch (const JsonSchemaError& e) {
        fail(fmt::format("response_format.json_schema.schema: {}", e.what()), "response_format.json_schema.schema",
             e.unsupported() ? "unsupported" : nullptr);
      }
    }
  }
  if (s.ignore_eos) {
    fail(fmt::format("'ignore_eos' cannot be combined with response_format '{}' (the output ends when the object "
                     "does)", t), "ignore_eos");
  }
  f.type = t == "json_object" ? ResponseFormat::Type::kJsonObject : ResponseFormat::Type::kJsonSchema;
  return f;
}

// Options shared by both endpoints.
void read_common(const json& j, const RequestLimits& limits, SamplingParams& s, bool& stream,
                 bool& include_usage, std::string& user, int32_t& n) {
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
  read_int(j, "n", 1, limits.max_n, v, present);
  if (present) n = static_cast<int32_t>(v);
  s.ignore_eos = read_bool(j, "ignore_eos", false);
  read_logit_bias(j, limits, s);

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

// Returns whether the body gave a limit.
bool read_max_tokens(const json& j, const RequestLimits& limits, SamplingParams& s,
                     const char* alt_key) {
  int64_t v = 0;
  bool present = false, any = false;
  read_int(j, "max_tokens", 1, limits.max_tokens_limit, v, present);
  if (present) s.max_tokens = static_cast<int32_t>(v);
  any = present;
  if (alt_key) {
    read_int(j, alt_key, 1, limits.max_tokens_limit, v, present);
    if (present) s.max_tokens = static_cast<int32_t>(v);  // the newer name wins
    any = any || present;
  }
  return any;
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

// An assistant's tool_calls, checked and normalised into `out`; true when it has any.
bool read_tool_calls(const json& m, const std::string& role, const std::string& param, json& out) {
  auto it = m.find("tool_calls");
  if (it == m.end()) return false;
  if (it->is_null() || (it->is_array() && it->empty())) {
    out.erase("tool_calls");  // the templates test `is not none` / truthiness, not emptiness
    return false;
  }
  const std::string p = param + ".tool_calls";
  if (!it->is_array()) fail(fmt::format("'{}' must be an array", p), p);
  if (role != "assistant") fail(fmt::format("'{}' is only allowed on assistant messages", p), p);
  json calls = json::array();
  for (size_t k = 0; k < it->size(); ++k) {
    const json& c = (*it)[k];
    const std::string cp = fmt::format("{}[{}]", p, k);
    if (!c.is_object()) fail(fmt::format("'{}' must be an object", cp), cp);
    auto id = c.find("id");
    if (id == c.end() || !id->is_string() || id->get<std::string>().empty()) {
      fail(fmt::format("'{}.id' must be a non-empty string", cp), cp + ".id");
    }
    json call = c;
    if (auto type = c.find("type"); type == c.end() || type->is_null()) {
      call["type"] = "function";
    } else if (*type != "function") {
      fail(fmt::format("'{}.type' must be 'function'", cp), cp + ".type");
    }
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) fail(fmt::format("'{}.function' must be an object", cp), cp + ".function");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      fail(fmt::format("'{}.function.name' must be a non-empty string", cp), cp + ".function.name");
    }
    auto args = fn->find("arguments");
    if (args == fn->end() || !(args->is_string() || args->is_object())) {
      fail(fmt::format("'{}.function.arguments' must be a string (JSON text)", cp), cp + ".function.arguments");
    }
    // The templates concatenate `arguments` as text: an object (which some clients send) is
    // serialised the way json.dumps writes it.
    if (args->is_object()) call["function"]["arguments"] = args->dump(-1, ' ', false, json::error_handler_t::replace);
    calls.push_back(std::move(call));
  }
  out["tool_calls"] = std::move(calls);
  return true;
}

// OpenAI's rule for function names.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// tools, tool_choice and parallel_tool_calls.
void read_tools(const json& j, ChatCompletionRequest& r) {
  constexpr size_t kMaxTools = 128;
  std::vector<std::string> names;
  if (auto t = j.find("tools"); t != j.end() && !t->is_null()) {
    if (!t->is_array()) fail(fmt::format("'tools' must be an array, got {}", type_name(*t)), "tools");
    if (t->empty()) fail("'tools' must not be empty (leave it out for no tools)", "tools");
    if (t->size() > kMaxTools) fail(fmt::format("at most {} tools are allowed", kMaxTools), "tools");
    for (size_t k = 0; k < t->size(); ++k) {
      const json& tool = (*t)[k];
      const std::string p = fmt::format("tools[{}]", k);
      if (!tool.is_object()) fail(fmt::format("'{}' must be an object", p), p);
      if (!tool.contains("type") || tool["type"] != "function") {
        fail(fmt::format("'{}.type' must be 'function'", p), p + ".type");
      }
      auto fn = tool.find("function");
      if (fn == tool.end() || !fn->is_object()) fail(fmt::format("'{}.function' must be an object", p), p + ".function");
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || !valid_function_name(name->get<std::string>())) {
        fail(fmt::format("'{}.function.name' must be 1 to 64 letters, digits, underscores or dashes", p),
             p + ".function.name");
      }
      if (auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string()) {
        fail(fmt::format("'{}.function.description' must be a string", p), p + ".function.description");
      }
      if (auto s = fn->find("parameters"); s != fn->end() && !s->is_null() && !s->is_object()) {
        fail(fmt::format("'{}.function.parameters' must be a JSON Schema object", p), p + ".function.parameters");
      }
      if (auto s = fn->find("strict"); s != fn->end() && !s->is_null() && !s->is_boolean()) {
        fail(fmt::format("'{}.function.strict' must be a boolean", p), p + ".function.strict");
      }
      const std::string n = name->get<std::string>();
      if (std::find(names.begin(), names.end(), n) != names.end()) {
        fail(fmt::format("'{}.function.name': the function '{}' is declared twice", p, n), p + ".function.name");
      }
      names.push_back(n);
    }
    r.tools = *t;
    r.tool_choice.mode = ToolChoice::Mode::kAuto;
  }
  if (auto c = j.find("tool_choice"); c != j.end() && !c->is_null()) {
    ToolChoice choice;
    if (c->is_string()) {
      const std::string v = c->get<std::string>();
      if (v == "none") {
        choice.mode = ToolChoice::Mode::kNone;
      } else if (v == "auto") {
        choice.mode = ToolChoice::Mode::kAuto;
      } else if (v == "required") {
        choice.mode = ToolChoice::Mode::kRequired;
      } else {
        fail(fmt::format("'tool_choice' must be none, auto, required or a function, got '{}'", v), "tool_choice");
      }
    } else if (c->is_object()) {
      if (!c->contains("type") || (*c)["type"] != "function" || !c->contains("function") ||
          !(*c)["function"].is_object() || !(*c)["function"].contains("name") ||
          !(*c)["function"]["name"].is_string()) {
        fail("'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
      }
      choice.mode = ToolChoice::Mode::kFunction;
      choice.function = (*c)["function"]["name"].get<std::string>();
    } else {
      fail(fmt::format("'tool_choice' must be a string or an object, got {}", type_name(*c)), "tool_choice");
    }
    if (choice.mode != ToolChoice::Mode::kNone && r.tools.is_null()) {
      fail("'tool_choice' is only allowed when 'tools' are specified", "tool_choice");
    }
    if (choice.mode == ToolChoice::Mode::kFunction &&
        std::find(names.begin(), names.end(), choice.function) == names.end()) {
      fail(fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", choice.function),
           "tool_choice");
    }
    r.tool_choice = choice;
  }
  r.parallel_tool_calls = read_bool(j, "parallel_tool_calls", true);
  if (r.tool_choice.mode == ToolChoice::Mode::kRequired || r.tool_choice.mode == ToolChoice::Mode::kFunction) {
    // The forced calls' arguments are decoded against the parameters' schemas.
    for (size_t k = 0; k < r.tools.size(); ++k) {
      const auto& fn = r.tools[k]["function"];
      ToolChoice::Forced f{fn["name"].get<std::string>(), nullptr};
      if (r.tool_choice.mode == ToolChoice::Mode::kFunction && f.name != r.tool_choice.function) continue;
      if (auto s = fn.find("parameters"); s != fn.end() && !s->is_null()) {
        try {
          f.parameters = compile_json_schema(*s);
        } catch (const JsonSchemaError& e) {
          if (fn.value("strict", json(false)) == json(true)) {
            const std::string p = fmt::format("tools[{}].function.parameters", k);
            fail(fmt::format("{}: {}", p, e.what()), p, e.unsupported() ? "unsupported" : nullptr);
          }
          // Not strict: any JSON object.
        }
      }
      r.tool_choice.forced.push_back(std::move(f));
    }
  }
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
    const bool has_tool_calls = read_tool_calls(m, role, param, out);
    if (content.is_null() && !has_tool_calls) {
      fail(fmt::format("'{}.content' is required", param), param + ".content");
    }
    if (has_tool_calls && content.is_string() && content.get<std::string>().empty()) content = nullptr;
    if (role == "tool") {
      auto id = m.find("tool_call_id");
      if (id == m.end() || !id->is_string() || id->get<std::string>().empty()) {
        fail(fmt::format("'{}.tool_call_id' must be a non-empty string on tool messages", param),
             param + ".tool_call_id");
      }
    }
    out["content"] = content;
    r.messages.push_back(std::move(out));
  }
  read_tools(j, r);
  read_common(j, limits, r.sampling, r.stream, r.include_usage, r.user, r.n);
  read_max_tokens(j, limits, r.sampling, "max_completion_tokens");
  r.sampling.logprobs = read_bool(j, "logprobs", false);
  int64_t v = 0;
  bool present = false;
  read_int(j, "top_logprobs", 0, limits.max_top_logprobs, v, present);
  if (present) {
    if (!r.sampling.logprobs && v > 0) fail("'top_logprobs' requires 'logprobs': true", "top_logprobs");
    r.sampling.top_logprobs = static_cast<int32_t>(v);
  }
  r.response_format = read_response_format(j, r.sampling);
  if (r.response_format.type != ResponseFormat::Type::kText && r.tool_choice.mode != ToolChoice::Mode::kNone) {
    // A call is not a JSON object text: the two would contradict each other.
    fail(fmt::format("response_format '{}' cannot be combined with 'tools' unless 'tool_choice' is 'none'",
                     r.response_format.type == ResponseFormat::Type::kJsonObject ? "json_object" : "json_schema"),
         "response_format");
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
  read_common(j, limits, r.sampling, r.stream, r.include_usage, r.user, r.n);
  r.sampling.max_tokens = 16;  // the OpenAI default for completions
  r.max_tokens_given = read_max_tokens(j, limits, r.sampling, nullptr);
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
  r.response_format = read_response_format(j, r.sampling);
  return r;
}

void check_logit_bias_vocab(const SamplingParams& sampling, int64_t vocab_size) {
  for (const auto& [id, bias] : sampling.logit_bias) {
    if (id < 0 || id >= vocab_size) {
      fail(fmt::format("'logit_bias' token id {} is outside this model's vocabulary [0, {})", id, vocab_size),
           "logit_bias");
    }
  }
}

}  // namespace hymoe::server
