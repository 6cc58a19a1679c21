// BF16 matvec, AVX-512 variant: each 16 weights are widened to FP32 exactly (a 16-bit shift) and
// fused-multiply-added against up to 4 tokens; two rows per pass share the x loads.
#include <immintrin.h>

#include <algorithm>

#include "avx512_util.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

inline __m512 widen(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}


template <int T, int R>
void rows(const Bf16GemvParams& p, int64_t t0, int64_t i0) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t j = 0; j < p.cols; j += 16) {
    const __mmask16 m = j + 16 <= p.cols ? __mmask16(0xFFFF) : __mmask16((1u << (p.cols - j)) - 1u);
    __m512 x[T];
    for (int t = 0; t < T; ++t) x[t] = _mm512_maskz_loadu_ps(m, p.x + (t0 + t) * p.cols + j);
    for (int r = 0; r < R; ++r) {
      const __m512 w = widen(p.w + (i0 + r) * p.cols + j, m);
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(w, x[t], acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) p.y[(t0 + t) * p.rows + i0 + r] = hsum512(acc[r][t]);
}


}  // namespace

void bf16_gemv_avx512(const Bf16GemvParams& p) {
  bf16_gemv_blocks(p, [&p]<int T, int R>(int64_t t0, int64_t i) { rows<T, R>(p, t0, i); });
}

}  // namespace hymoe::kernels::detail
