// Internal, for TUs compiled with AVX-512 BW: FP8 E4M3FN -> BF16 / FP32 in registers.
//
// FP32 (Fp8F32Decoder): the 7 magnitude bits shifted into the exponent/mantissa position give the
// value times 2^-120; adding 120 to the exponent field makes normal codes exact. Exponent-0 codes
// (subnormals) and the NaN magnitude 0x7F are "special": a permute looks them up in a small table
// indexed by the magnitude's low bits. Special <=> (mag - 8) mod 2^32 >= 119: one subtract, one
// compare. BF16 (Fp8Bf16Decoder, needs AVX512-VBMI): a full table lookup, see below.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>

#include "avx512_util.h"
#include "hymoe/common/numeric.h"

namespace hymoe::kernels::detail {

// Index = magnitude & 15 (FP32): [0, 8) subnormals, 15 = NaN.
inline constexpr std::array<uint32_t, 16> kFp8SpecialF32 = [] {
  std::array<uint32_t, 16> t{};
  for (int m = 0; m < 8; ++m) t[m] = std::bit_cast<uint32_t>(fp8_e4m3_to_float(static_cast<uint8_t>(m)));
  t[15] = 0x7FC00000u;
  return t;
}();

// Every magnitude 0..127 as BF16 (127 = NaN), split into low and high bytes for vpermi2b.
inline constexpr std::array<uint16_t, 128> kFp8MagnitudeBf16 = [] {
  std::array<uint16_t, 128> t{};
  for (int m = 0; m < 127; ++m) t[m] = float_to_bf16(fp8_e4m3_to_float(static_cast<uint8_t>(m)));
  t[127] = 0x7FC0;
  return t;
}();
inline constexpr std::array<uint8_t, 128> kFp8Bf16LowByte = [] {
  std::array<uint8_t, 128> t{};
  for (int m = 0; m < 128; ++m) t[m] = static_cast<uint8_t>(kFp8MagnitudeBf16[m] & 0xFF);
  return t;
}();
inline constexpr std::array<uint8_t, 128> kFp8Bf16HighByte = [] {
  std::array<uint8_t, 128> t{};
  for (int m = 0; m < 128; ++m) t[m] = static_cast<uint8_t>(kFp8MagnitudeBf16[m] >> 8);
  return t;
}();
// Byte indexes that interleave (low, high) byte vectors into 16-bit words: words 0..31, 32..63.
inline constexpr std::array<uint8_t, 64> kInterleaveFirst = [] {
  std::array<uint8_t, 64> t{};
  for (int i = 0; i < 32; ++i) {
    t[2 * i] = static_cast<uint8_t>(i);
    t[2 * i + 1] = static_cast<uint8_t>(64 + i);
  }
  return t;
}();
inline constexpr std::array<uint8_t, 64> kInterleaveSecond = [] {
  std::array<uint8_t, 64> t{};
  for (int i = 0; i < 32; ++i) {
    t[2 * i] = static_cast<uint8_t>(32 + i);
    t[2 * i + 1] = static_cast<uint8_t>(96 + i);
  }
  return t;
}();

// Word indexes (into the 64-word concatenation of two vectors) that put 64 BF16 activations in
// "lane order", the order Fp8Bf16Decoder::lane_order() leaves the weights in: first = elements
// 16l + j, second = 16l + 8 + j, for 128-bit lanes l < 4 and j < 8.
inline constexpr std::array<uint16_t, 32> kLaneOrderFirst = [] {
  std::array<uint16_t, 32> t{};
  for (int q = 0; q < 32; ++q) t[q] = static_cast<uint16_t>(16 * (q / 8) + q % 8);
  return t;
}();
inline constexpr std::array<uint16_t, 32> kLaneOrderSecond = [] {
  std::array<uint16_t, 32> t{};
  for (int q = 0; q < 32; ++q) t[q] = static_cast<uint16_t>(16 * (q / 8) + 8 + q % 8);
  return t;
}();

// FP8 -> BF16 by table lookup with AVX512-VBMI byte permutes, 64 codes at a time: the 7-bit
// magnitude indexes a 128-entry table of low bytes and one of high bytes (vpermi2b ignores the
// sign bit), the sign is ORed into the high bytes, and two more byte permutes interleave them
// into 2 x 32 BF16 in natural order. 5 instructions per 64 codes, every code exact (subnormals,
// which vdpbf16ps would flush as BF16 denormals, are ordinary table entries; 0x7F/0xFF -> NaN).
struct Fp8Bf16Decoder {
  __m512i lo_a = _mm512_loadu_si512(kFp8Bf16LowByte.data());
  __m512i lo_b = _mm512_loadu_si512(kFp8Bf16LowByte.data() + 64);
  __m512i hi_a = _mm512_loadu_si512(kFp8Bf16HighByte.data());
  __m512i hi_b = _mm512_loadu_si512(kFp8Bf16HighByte.data() + 64);
  __m512i first_idx = _mm512_loadu_si512(kInterleaveFirst.data());
  __m512i second_idx = _mm512_loadu_si512(kInterleaveSecond.data());
  __m512i sign_bit = _mm512_set1_epi8(static_cast<char>(0x80));

  // 64 codes -> BF16 of codes 0..31 (first) and 32..63 (second).
  void operator()(__m512i codes, __m512i& first, __m512i& second) const {
    const __m512i lo = _mm512_permutex2var_epi8(lo_a, codes, lo_b);
    __m512i hi = _mm512_permutex2var_epi8(hi_a, codes, hi_b);
    hi = _mm512_ternarylogic_epi32(hi, codes, sign_bit, 0xF8);  // hi | (codes & 0x80)
    first = _mm512_permutex2var_epi8(lo, first_idx, hi);
    second = _mm512_permutex2var_epi8(lo, second_idx, hi);
  }

  // The same lookups interleaved by two in-lane unpacks instead of two byte permutes (unpacks
  // issue on more ports on every AVX-512 core): BF16 of the 64 codes in lane order (see
  // kLaneOrderFirst). Dotted with activations in the same order, the sums are the same.
  void lane_order(__m512i codes, __m512i& first, __m512i& second) const {
    const __m512i lo = _mm512_permutex2var_epi8(lo_a, codes, lo_b);
    __m512i hi = _mm512_permutex2var_epi8(hi_a, codes, hi_b);
    hi = _mm512_ternarylogic_epi32(hi, codes, sign_bit, 0xF8);  // hi | (codes & 0x80)
    first = _mm512_unpacklo_epi8(lo, hi);
    second = _mm512_unpackhi_epi8(lo, hi);
  }
};

// Word indexes (into the 64-word concatenation of two vectors) that put 64 BF16 activations in
// "pair order", the order Fp8ShiftDecoder leaves the weights in: first = the even elements,
// second = the odd ones.
inline constexpr std::array<uint16_t, 32> kPairOrderFirst = [] {
  std::array<uint16_t, 32> t{};
  for (int q = 0; q < 32; ++q) t[q] = static_cast<uint16_t>(2 * q);
  return t;
}();
inline constexpr std::array<uint16_t, 32> kPairOrderSecond = [] {
  std::array<uint16_t, 32> t{};
  for (int q = 0; q < 32; ++q) t[q] = static_cast<uint16_t>(2 * q + 1);
  return t;
}();

// FP8 -> BF16 times 2^8 by shifts (hymoe/kernels/fp8_special_codes.h), 64 codes at a time: the
// 64 bytes as 32 words hold an even code in the low byte and an odd one in the high byte. The odd
// code: an arithmetic shift right by 4 puts its sign at bit 15 (and 14..11) and its magnitude at
// bits 10..4; one vpternlog keeps bits 15 and 10..4 and sets bit 14 (exponent + 128 instead of
// + 120). The even code is first copied into the high byte (one vpshufb). 5 instructions, one a
// byte shuffle (the table decode has four byte permutes and unpacks, all on one port on Intel
// cores). Exact for every code but the special ones (exponent field 0, NaN), which the GEMV
// corrects.
struct Fp8ShiftDecoder {
  __m512i keep = _mm512_set1_epi16(static_cast<short>(0x87F0));
  __m512i bit14 = _mm512_set1_epi16(0x4000);
  // vpshufb control: each 16-bit lane's even (low) byte into both its bytes (0, 0, 2, 2, ... per
  // 128-bit lane), so the even code's sign lands on bit 15 as a left shift by 8 would put it, on
  // the shuffle port (Intel: port 5) instead of the shift port (port 0, with the other shifts).
  __m512i even_up = _mm512_set4_epi64(0x0E0E0C0C0A0A0808, 0x0606040402020000, 0x0E0E0C0C0A0A0808, 0x0606040402020000);

  // 64 codes -> BF16 x 2^8 of the even codes (first) and the odd ones (second).
  void operator()(__m512i codes, __m512i& first, __m512i& second) const {
    // (a & keep) | bit14: 0xF0 & 0xCC | 0xAA.
    second = _mm512_ternarylogic_epi32(_mm512_srai_epi16(codes, 4), keep, bit14, 0xEA);
    first = _mm512_ternarylogic_epi32(_mm512_srai_epi16(_mm512_shuffle_epi8(codes, even_up), 4), keep, bit14, 0xEA);
  }
};

// Copies n BF16 activations to dst (64-byte aligned) in the order of two 32-word index tables
// (kLaneOrder* or kPairOrder*), 64 at a time, zero-filling dst up to the next multiple of 64.
inline void bf16_to_order(const uint16_t* src, int64_t n, uint16_t* dst,
                          const std::array<uint16_t, 32>& first, const std::array<uint16_t, 32>& second) {
  const __m512i first_idx = _mm512_loadu_si512(first.data());
  const __m512i second_idx = _mm512_loadu_si512(second.data());
  for (int64_t k = 0; k < n; k += 64) {
    const int64_t left = n - k;
    const __mmask32 m0 = _cvtu32_mask32(left >= 32 ? ~0u : (1u << left) - 1u);
    const __mmask32 m1 = _cvtu32_mask32(left >= 64 ? ~0u : left <= 32 ? 0u : (1u << (left - 32)) - 1u);
    const __m512i x0 = _mm512_maskz_loadu_epi16(m0, src + k);
    const __m512i x1 = _mm512_maskz_loadu_epi16(m1, src + k + 32);
    _mm512_store_si512(dst + k, _mm512_permutex2var_epi16(x0, first_idx, x1));
    _mm512_store_si512(dst + k + 32, _mm512_permutex2var_epi16(x0, second_idx, x1));
  }
}
inline void bf16_to_lane_order(const uint16_t* src, int64_t n, uint16_t* dst) {
  bf16_to_order(src, n, dst, kLaneOrderFirst, kLaneOrderSecond);
}


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
