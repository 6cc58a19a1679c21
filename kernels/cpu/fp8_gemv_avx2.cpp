// FP8 GEMV, AVX2 + FMA variant: 8 weights per step decoded to FP32 (the special codes through an
// 8-entry permute plus a NaN blend), activations widened from BF16, FMA into FP32.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>

#include "hymoe/common/numeric.h"
#include "variants.h"

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

inline __m256 load_bf16x8(const uint16_t* p, int64_t n) {
  __m128i h;
  if (n >= 8) {
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else {
    alignas(16) uint16_t tmp[8] = {};
    std::copy(p, p + n, tmp);
    h = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int B, int R>
void gemv_rows(const Fp8GemvParams& p, const Fp8F32Decoder8& dec, int64_t i0) {
  const int64_t k_total = p.w.cols;
  const int64_t scale_cols = p.w.scale_cols();
  const uint8_t* wrow[R];
  const float* srow[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    wrow[r] = p.w.data + (i0 + r) * k_total;
    srow[r] = p.w.scale_inv + ((i0 + r) / Fp8Matrix::kBlock) * scale_cols;
  }
  __m256 tot[R][B];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int b = 0; b < B; ++b) tot[r][b] = _mm256_setzero_ps();

  for (int64_t kb = 0; kb < scale_cols; ++kb) {
    const int64_t k0 = kb * Fp8Matrix::kBlock;
    const int64_t k1 = std::min(k_total, k0 + Fp8Matrix::kBlock);
    __m256 acc[R][B];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[r][b] = _mm256_setzero_ps();
    for (int64_t k = k0; k < k1; k += 8) {
      const int64_t n = k1 - k;
      __m256 xv[B];
      #pragma GCC unroll 8
      for (int b = 0; b < B; ++b) xv[b] = load_bf16x8(p.x[b] + k, n);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 wv = dec(load8(wrow[r] + k, n));
        #pragma GCC unroll 8
        for (int b = 0; b < B; ++b) acc[r][b] = _mm256_fmadd_ps(wv, xv[b], acc[r][b]);
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 s = _mm256_set1_ps(srow[r][kb]);
      #pragma GCC unroll 8
      for (int b = 0; b < B; ++b) tot[r][b] = _mm256_fmadd_ps(acc[r][b], s, tot[r][b]);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int b = 0; b < B; ++b) {
      p.y[b][i0 + r] = hsum(tot[r][b]) * p.out_scale[b];
    }
}

template <int B>
void gemv_batch(const Fp8GemvParams& p) {
  // 16 YMM registers: keep R * B * 2 accumulators at or below 8.
  constexpr int R = B == 1 ? 4 : B == 2 ? 2 : 1;
  const Fp8F32Decoder8 dec;
  int64_t i = p.row_begin;
  for (; i + R <= p.row_end; i += R) gemv_rows<B, R>(p, dec, i);
  for (; i < p.row_end; ++i) gemv_rows<B, 1>(p, dec, i);
}

}  // namespace

void fp8_gemv_avx2(const Fp8GemvParams& p) {
  with_gemv_batch(p.batch, [&p]<int B>() { gemv_batch<B>(p); });
}

void fp8_to_bf16_avx2(const uint8_t* src, uint16_t* dst, size_t n) {
  const Fp8F32Decoder8 dec;
  for (size_t i = 0; i < n; i += 8) {
    const int64_t left = static_cast<int64_t>(n - i);
    alignas(32) uint32_t f[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(f), _mm256_castps_si256(dec(load8(src + i, left))));
    for (int64_t j = 0; j < std::min<int64_t>(8, left); ++j) dst[i + j] = static_cast<uint16_t>(f[j] >> 16);
  }
}

}  // namespace hymoe::kernels::detail
