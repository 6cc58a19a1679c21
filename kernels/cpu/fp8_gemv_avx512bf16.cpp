// FP8 GEMV, AVX512-BF16 variant: 32 weights per step decoded to BF16 in a ZMM and dotted with
// BF16 activations by vdpbf16ps. R rows x B batch accumulators per pass; each 128-wide K block's
// partial sums are scaled into the totals with one FMA.
#include <immintrin.h>

#include <algorithm>

#include "fp8_decode_avx512.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

template <int B, int R>
void gemv_rows(const Fp8GemvParams& p, const Fp8Bf16Decoder& dec, int64_t i0) {
  const int64_t k_total = p.w.cols;
  const int64_t scale_cols = p.w.scale_cols();
  const uint8_t* wrow[R];
  const float* srow[R];
  for (int r = 0; r < R; ++r) {
    wrow[r] = p.w.data + (i0 + r) * k_total;
    srow[r] = p.w.scale_inv + ((i0 + r) / Fp8Matrix::kBlock) * scale_cols;
  }
  __m512 tot[R][B];
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < B; ++b) tot[r][b] = _mm512_setzero_ps();

  for (int64_t kb = 0; kb < scale_cols; ++kb) {
    const int64_t k0 = kb * Fp8Matrix::kBlock;
    const int64_t k1 = std::min(k_total, k0 + Fp8Matrix::kBlock);
    __m512 acc[R][B];
    for (int r = 0; r < R; ++r)
      for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_ps();
    for (int64_t k = k0; k < k1; k += 32) {
      // Tail of a K that is not a multiple of 32: masked loads zero the missing lanes.
      const __mmask32 m = k + 32 <= k1 ? ~__mmask32{0} : _cvtu32_mask32((1u << (k1 - k)) - 1u);
      __m512bh xv[B];
      for (int b = 0; b < B; ++b)
        xv[b] = (__m512bh)_mm512_maskz_loadu_epi16(m, p.x[b] + k);
      for (int r = 0; r < R; ++r) {
        const __m512bh wv = (__m512bh)dec(_mm256_maskz_loadu_epi8(m, wrow[r] + k));
        for (int b = 0; b < B; ++b) acc[r][b] = _mm512_dpbf16_ps(acc[r][b], wv, xv[b]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(srow[r][kb]);
      for (int b = 0; b < B; ++b) tot[r][b] = _mm512_fmadd_ps(acc[r][b], s, tot[r][b]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < B; ++b) {
      p.y[b][i0 + r] = _mm512_reduce_add_ps(tot[r][b]) * p.out_scale[b];
    }
}

template <int B>
void gemv_batch(const Fp8GemvParams& p) {
  constexpr int R = gemv_rows_per_pass(B);
  const Fp8Bf16Decoder dec;
  int64_t i = p.row_begin;
  for (; i + R <= p.row_end; i += R) gemv_rows<B, R>(p, dec, i);
  for (; i < p.row_end; ++i) gemv_rows<B, 1>(p, dec, i);
}

}  // namespace

void fp8_gemv_avx512bf16(const Fp8GemvParams& p) {
  switch (p.batch) {
    case 1: return gemv_batch<1>(p);
    case 2: return gemv_batch<2>(p);
    case 3: return gemv_batch<3>(p);
    case 4: return gemv_batch<4>(p);
    case 5: return gemv_batch<5>(p);
    case 6: return gemv_batch<6>(p);
    case 7: return gemv_batch<7>(p);
    case 8: return gemv_batch<8>(p);
    default: return;  // validate() rejects other sizes before any call
  }
}

void fp8_to_bf16_avx512bf16(const uint8_t* src, uint16_t* dst, size_t n) {
  const Fp8Bf16Decoder dec;
  for (size_t i = 0; i < n; i += 32) {
    const size_t left = n - i;
    const __mmask32 m = left >= 32 ? ~__mmask32{0} : _cvtu32_mask32((1u << left) - 1u);
    _mm512_mask_storeu_epi16(dst + i, m, dec(_mm256_maskz_loadu_epi8(m, src + i)));
  }
}

}  // namespace hymoe::kernels::detail
