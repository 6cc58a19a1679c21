#include "sse.h"

#include <nlohmann/json.hpp>

namespace hymoe::bench {

bool SseParser::take_line(std::string_view line) {
  if (line.empty()) {
    if (has_data_) return true;
    current_ = SseEvent{};  // an event with no data is dropped
    return false;
  }
  if (line.front() == ':') return false;  // comment / keep-alive
  std::string_view field = line;
  std::string_view value;
  if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) current_.data.push_back('\n');
    current_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    current_.event.assign(value);
  }
  return false;
}

StreamChunk decode_openai_chunk(std::string_view data) {
  using nlohmann::json;
  StreamChunk c;
  std::string_view trimmed = data;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n'))
    trimmed.remove_suffix(1);
  if (trimmed == "[DONE]") {
    c.kind = StreamChunk::Kind::kDone;
    return c;
  }
  const json j = json::parse(trimmed, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    c.kind = StreamChunk::Kind::kMalformed;
    c.error = "malformed SSE data (not a JSON object): " + std::string(trimmed.substr(0, 200));
    return c;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    c.kind = StreamChunk::Kind::kError;
    if (e->is_object() && e->contains("message") && (*e)["message"].is_string())
      c.error = "server error in stream: " + (*e)["message"].get<std::string>();
    else
      c.error = "server error in stream: " + e->dump();
    return c;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (auto t = u->find("completion_tokens"); t != u->end() && t->is_number_integer())
      c.completion_tokens = t->get<long long>();
    if (auto t = u->find("prompt_tokens"); t != u->end() && t->is_number_integer())
      c.prompt_tokens = t->get<long long>();
  }
  auto ch = j.find("choices");
  if (ch == j.end() || ch->is_null() || (ch->is_array() && ch->empty())) {
    // A usage-only chunk (stream_options.include_usage) or an empty keep-alive object.
    c.kind = StreamChunk::Kind::kEmpty;
    return c;
  }
  if (!ch->is_array() || !(*ch)[0].is_object()) {
    c.kind = StreamChunk::Kind::kMalformed;
    c.error = "malformed SSE chunk (choices is not an array of objects): " +
              std::string(trimmed.substr(0, 200));
    return c;
  }
  const json& choice = (*ch)[0];
  auto append_string = [&](const json& obj, const char* key) {
    if (auto t = obj.find(key); t != obj.end() && t->is_string()) c.text += t->get<std::string>();
  };
  append_string(choice, "text");
  if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
    append_string(*d, "reasoning_content");
    append_string(*d, "reasoning");
    append_string(*d, "content");
  }
  c.kind = c.text.empty() ? StreamChunk::Kind::kEmpty : StreamChunk::Kind::kToken;
  return c;
}

}  // namespace hymoe::bench
