// Internal: AVX-512F helpers shared by the MLA attention variants (include only from a
// translation unit built with AVX-512 flags). Internal linkage: each variant's translation unit
// keeps its own copy, compiled with its own flags.
#pragma once

#include <immintrin.h>

namespace hymoe::kernels::detail {
namespace {

// Per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3].
inline __m512 pair_sum(__m512 a, __m512 b) { return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b)); }
// Per 128-bit lane L: the lane-L partial sums of v0..v3.
inline __m512 quad_sum(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  const __m512 x = pair_sum(v0, v1), y = pair_sum(v2, v3);
  return _mm512_add_ps(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
}
// Lane i of the result = the sum of all lanes of v[i].
inline __m512 reduce16(const __m512* v) {
  const __m512 s0 = quad_sum(v[0], v[1], v[2], v[3]), s1 = quad_sum(v[4], v[5], v[6], v[7]);
  const __m512 s2 = quad_sum(v[8], v[9], v[10], v[11]), s3 = quad_sum(v[12], v[13], v[14], v[15]);
  const __m512 u01 = _mm512_add_ps(_mm512_shuffle_f32x4(s0, s1, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(s0, s1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 u23 = _mm512_add_ps(_mm512_shuffle_f32x4(s2, s3, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(s2, s3, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(3, 1, 3, 1)));
}

inline float hsum(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

inline float hmax(__m512 v) {
  const __m256 h = _mm256_max_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 q = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_max_ps(q, _mm_movehl_ps(q, q));
  q = _mm_max_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// 2^x for x <= 0 (below -127 gives ~0; callers zero the masked lanes): 2^round(x) by vscalefps
// times a degree-7 Taylor polynomial of 2^f on [-0.5, 0.5] (relative error < 1e-8 + rounding).
inline __m512 exp2_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-127.0f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 r = _mm512_set1_ps(1.525273380405984e-05f);
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(1.5403530393381606e-04f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(1.3333558146428443e-03f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(9.618129107628477e-03f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(5.550410866482158e-02f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(2.402265069591007e-01f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(6.931471805599453e-01f));
  r = _mm512_fmadd_ps(r, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(r, n);
}

}  // namespace
}  // namespace hymoe::kernels::detail
