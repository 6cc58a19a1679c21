#include "hymoe/kernels/silu_mul.h"

#include <cmath>

#include "hymoe/common/numeric.h"

namespace hymoe::kernels {
namespace {
inline float silu(float g) { return g / (1.0f + std::exp(-g)); }
}  // namespace

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

void silu_mul_bf16(const float* gate, const float* up, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(silu(gate[i]) * up[i]);
}

void silu_mul_reference(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

}  // namespace hymoe::kernels
