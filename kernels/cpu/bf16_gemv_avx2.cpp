// BF16 matvec, AVX2 + FMA variant: each 8 weights are widened to FP32 exactly (a 16-bit shift) and
// fused-multiply-added against up to 4 tokens; two rows per pass share the x loads
// (2 x 4 accumulators + 4 activations + 1 weight vector of the 16 YMM registers).
#include <immintrin.h>

#include <algorithm>

#include "avx2_util.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

template <int T, int R>
void rows(const Bf16GemvParams& p, int64_t t0, int64_t i0) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  auto step = [&](int64_t j, int64_t n) {
    __m256 x[T];
    for (int t = 0; t < T; ++t) x[t] = load_f32x8(p.x + (t0 + t) * p.cols + j, n);
    for (int r = 0; r < R; ++r) {
      const __m256 w = load_bf16x8(p.w + (i0 + r) * p.cols + j, n);
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(w, x[t], acc[r][t]);
    }
  };
  int64_t j = 0;
  for (; j + 8 <= p.cols; j += 8) step(j, 8);  // n = 8: the loads take their one-instruction path
  if (j < p.cols) step(j, p.cols - j);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) p.y[(t0 + t) * p.rows + i0 + r] = hsum256(acc[r][t]);
}


}  // namespace

void bf16_gemv_avx2(const Bf16GemvParams& p) {
  bf16_gemv_blocks(p, [&p]<int T, int R>(int64_t t0, int64_t i) { rows<T, R>(p, t0, i); });
}

}  // namespace hymoe::kernels::detail
