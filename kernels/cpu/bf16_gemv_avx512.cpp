// BF16 matvec, AVX-512 variant: each 16 weights are widened to FP32 exactly (a 16-bit shift) and
// fused-multiply-added against up to 4 tokens: per (row, token) one FP32 accumulator of 16 lanes
// over the row, then its horizontal sum (the sums of the earlier pair loop, unchanged). R rows
// per pass share the x loads and keep R weight streams in flight (Bf16GemvRowsAvx512: 8 rows at
// 1-2 tokens, 6 at 3-4; R x T <= 24 accumulators, in registers, loops unrolled by pragma), and a
// software prefetch into L2 walks the next pass's rows, one 64-byte line per row and step, as the
// FP8 GEMV's does.
// (Rows in pairs without the prefetch read 0.44 / 0.61 of the read probe at 1 / 2 threads on the
// lm_head shape, 0.82-0.86 / 0.90-0.93 this way: docs/experiments.md, CPU GEMV.)
#include <immintrin.h>

#include <algorithm>

#include "avx512_util.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

inline __m512 widen(__m256i bf16) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16), 16));
}

template <int T, int R>
void rows(const Bf16GemvParams& p, int64_t t0, int64_t i0) {
  const int64_t cols = p.cols;
  const uint16_t* w[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) w[r] = p.w + (i0 + r) * cols;
  // The next pass's rows (the caller's range ends before the matrix does, or this is the last
  // pass: then the prefetch re-touches this pass's rows).
  const uint16_t* pf = i0 + 2 * R <= p.row_end ? w[0] + R * cols : w[0];
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= cols; j += 32) {
    // One 64-byte line of each next row per 32 weights of this pass's rows.
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(pf + r * cols + j), _MM_HINT_T1);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512 x[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) x[t] = _mm512_loadu_ps(p.x + (t0 + t) * cols + j + 16 * h);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 wv = widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + j + 16 * h)));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(wv, x[t], acc[r][t]);
      }
    }
  }
  for (; j < cols; j += 16) {  // the last 16 or fewer (masked: the missing lanes add 0 * 0)
    const __mmask16 m = j + 16 <= cols ? __mmask16(0xFFFF) : __mmask16((1u << (cols - j)) - 1u);
    __m512 x[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) x[t] = _mm512_maskz_loadu_ps(m, p.x + (t0 + t) * cols + j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 wv = widen(_mm256_maskz_loadu_epi16(m, w[r] + j));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(wv, x[t], acc[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) p.y[(t0 + t) * p.rows + i0 + r] = hsum512(acc[r][t]);
}

// Rows per pass at T tokens: 8 at one and two, 6 at three and four (R x T <= 24 accumulators of
// the 32 zmm, beside T activations and the widened weights). At 4 tokens 6 rows read the lm_head
// shape 1.20x as fast as 2 rows (each activation load serves 3x the weights); 12 rows at 2
// tokens lost to 8 (docs/experiments.md, CPU GEMV).
struct Bf16GemvRowsAvx512 {
  template <int T>
  static constexpr int rows = T <= 2 ? 8 : 6;
};

}  // namespace

void bf16_gemv_avx512(const Bf16GemvParams& p) {
  bf16_gemv_blocks<Bf16GemvRowsAvx512>(p, [&p]<int T, int R>(int64_t t0, int64_t i) { rows<T, R>(p, t0, i); });
}

}  // namespace hymoe::kernels::detail
