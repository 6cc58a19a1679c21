// Finding the special codes of an FP8 matrix (see fp8_special_codes.h).
#include "hymoe/kernels/fp8_special_codes.h"

#include <cstring>

#include "hymoe/common/error.h"

namespace hymoe::kernels {
namespace {

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHighs = 0x8080808080808080ull;

// Nonzero iff some byte of v is 0 (may flag extra bytes above a zero one: a filter only).
constexpr uint64_t has_zero_byte(uint64_t v) { return (v - kOnes) & ~v & kHighs; }

// Nonzero iff some byte of the 8 codes may be special: exponent field 0, or magnitude 0x7F.
constexpr uint64_t maybe_special(uint64_t v) {
  return has_zero_byte(v & (0x78 * kOnes)) | has_zero_byte((v & (0x7F * kOnes)) ^ (0x7F * kOnes));
}

template <bool kWide>
Fp8SpecialCodes find(const Fp8MatrixView& w) {
  HYMOE_CHECK(w.rows >= 0 && w.cols >= 0 && w.rows * w.cols <= int64_t{UINT32_MAX}, kInvalidArgument,
              "fp8 special codes: a {}x{} matrix has 2^32 codes or more", w.rows, w.cols);
  Fp8SpecialCodes s;
  s.row_start.reserve(static_cast<size_t>(w.rows) + 1);
  s.row_start.push_back(0);
  for (int64_t i = 0; i < w.rows; ++i) {
    const uint8_t* row = w.data + i * w.cols;
    int64_t j = 0;
    if constexpr (kWide) {
      for (; j + 8 <= w.cols; j += 8) {
        uint64_t v;
        std::memcpy(&v, row + j, 8);
        if (maybe_special(v) == 0) continue;
        for (int64_t q = j; q < j + 8; ++q) {
          if (!is_fp8_shift_special(row[q])) continue;
          s.col.push_back(static_cast<uint32_t>(q));
          s.code.push_back(row[q]);
        }
      }
    }
    for (; j < w.cols; ++j) {
      if (!is_fp8_shift_special(row[j])) continue;
      s.col.push_back(static_cast<uint32_t>(j));
      s.code.push_back(row[j]);
    }
    s.row_start.push_back(static_cast<uint32_t>(s.code.size()));
  }
  return s;
}

}  // namespace

Fp8SpecialCodes find_fp8_special_codes(const Fp8MatrixView& w) { return find<true>(w); }
Fp8SpecialCodes find_fp8_special_codes_reference(const Fp8MatrixView& w) { return find<false>(w); }

}  // namespace hymoe::kernels
