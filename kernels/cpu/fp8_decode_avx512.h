// Internal, for TUs compiled with AVX-512 BW: FP8 E4M3FN -> BF16 / FP32 in registers.
//
// Normal codes: the 7 magnitude bits shifted into the BF16 (FP32) exponent/mantissa position give
// the value times 2^-120; adding 120 to the exponent field makes it exact. Exponent-0 codes
// (subnormals, which vdpbf16ps would flush as BF16 denormals) and the NaN magnitude 0x7F are the
// "special" codes: a permute looks them up in a small table indexed by the magnitude's low bits.
// Special <=> (mag - 8) mod 2^16 >= 119, i.e. mag in [0, 8) or mag == 127: one subtract, one compare.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>

#include "hymoe/common/numeric.h"

namespace hymoe::kernels::detail {

// Index = magnitude & 31 (BF16) : [0, 8) subnormals, 31 = magnitude 127 = NaN.
inline constexpr std::array<uint16_t, 32> kFp8SpecialBf16 = [] {
  std::array<uint16_t, 32> t{};
  for (int m = 0; m < 8; ++m) t[m] = float_to_bf16(fp8_e4m3_to_float(static_cast<uint8_t>(m)));
  t[31] = 0x7FC0;
  return t;
}();
// Index = magnitude & 15 (FP32): [0, 8) subnormals, 15 = NaN.
inline constexpr std::array<uint32_t, 16> kFp8SpecialF32 = [] {
  std::array<uint32_t, 16> t{};
  for (int m = 0; m < 8; ++m) t[m] = std::bit_cast<uint32_t>(fp8_e4m3_to_float(static_cast<uint8_t>(m)));
  t[15] = 0x7FC00000u;
  return t;
}();

struct Fp8Bf16Decoder {
  __m512i table = _mm512_loadu_si512(kFp8SpecialBf16.data());
  __m512i mag_mask = _mm512_set1_epi16(0x7F);
  __m512i bias = _mm512_set1_epi16(120 << 7);
  __m512i eight = _mm512_set1_epi16(8);
  __m512i limit = _mm512_set1_epi16(119);
  __m512i sign_bit = _mm512_set1_epi16(static_cast<short>(0x8000));

  // 32 codes -> 32 BF16.
  __m512i operator()(__m256i codes) const {
    const __m512i w = _mm512_cvtepu8_epi16(codes);
    const __m512i mag = _mm512_and_si512(w, mag_mask);
    const __m512i normal = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), bias);
    const __mmask32 special = _mm512_cmpge_epu16_mask(_mm512_sub_epi16(mag, eight), limit);
    const __m512i v = _mm512_mask_permutexvar_epi16(normal, special, mag, table);
    // v | (w << 8 & 0x8000): ternary logic A | (B & C) = 0xF8.
    return _mm512_ternarylogic_epi32(v, _mm512_slli_epi16(w, 8), sign_bit, 0xF8);
  }
};

struct Fp8F32Decoder {
  __m512i table = _mm512_loadu_si512(kFp8SpecialF32.data());
  __m512i mag_mask = _mm512_set1_epi32(0x7F);
  __m512i bias = _mm512_set1_epi32(120 << 23);
  __m512i eight = _mm512_set1_epi32(8);
  __m512i limit = _mm512_set1_epi32(119);
  __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));

  // 16 codes -> 16 FP32.
  __m512 operator()(__m128i codes) const {
    const __m512i w = _mm512_cvtepu8_epi32(codes);
    const __m512i mag = _mm512_and_si512(w, mag_mask);
    const __m512i normal = _mm512_add_epi32(_mm512_slli_epi32(mag, 20), bias);
    const __mmask16 special = _mm512_cmpge_epu32_mask(_mm512_sub_epi32(mag, eight), limit);
    const __m512i v = _mm512_mask_permutexvar_epi32(normal, special, mag, table);
    return _mm512_castsi512_ps(
        _mm512_ternarylogic_epi32(v, _mm512_slli_epi32(w, 24), sign_bit, 0xF8));
  }
};

}  // namespace hymoe::kernels::detail
