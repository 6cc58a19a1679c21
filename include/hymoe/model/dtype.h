// Element types of checkpoint tensors, named as safetensors names them.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace hymoe {

enum class DType { kF8E4M3, kBF16, kF16, kF32, kI32, kI64 };

// Bytes per element.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF8E4M3: return 1;
    case DType::kBF16:
    case DType::kF16: return 2;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

// The safetensors spelling: "F8_E4M3", "BF16", "F16", "F32", "I32", "I64".
std::string_view dtype_name(DType t);
// Parses the safetensors spelling; nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace hymoe
