// RMSNorm: out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]  (DeepSeek-V3 eps 1e-6).
#pragma once

#include <cstdint>

namespace hymoe::kernels {

// FP32 in and out; out may alias x. FP32 sum of squares in 8 lanes (vectorisable).
void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* out);
// The same with the result rounded to BF16 (the input of an FP8 GEMV/GEMM).
void rmsnorm_bf16(const float* x, const float* weight, int64_t n, float eps, uint16_t* out);
// Reference: double accumulation.
void rmsnorm_reference(const float* x, const float* weight, int64_t n, float eps, float* out);

// FP32 -> BF16, round to nearest even.
void to_bf16(const float* x, int64_t n, uint16_t* out);

}  // namespace hymoe::kernels
