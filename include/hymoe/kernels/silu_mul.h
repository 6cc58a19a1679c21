// The gated-MLP activation: out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
#pragma once

#include <cstdint>

namespace hymoe::kernels {

void silu_mul(const float* gate, const float* up, int64_t n, float* out);
// Rounded to BF16: the activation feeding the down projection.
void silu_mul_bf16(const float* gate, const float* up, int64_t n, uint16_t* out);
// Reference in double.
void silu_mul_reference(const float* gate, const float* up, int64_t n, float* out);

}  // namespace hymoe::kernels
