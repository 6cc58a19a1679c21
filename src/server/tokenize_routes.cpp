// POST /tokenize and /detokenize (vLLM's shapes).
#include <httplib.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hymoe/server/api_error.h"
#include "hymoe/server/http_server.h"
#include "hymoe/server/openai_request.h"
#include "http_routes.h"

namespace hymoe::server {
namespace {

using json = nlohmann::ordered_json;

json parse_object(const std::string& body) {
  json j = parse_json_object(body);
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string()) throw ApiException(ApiError::invalid("'model' must be a string", "model"));
  }
  return j;
}

bool flag(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw ApiException(ApiError::invalid(fmt::format("'{}' must be a boolean", key), key));
  return it->get<bool>();
}

}  // namespace

void handle_tokenize(const ServedModel& m, const std::string& body, httplib::Response& res) {
  json j = parse_object(body);
  std::vector<int32_t> ids;
  if (j.contains("prompt")) {
    if (!j["prompt"].is_string()) throw ApiException(ApiError::invalid("'prompt' must be a string", "prompt"));
    ids = m.tokenizer->encode(j["prompt"].get<std::string>(), flag(j, "add_special_tokens", true));
  } else if (j.contains("messages")) {
    if (!m.chat_template) throw ApiException(ApiError::invalid("this model has no chat template", "messages"));
    // Reuse the chat request validation for the messages (and tools, rendered as a chat would).
    json probe = {{"model", m.name}, {"messages", j["messages"]}};
    if (j.contains("tools")) probe["tools"] = j["tools"];
    ChatCompletionRequest r = parse_chat_request(probe.dump());
    tokenizer::ChatRenderOptions o;
    o.add_generation_prompt = flag(j, "add_generation_prompt", true);
    if (!r.tools.is_null()) o.tools = r.tools;
    ids = m.tokenizer->encode(m.chat_template->render(r.messages, o), flag(j, "add_special_tokens", false));
  } else {
    throw ApiException(ApiError::invalid("'prompt' or 'messages' is required", "prompt"));
  }
  json out = {{"count", ids.size()}, {"max_model_len", m.max_context}, {"tokens", ids}};
  res.set_content(out.dump(), "application/json");
}

void handle_detokenize(const ServedModel& m, const std::string& body, httplib::Response& res) {
  json j = parse_object(body);
  auto it = j.find("tokens");
  if (it == j.end() || !it->is_array()) throw ApiException(ApiError::invalid("'tokens' must be an array of token ids", "tokens"));
  std::vector<int32_t> ids;
  for (const auto& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= m.tokenizer->vocab_size()) {
      throw ApiException(ApiError::invalid(
          fmt::format("'tokens' must hold ids in [0, {})", m.tokenizer->vocab_size()), "tokens"));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  json out = {{"prompt", m.tokenizer->decode(ids, false)}};
  res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

}  // namespace hymoe::server
