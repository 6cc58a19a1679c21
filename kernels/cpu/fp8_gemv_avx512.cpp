// FP8 GEMV, AVX-512 F/BW variant for CPUs without BF16 dot products (Skylake-X, Ice Lake):
// 16 weights per step decoded straight to FP32, activations widened from BF16, FMA into FP32.
#include <immintrin.h>

#include <algorithm>

#include "fp8_decode_avx512.h"
#include "variants.h"

namespace hymoe::kernels::detail {
namespace {

inline __m512 load_bf16x16(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

template <int B, int R>
void gemv_rows(const Fp8GemvParams& p, const Fp8F32Decoder& dec, int64_t i0) {
  const int64_t k_total = p.w.cols;
  const int64_t scale_cols = p.w.scale_cols();
  const uint8_t* wrow[R];
  const float* srow[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    wrow[r] = p.w.data + (i0 + r) * k_total;
    srow[r] = p.w.scale_inv + ((i0 + r) / Fp8Matrix::kBlock) * scale_cols;
  }
  __m512 tot[R][B];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int b = 0; b < B; ++b) tot[r][b] = _mm512_setzero_ps();

  for (int64_t kb = 0; kb < scale_cols; ++kb) {
    const int64_t k0 = kb * Fp8Matrix::kBlock;
    const int64_t k1 = std::min(k_total, k0 + Fp8Matrix::kBlock);
    __m512 acc[R][B];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_ps();
    for (int64_t k = k0; k < k1; k += 16) {
      const __mmask16 m = k + 16 <= k1 ? __mmask16(0xFFFF) : __mmask16((1u << (k1 - k)) - 1u);
      __m512 xv[B];
      #pragma GCC unroll 8
      for (int b = 0; b < B; ++b) xv[b] = load_bf16x16(p.x[b] + k, m);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 wv = dec(_mm_maskz_loadu_epi8(m, wrow[r] + k));
        #pragma GCC unroll 8
        for (int b = 0; b < B; ++b) acc[r][b] = _mm512_fmadd_ps(wv, xv[b], acc[r][b]);
      }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_set1_ps(srow[r][kb]);
      #pragma GCC unroll 8
      for (int b = 0; b < B; ++b) tot[r][b] = _mm512_fmadd_ps(acc[r][b], s, tot[r][b]);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 8
    for (int b = 0; b < B; ++b) {
      p.y[b][i0 + r] = _mm512_reduce_add_ps(tot[r][b]) * p.out_scale[b];
    }
}

template <int B>
void gemv_batch(const Fp8GemvParams& p) {
  constexpr int R = gemv_rows_per_pass_f32(B);
  const Fp8F32Decoder dec;
  int64_t i = p.row_begin;
  for (; i + R <= p.row_end; i += R) gemv_rows<B, R>(p, dec, i);
  for (; i < p.row_end; ++i) gemv_rows<B, 1>(p, dec, i);
}

}  // namespace

void fp8_gemv_avx512(const Fp8GemvParams& p) {
  with_gemv_batch(p.batch, [&p]<int B>() { gemv_batch<B>(p); });
}

// FP32 decode, then the (exact: at most 4 significant bits) truncation to BF16.
void fp8_to_bf16_avx512(const uint8_t* src, uint16_t* dst, size_t n) {
  const Fp8F32Decoder dec;
  for (size_t i = 0; i < n; i += 16) {
    const size_t left = n - i;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
    const __m512i f = _mm512_castps_si512(dec(_mm_maskz_loadu_epi8(m, src + i)));
    _mm256_mask_storeu_epi16(dst + i, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(f, 16)));
  }
}

}  // namespace hymoe::kernels::detail
