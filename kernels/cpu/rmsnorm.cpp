#include "hymoe/kernels/rmsnorm.h"

#include <cmath>

#include "hymoe/common/numeric.h"

namespace hymoe::kernels {
namespace {

float inv_rms(const float* x, int64_t n, float eps) {
  float lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += x[i + l] * x[i + l];
  float ss = 0.0f;
  for (; i < n; ++i) ss += x[i] * x[i];
  for (float l : lanes) ss += l;
  return 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
}

}  // namespace

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  const float r = inv_rms(x, n, eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * r * weight[i];
}

void rmsnorm_bf16(const float* x, const float* weight, int64_t n, float eps, uint16_t* out) {
  const float r = inv_rms(x, n, eps);
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(x[i] * r * weight[i]);
}

void rmsnorm_reference(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * r * weight[i]);
}

void to_bf16(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(x[i]);
}

}  // namespace hymoe::kernels
