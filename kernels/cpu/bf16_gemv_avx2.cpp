// BF16 matvec, AVX2 + FMA variant: each 8 weights are widened to FP32 exactly (a 16-bit shift) and
// fused-multiply-added against up to 4 tokens: per (row, token) one FP32 accumulator of 8 lanes
// over the row, then its horizontal sum (the sums of the earlier pair loop, unchanged). R rows per
// pass share the x loads (Bf16GemvRowsAvx2: 8 rows at 1 token, 4 at 2, 2 at 3-4; R x T <= 8
// accumulators + T activations + 1 weight vector of the 16 YMM registers), and a software
// prefetch into L2 walks the next pass's rows, one 64-byte line per row every 32 weights, as the
// AVX-512 variant's does.
#include <immintrin.h>

#include <algorithm>

#include "avx2_util.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

template <int T, int R>
void rows(const Bf16GemvParams& p, int64_t t0, int64_t i0) {
  const int64_t cols = p.cols;
  const uint16_t* w[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) w[r] = p.w + (i0 + r) * cols;
  const uint16_t* pf = i0 + 2 * R <= p.row_end ? w[0] + R * cols : w[0];  // the next pass's rows
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  auto step = [&](int64_t j, int64_t n) {
    __m256 x[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) x[t] = load_f32x8(p.x + (t0 + t) * cols + j, n);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 wv = load_bf16x8(w[r] + j, n);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, x[t], acc[r][t]);
    }
  };
  int64_t j = 0;
  for (; j + 32 <= cols; j += 32) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(pf + r * cols + j), _MM_HINT_T1);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) step(j + 8 * k, 8);  // n = 8: the loads' one-instruction path
  }
  for (; j + 8 <= cols; j += 8) step(j, 8);
  if (j < cols) step(j, cols - j);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) p.y[(t0 + t) * p.rows + i0 + r] = hsum256(acc[r][t]);
}

}  // namespace

void bf16_gemv_avx2(const Bf16GemvParams& p) {
  bf16_gemv_blocks<Bf16GemvRowsAvx2>(p, [&p]<int T, int R>(int64_t t0, int64_t i) { rows<T, R>(p, t0, i); });
}

}  // namespace hymoe::kernels::detail
