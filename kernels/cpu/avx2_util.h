// Internal, for TUs compiled with AVX2 (+FMA): small helpers the AVX2 kernels share.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace hymoe::kernels::detail {

// 8 BF16 values widened to FP32 (exact: a 16-bit shift); n < 8 reads only the first n, rest 0.
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

// 8 FP32 values; n < 8 reads only the first n, rest 0.
inline __m256 load_f32x8(const float* p, int64_t n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane));
}

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace hymoe::kernels::detail
