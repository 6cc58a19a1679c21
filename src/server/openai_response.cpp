#include "hymoe/server/openai_response.h"

#include <random>

#include <fmt/format.h>

namespace hymoe::server {
namespace {

using nlohmann::json;

json byte_array(const std::string& bytes) {
  json a = json::array();
  for (unsigned char c : bytes) a.push_back(static_cast<int>(c));
  return a;
}

// nlohmann::json refuses invalid UTF-8 on dump; partial characters of a token are shown with
// U+FFFD (the exact bytes travel in "bytes").
std::string printable(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

json chat_logprobs(const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const auto& lp : lps) {
    json top = json::array();
    for (size_t i = 0; i < lp.top.size(); ++i) {
      const std::string& b = i < lp.top_bytes.size() ? lp.top_bytes[i] : lp.top[i].first;
      top.push_back({{"token", printable(lp.top[i].first)}, {"logprob", lp.top[i].second}, {"bytes", byte_array(b)}});
    }
    content.push_back({{"token", printable(lp.token)},
                       {"logprob", lp.logprob},
                       {"bytes", byte_array(lp.bytes)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs(const std::vector<TokenLogprob>& lps, int64_t offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const auto& lp : lps) {
    tokens.push_back(printable(lp.token));
    token_logprobs.push_back(lp.logprob);
    json alt = json::object();
    for (const auto& [t, v] : lp.top) alt[printable(t)] = v;
    top.push_back(alt);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(lp.token.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json head_json(const ResponseHead& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model},
          {"system_fingerprint", "hymoe"}};
}

json reason_or_null(const char* r) { return r ? json(r) : json(nullptr); }

}  // namespace

json Usage::to_json() const {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json chat_completion(const ResponseHead& head, const std::string& content, const std::optional<std::string>& reasoning,
                     const char* finish_reason, const Usage& usage, const std::vector<TokenLogprob>* logprobs,
                     const std::vector<ToolCall>& tool_calls) {
  json j = head_json(head, "chat.completion");
  json message = {{"role", "assistant"},
                  {"content", content.empty() && !tool_calls.empty() ? json(nullptr) : json(content)}};
  if (reasoning) message["reasoning_content"] = *reasoning;
  if (!tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : tool_calls) {
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  json choice = {{"index", 0}, {"message", message}, {"finish_reason", reason_or_null(finish_reason)},
                 {"logprobs", logprobs ? chat_logprobs(*logprobs) : json(nullptr)}};
  j["choices"] = json::array({choice});
  j["usage"] = usage.to_json();
  return j;
}

json chat_chunk(const ResponseHead& head, json delta, const char* finish_reason,
                const std::vector<TokenLogprob>* logprobs) {
  json j = head_json(head, "chat.completion.chunk");
  json choice = {{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", reason_or_null(finish_reason)},
                 {"logprobs", logprobs ? chat_logprobs(*logprobs) : json(nullptr)}};
  j["choices"] = json::array({choice});
  return j;
}

std::vector<json> tool_call_deltas(const ToolCall& c) {
  json head = {{"index", c.index}, {"id", c.id}, {"type", "function"},
               {"function", {{"name", c.name}, {"arguments", ""}}}};
  json args = {{"index", c.index}, {"function", {{"arguments", c.arguments}}}};
  return {json{{"tool_calls", json::array({std::move(head)})}}, json{{"tool_calls", json::array({std::move(args)})}}};
}

json chat_usage_chunk(const ResponseHead& head, const Usage& usage) {
  json j = head_json(head, "chat.completion.chunk");
  j["choices"] = json::array();
  j["usage"] = usage.to_json();
  return j;
}

json text_completion(const ResponseHead& head, const std::string& text, const char* finish_reason, const Usage& usage,
                     const std::vector<TokenLogprob>* logprobs, int64_t text_offset_base) {
  json j = head_json(head, "text_completion");
  json choice = {{"index", 0}, {"text", text}, {"finish_reason", reason_or_null(finish_reason)},
                 {"logprobs", logprobs ? completion_logprobs(*logprobs, text_offset_base) : json(nullptr)}};
  j["choices"] = json::array({choice});
  j["usage"] = usage.to_json();
  return j;
}

json text_completion_chunk(const ResponseHead& head, const std::string& text, const char* finish_reason,
                           const std::vector<TokenLogprob>* logprobs, int64_t text_offset_base) {
  json j = head_json(head, "text_completion");
  json choice = {{"index", 0}, {"text", text}, {"finish_reason", reason_or_null(finish_reason)},
                 {"logprobs", logprobs ? completion_logprobs(*logprobs, text_offset_base) : json(nullptr)}};
  j["choices"] = json::array({choice});
  return j;
}

json text_usage_chunk(const ResponseHead& head, const Usage& usage) {
  json j = head_json(head, "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage.to_json();
  return j;
}

std::string sse_event(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string make_response_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

}  // namespace hymoe::server
