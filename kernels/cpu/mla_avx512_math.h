// Internal: AVX-512F helpers shared by the MLA attention variants (include only from a
// translation unit built with AVX-512 flags). Internal linkage: each variant's translation unit
// keeps its own copy, compiled with its own flags.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "avx512_util.h"
#include "mla_attention_layout.h"

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

// Scores of 4 rows x 4 keys (lane 4r + j: row r, key j) into s[r][g .. g+4).
template <int kStride>
inline void store_scores_4x4(__m512 v, float (*s)[kStride], int64_t g) {
  _mm_store_ps(&s[0][g], _mm512_extractf32x4_ps(v, 0));
  _mm_store_ps(&s[1][g], _mm512_extractf32x4_ps(v, 1));
  _mm_store_ps(&s[2][g], _mm512_extractf32x4_ps(v, 2));
  _mm_store_ps(&s[3][g], _mm512_extractf32x4_ps(v, 3));
}

// One row's online-softmax step over a block of 64 raw scores `s` (keys [0, valid) count; sl2 =
// scale * log2(e)): e = 2^(s * sl2 - m_new), 0 past `valid`; updates the row's running max m
// and sum l (first: the row's first block) and returns alpha, the factor for its earlier output.
inline float softmax_block_row(const float* s, int64_t valid, __m512 sl2, bool first, float& m, float& l,
                               __m512 (&e)[4]) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 x[4];
  __mmask16 mask[4];
  __m512 mx = neg_inf;
  for (int v = 0; v < 4; ++v) {
    mask[v] = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(static_cast<int>(valid - 16 * v)));
    x[v] = _mm512_mask_mul_ps(neg_inf, mask[v], _mm512_load_ps(s + 16 * v), sl2);
    mx = _mm512_max_ps(mx, x[v]);
  }
  const float bmax = hmax(mx);
  const float m_new = first ? bmax : std::max(m, bmax);
  const float alpha = first ? 0.0f : std::exp2(m - m_new);
  const __m512 mv = _mm512_set1_ps(m_new);
  for (int v = 0; v < 4; ++v) e[v] = _mm512_maskz_mov_ps(mask[v], exp2_ps(_mm512_sub_ps(x[v], mv)));
  const float sum = hsum512(_mm512_add_ps(_mm512_add_ps(e[0], e[1]), _mm512_add_ps(e[2], e[3])));
  l = (first ? 0.0f : l * alpha) + sum;
  m = m_new;
  return alpha;
}

// out[i] /= l[i] over the lora columns of every row: the softmax denominators applied once at
// the end (both variants accumulate unnormalised).
inline void normalize_rows(const MlaAttentionParams& p, const MlaRows& rows, const float* l,
                           int64_t lora) {
  for (int64_t i = 0; i < rows.count; ++i) {
    const __m512 inv = _mm512_set1_ps(1.0f / l[i]);
    float* out = rows.out(p, i);
    for (int64_t c = 0; c < lora; c += 16) _mm512_storeu_ps(out + c, _mm512_mul_ps(_mm512_loadu_ps(out + c), inv));
  }
}

}  // namespace
}  // namespace hymoe::kernels::detail
