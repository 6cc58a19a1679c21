// JSON parsing that refuses duplicate object keys (internal to hymoe_model).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace hymoe {

// Parses `text`; throws hymoe::Error (kCorruptData) naming `file` and `what` ("safetensors
// header", "index") when it is not JSON or an object repeats a key at any depth.
nlohmann::json parse_json_unique_keys(std::string_view text, std::string_view file,
                                      std::string_view what);

}  // namespace hymoe
