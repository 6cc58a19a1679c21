// MLA absorption, AVX-512 variant: y[t] += x[t][i] * W[i] row by row, W's BF16 widened to FP32
// exactly (a 16-bit shift), a tile of TT tokens x V vectors of 16 columns held in registers
// across the whole reduction (no horizontal sums; W streamed once per tile of tokens).
#include <immintrin.h>

#include <algorithm>

#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

inline __m512 widen(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}

template <int TT, int V>
void tile(const MlaAbsorbParams& p, int64_t t0, int64_t c0) {
  __m512 acc[TT][V];
#pragma GCC unroll 16
  for (int t = 0; t < TT; ++t)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) acc[t][v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < p.k; ++i) {
    const uint16_t* w = p.w + i * p.n + c0;
    __m512 wv[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) wv[v] = widen(w + 16 * v);
#pragma GCC unroll 4
    for (int t = 0; t < TT; ++t) {
      const __m512 x = _mm512_set1_ps(p.x[(t0 + t) * p.x_stride + i]);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[t][v] = _mm512_fmadd_ps(wv[v], x, acc[t][v]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < TT; ++t)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(p.y + (t0 + t) * p.y_stride + c0 + 16 * v, acc[t][v]);
}

// Columns [0, n) for tokens t0..t0+TT-1: as many vectors per tile as 16 registers allow.
template <int TT>
void tokens(const MlaAbsorbParams& p, int64_t t0) {
  constexpr int kMaxV = 16 / TT;
  int64_t c0 = 0;
  for (; c0 + 16 * kMaxV <= p.n; c0 += 16 * kMaxV) tile<TT, kMaxV>(p, t0, c0);
  if constexpr (kMaxV > 8) {
    for (; c0 + 128 <= p.n; c0 += 128) tile<TT, 8>(p, t0, c0);
  }
  if constexpr (kMaxV > 4) {
    for (; c0 + 64 <= p.n; c0 += 64) tile<TT, 4>(p, t0, c0);
  }
  for (; c0 < p.n; c0 += 16) tile<TT, 1>(p, t0, c0);
}

}  // namespace

void mla_absorb_avx512(const MlaAbsorbParams& p) {
  int64_t t0 = 0;
  for (; t0 + 4 <= p.tokens; t0 += 4) tokens<4>(p, t0);
  if (t0 + 2 <= p.tokens) {
    tokens<2>(p, t0);
    t0 += 2;
  }
  if (t0 < p.tokens) tokens<1>(p, t0);
}

}  // namespace hymoe::kernels::detail
