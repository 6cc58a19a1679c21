#include "hymoe/model/dtype.h"

namespace hymoe {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF32: return "F32";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : {DType::kF8E4M3, DType::kBF16, DType::kF16, DType::kF32, DType::kI32, DType::kI64}) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

}  // namespace hymoe
