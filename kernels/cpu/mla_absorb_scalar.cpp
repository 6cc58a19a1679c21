// MLA absorption, scalar variant: the same row-by-row accumulation in plain FP32 loops.
#include <algorithm>

#include "hymoe/common/numeric.h"
#include "variants.h"

namespace hymoe::kernels::detail {

void mla_absorb_scalar(const MlaAbsorbParams& p) {
  for (int64_t t = 0; t < p.tokens; ++t) {
    float* y = p.y + t * p.y_stride;
    std::fill(y, y + p.n, 0.0f);
    for (int64_t i = 0; i < p.k; ++i) {
      const float x = p.x[t * p.x_stride + i];
      const uint16_t* w = p.w + i * p.n;
      for (int64_t c = 0; c < p.n; ++c) y[c] += x * bf16_to_float(w[c]);
    }
  }
}

}  // namespace hymoe::kernels::detail
