// FP8 GEMV, AVX512-BF16 (+VBMI) variant: 64 weights per step decoded to 2 x 32 BF16 by table
// lookup (Fp8Bf16Decoder) and dotted with BF16 activations by vdpbf16ps. R rows x B batch
// accumulators per pass (R * B <= 16); each 128-wide K block's partial sums are scaled into
// the totals with one FMA.
#include <immintrin.h>

#include <algorithm>

#include "fp8_decode_avx512.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

template <int B, int R>
void gemv_rows(const Fp8GemvParams& p, const Fp8Bf16Decoder& dec, int64_t i0, int64_t ahead) {
  const int64_t k_total = p.w.cols;
  const int64_t scale_cols = p.w.scale_cols();
  const uint8_t* wrow[R];
  const float* srow[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    wrow[r] = p.w.data + (i0 + r) * k_total;
    srow[r] = p.w.scale_inv + ((i0 + r) / Fp8Matrix::kBlock) * scale_cols;
  }
  // Block totals in L1, not registers: updated once per 128 columns, they leave the registers
  // to the accumulators.
  alignas(64) float tot[R][B][16] = {};

  for (int64_t kb = 0; kb < scale_cols; ++kb) {
    const int64_t k0 = kb * Fp8Matrix::kBlock;
    const int64_t k1 = std::min(k_total, k0 + Fp8Matrix::kBlock);
    __m512 acc[R][B];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_ps();
    int64_t k = k0;
    for (; k + 64 <= k1; k += 64) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        // Software prefetch `ahead` bytes down the weights: by default (ahead = R rows) the same
        // column of the next pass, into L2, so short rows (K = 2048) stay fed too.
        _mm_prefetch(reinterpret_cast<const char*>(wrow[r] + k + ahead), _MM_HINT_T1);
        __m512i w0, w1;
        dec(_mm512_loadu_si512(wrow[r] + k), w0, w1);
#pragma GCC unroll 8
        for (int b = 0; b < B; ++b) {
          acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w0, (__m512bh)_mm512_loadu_si512(p.x[b] + k));
          acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w1, (__m512bh)_mm512_loadu_si512(p.x[b] + k + 32));
        }
      }
    }
    if (k < k1) {  // K not a multiple of 64: masked loads zero the missing lanes
      const int64_t n = k1 - k;
      const __mmask64 mw = _cvtu64_mask64(n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1);
      const __mmask32 m0 = _cvtu32_mask32(n >= 32 ? ~0u : (1u << n) - 1u);
      const __mmask32 m1 = _cvtu32_mask32(n <= 32 ? 0u : (1u << (n - 32)) - 1u);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m512i w0, w1;
        dec(_mm512_maskz_loadu_epi8(mw, wrow[r] + k), w0, w1);
#pragma GCC unroll 8
        for (int b = 0; b < B; ++b) {
          acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w0,
                                       (__m512bh)_mm512_maskz_loadu_epi16(m0, p.x[b] + k));
          acc[r][b] = _mm512_dpbf16_ps(acc[r][b], (__m512bh)w1,
                                       (__m512bh)_mm512_maskz_loadu_epi16(m1, p.x[b] + k + 32));
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(srow[r][kb]);
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b)
        _mm512_store_ps(tot[r][b], _mm512_fmadd_ps(acc[r][b], s, _mm512_load_ps(tot[r][b])));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b)
      p.y[b][i0 + r] = _mm512_reduce_add_ps(_mm512_load_ps(tot[r][b])) * p.out_scale[b];
}

template <int B>
void gemv_batch(const Fp8GemvParams& p) {
  constexpr int R = gemv_rows_per_pass(B);
  const Fp8Bf16Decoder dec;
  const int64_t distance = gemv_prefetch_distance();
  const int64_t ahead = distance >= 0 ? distance : R * p.w.cols;
  int64_t i = p.row_begin;
  for (; i + R <= p.row_end; i += R) gemv_rows<B, R>(p, dec, i, ahead);
  for (; i < p.row_end; ++i) gemv_rows<B, 1>(p, dec, i, ahead);
}

}  // namespace

void fp8_gemv_avx512bf16(const Fp8GemvParams& p) {
  with_gemv_batch(p.batch, [&p]<int B>() { gemv_batch<B>(p); });
}

void fp8_to_bf16_avx512bf16(const uint8_t* src, uint16_t* dst, size_t n) {
  const Fp8Bf16Decoder dec;
  for (size_t i = 0; i < n; i += 64) {
    const size_t left = n - i;
    const __mmask64 m = _cvtu64_mask64(left >= 64 ? ~uint64_t{0} : (uint64_t{1} << left) - 1);
    __m512i w0, w1;
    dec(_mm512_maskz_loadu_epi8(m, src + i), w0, w1);
    _mm512_mask_storeu_epi16(dst + i, _cvtu32_mask32(left >= 32 ? ~0u : (1u << left) - 1u), w0);
    if (left > 32) {
      _mm512_mask_storeu_epi16(dst + i + 32,
                               _cvtu32_mask32(left >= 64 ? ~0u : (1u << (left - 32)) - 1u), w1);
    }
  }
}

}  // namespace hymoe::kernels::detail
