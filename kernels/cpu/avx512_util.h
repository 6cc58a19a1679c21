// Internal, for TUs compiled with AVX-512 F/DQ: small helpers the AVX-512 kernels share.
#pragma once

#include <immintrin.h>

namespace hymoe::kernels::detail {

// Horizontal sum (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized in its own header).
inline float hsum512(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

}  // namespace hymoe::kernels::detail
