// BF16 matvec, baseline variant: 4 tokens per pass over a row, 8 partial sums per token.
#include <algorithm>

#include "hymoe/common/numeric.h"
#include "variants.h"

namespace hymoe::kernels::detail {

void bf16_gemv_scalar(const Bf16GemvParams& p) {
  constexpr int64_t kT = 4, kL = 8;
  for (int64_t t0 = 0; t0 < p.tokens; t0 += kT) {
    const int64_t nt = std::min(kT, p.tokens - t0);
    for (int64_t i = p.row_begin; i < p.row_end; ++i) {
      const uint16_t* w = p.w + i * p.cols;
      float acc[kT][kL] = {};
      int64_t j = 0;
      for (; j + kL <= p.cols; j += kL) {
        float wv[kL];
        for (int64_t l = 0; l < kL; ++l) wv[l] = bf16_to_float(w[j + l]);
        for (int64_t t = 0; t < nt; ++t) {
          const float* x = p.x + (t0 + t) * p.cols + j;
          for (int64_t l = 0; l < kL; ++l) acc[t][l] += wv[l] * x[l];
        }
      }
      for (int64_t t = 0; t < nt; ++t) {
        float s = 0.0f;
        for (int64_t l = 0; l < kL; ++l) s += acc[t][l];
        for (int64_t jj = j; jj < p.cols; ++jj) s += bf16_to_float(w[jj]) * p.x[(t0 + t) * p.cols + jj];
        p.y[(t0 + t) * p.rows + i] = s;
      }
    }
  }
}

}  // namespace hymoe::kernels::detail
