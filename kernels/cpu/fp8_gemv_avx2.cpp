// FP8 GEMV, AVX2 + FMA variant: 8 weights per step decoded to FP32 (the special codes through an
// 8-entry permute plus a NaN blend), activations widened from BF16, FMA into FP32. The body is
// fp8_gemv_f32_body.h's; this file is the ISA's helpers.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>

#include "avx2_util.h"
#include "fp8_gemv_f32_body.h"
#include "hymoe/common/numeric.h"

namespace hymoe::kernels::detail {
namespace {

inline constexpr std::array<uint32_t, 8> kSubnormalF32 = [] {
  std::array<uint32_t, 8> t{};
  for (int m = 0; m < 8; ++m) t[m] = std::bit_cast<uint32_t>(fp8_e4m3_to_float(static_cast<uint8_t>(m)));
  return t;
}();

struct Fp8F32Decoder8 {
  __m256i table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kSubnormalF32.data()));
  __m256i mag_mask = _mm256_set1_epi32(0x7F);
  __m256i bias = _mm256_set1_epi32(120 << 23);
  __m256i eight = _mm256_set1_epi32(8);
  __m256i nan_mag = _mm256_set1_epi32(0x7F);
  __m256i quiet_nan = _mm256_set1_epi32(0x7FC00000);
  __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));

  // 8 codes (the low 8 bytes of `codes`) -> 8 FP32.
  __m256 operator()(__m128i codes) const {
    const __m256i w = _mm256_cvtepu8_epi32(codes);
    const __m256i mag = _mm256_and_si256(w, mag_mask);
    const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(mag, 20), bias);
    const __m256i sub = _mm256_permutevar8x32_epi32(table, mag);
    __m256i v = _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(eight, mag));
    v = _mm256_blendv_epi8(v, quiet_nan, _mm256_cmpeq_epi32(mag, nan_mag));
    v = _mm256_or_si256(v, _mm256_and_si256(_mm256_slli_epi32(w, 24), sign_bit));
    return _mm256_castsi256_ps(v);
  }
};

inline __m128i load8(const uint8_t* p, int64_t n) {
  if (n >= 8) return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  alignas(16) uint8_t tmp[16] = {};
  std::copy(p, p + n, tmp);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
}

struct Avx2Ops {
  using V = __m256;
  static constexpr int kWidth = 8;
  // 16 YMM registers: accumulators and totals, 2 * R * B <= 8.
  static constexpr int rows_per_pass(int b) { return b == 1 ? 4 : b == 2 ? 2 : 1; }

  Fp8F32Decoder8 dec;

  V decode(const uint8_t* w, int64_t n) const { return dec(load8(w, n)); }
  static V load_x(const uint16_t* x, int64_t n) { return load_bf16x8(x, n); }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float s) { return _mm256_set1_ps(s); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float hsum(V v) { return hsum256(v); }
  static void store(float* f, V v) { _mm256_store_ps(f, v); }
};

}  // namespace

void fp8_gemv_avx2(const Fp8GemvParams& p) { fp8_gemv_f32<Avx2Ops>(p); }

void fp8_to_bf16_avx2(const uint8_t* src, uint16_t* dst, size_t n) { fp8_to_bf16_f32<Avx2Ops>(src, dst, n); }

}  // namespace hymoe::kernels::detail
