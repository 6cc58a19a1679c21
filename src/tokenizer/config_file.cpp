#include "config_file.h"

#include <fstream>
#include <sstream>

#include "hymoe/common/error.h"

namespace hymoe::tokenizer {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  HYMOE_CHECK(std::filesystem::is_regular_file(path, ec), kNotFound, "{}: no such file",
              path.string());
  std::ifstream in(path, std::ios::binary);
  HYMOE_CHECK(in, kIo, "{}: cannot open", path.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  try {
    return nlohmann::json::parse(buf.str());
  } catch (const nlohmann::json::exception& e) {
    HYMOE_THROW(kCorruptData, "{}: invalid JSON: {}", path.string(), e.what());
  }
}

std::string token_text(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  HYMOE_THROW(kCorruptData, "tokenizer_config.json: {} is neither a string nor an AddedToken", key);
}

bool json_bool(const nlohmann::json& config, const char* key, bool fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  HYMOE_CHECK(it->is_boolean(), kCorruptData, "tokenizer_config.json: {} is not a boolean", key);
  return it->get<bool>();
}

}  // namespace hymoe::tokenizer
