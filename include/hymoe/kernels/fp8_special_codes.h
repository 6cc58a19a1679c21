// The FP8 codes of a matrix that the AVX512-BF16 GEMV's shift decode does not produce, found once
// per matrix (at load) so that the GEMV's inner loop needs no check for them.
//
// The shift decode (Fp8Bf16Decoder::shift) turns a code c into BF16 bits with two 16-bit shifts
// and one vpternlog: sign at bit 15, the 7 magnitude bits at bits 10..4, bit 14 set. For every
// code with a nonzero exponent field that is exactly the code's value times 2^8 (the GEMV folds
// 2^-8 into the block scale). The others ("special" codes) come out wrong: exponent field 0
// (zero, -0 and the 14 subnormals) and NaN (0x7F, 0xFF). A GEMV given a matrix's special codes
// adds, per row, the difference between each special code's exact value and its shift value times
// the activation (NaN for a NaN code, so NaN weights still give NaN rows). In a quantised
// checkpoint they are rare (~2e-4 of the codes of N(0, 448/8) weights rounded to FP8).
#pragma once

#include <cstdint>
#include <vector>

#include "hymoe/common/numeric.h"
#include "hymoe/kernels/fp8_matrix.h"

namespace hymoe {

// Special codes of one Fp8MatrixView by row (CSR): row i's are [row_start[i], row_start[i + 1]),
// columns ascending. 4 bytes per row and 5 per code (a matrix of < 2^32 codes).
struct Fp8SpecialCodes {
  std::vector<uint32_t> row_start;  // rows + 1 entries
  std::vector<uint32_t> col;
  std::vector<uint8_t> code;

  size_t count() const { return code.size(); }
};

namespace kernels {

constexpr bool is_fp8_shift_special(uint8_t c) { return (c & 0x78) == 0 || (c & 0x7F) == 0x7F; }

// The BF16 bits the shift decode gives code c (its value times 2^8 unless c is special).
constexpr uint16_t fp8_shift_decode_bits(uint8_t c) {
  const auto w = static_cast<int16_t>(static_cast<uint16_t>(c << 8));
  return static_cast<uint16_t>((static_cast<uint16_t>(w >> 4) & 0x87F0u) | 0x4000u);
}

// What a GEMV adds for special code c per unit of (block scale x activation): its exact value
// minus its shift value times 2^-8 (NaN for 0x7F / 0xFF).
constexpr float fp8_shift_correction(uint8_t c) {
  return fp8_e4m3_to_float(c) - bf16_to_float(fp8_shift_decode_bits(c)) * (1.0f / 256.0f);
}

// Every special code of w (all rows): a word test per 8 bytes, a byte loop only over words that
// may hold one (so a checkpoint's rare special codes cost about one pass over the bytes).
Fp8SpecialCodes find_fp8_special_codes(const Fp8MatrixView& w);
// The same by one byte at a time (the reference of the tests).
Fp8SpecialCodes find_fp8_special_codes_reference(const Fp8MatrixView& w);

}  // namespace kernels
}  // namespace hymoe
