// FP8 GEMV, portable scalar variant (the dispatch fallback) and the double-precision reference.
#include <algorithm>

#include "hymoe/common/numeric.h"
#include "variants.h"

namespace hymoe::kernels {
namespace detail {

// Same post-scaled structure as the SIMD variants, one row at a time, FP32 accumulation.
void fp8_gemv_scalar(const Fp8GemvParams& p) {
  const int64_t k_total = p.w.cols;
  const int64_t scale_cols = p.w.scale_cols();
  for (int64_t i = p.row_begin; i < p.row_end; ++i) {
    const uint8_t* wrow = p.w.data + i * k_total;
    const float* srow = p.w.scale_inv + (i / Fp8MatrixView::kBlock) * scale_cols;
    float tot[kMaxGemvBatch] = {};
    for (int64_t kb = 0; kb < scale_cols; ++kb) {
      const int64_t k0 = kb * Fp8MatrixView::kBlock;
      const int64_t k1 = std::min(k_total, k0 + Fp8MatrixView::kBlock);
      float acc[kMaxGemvBatch] = {};
      for (int64_t k = k0; k < k1; ++k) {
        const float w = kFp8E4M3Table[wrow[k]];
        for (int b = 0; b < p.batch; ++b) acc[b] += w * bf16_to_float(p.x[b][k]);
      }
      for (int b = 0; b < p.batch; ++b) tot[b] += acc[b] * srow[kb];
    }
    for (int b = 0; b < p.batch; ++b)
      p.y[b][i] = tot[b] * p.out_scale[b];
  }
}

void fp8_to_bf16_scalar(const uint8_t* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = float_to_bf16(kFp8E4M3Table[src[i]]);
}

}  // namespace detail

void fp8_gemv_reference(const Fp8GemvParams& p) {
  for (int64_t i = p.row_begin; i < p.row_end; ++i) {
    for (int b = 0; b < p.batch; ++b) {
      double sum = 0.0;
      for (int64_t k = 0; k < p.w.cols; ++k) {
        const double w = static_cast<double>(fp8_e4m3_to_float(p.w.data[i * p.w.cols + k])) *
                         static_cast<double>(p.w.scale(i, k));
        sum += w * static_cast<double>(bf16_to_float(p.x[b][k]));
      }
      p.y[b][i] = static_cast<float>(sum * p.out_scale[b]);
    }
  }
}

}  // namespace hymoe::kernels
