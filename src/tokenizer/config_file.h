// Reading tokenizer_config.json and other JSON files with errors that name the file.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace hymoe::tokenizer {

// Parses a JSON file; kNotFound / kIo / kCorruptData with the path.
nlohmann::json read_json_file(const std::filesystem::path& path);

// A token field that is either "text" or {"content": "text", ...}; "" when absent or null.
std::string token_text(const nlohmann::json& config, const char* key);

// A boolean field, `fallback` when absent.
bool json_bool(const nlohmann::json& config, const char* key, bool fallback);

}  // namespace hymoe::tokenizer
