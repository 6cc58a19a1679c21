// BF16 matrix times FP32 vectors: the dense (not quantised) matvecs of decode, lm_head
// (129280 x 7168 BF16 for DeepSeek-V3, 1.85 GB per token) and the router. Bound by the weight
// bytes; each weight is widened to FP32 in registers (exact) and accumulated in FP32.
#pragma once

#include <cstdint>

#include "hymoe/kernels/isa.h"

namespace hymoe::kernels {

// Computes rows [row_begin, row_end) of y[t][i] = sum_j bf16(W[i][j]) * x[t][j], t < tokens.
// Callers split rows across threads. Tokens are processed 4 at a time over each weight row.
struct Bf16GemvParams {
  const uint16_t* w = nullptr;  // BF16 [rows, cols] row-major
  int64_t rows = 0;
  int64_t cols = 0;
  const float* x = nullptr;     // FP32 [tokens, cols]
  int64_t tokens = 1;
  float* y = nullptr;           // FP32 [tokens, rows]
  int64_t row_begin = 0;
  int64_t row_end = 0;
};

// Dispatches to the best variant (AVX-512 where available, else AVX2, else scalar). No checks:
// hot path.
void bf16_gemv(const Bf16GemvParams& p);
// One variant (the caller guarantees isa_supported(isa)): kScalar, kAvx2, or kAvx512 /
// kAvx512Bf16 (both run the AVX-512 body).
void bf16_gemv(Isa isa, const Bf16GemvParams& p);
// Throws hymoe::Error (kInvalidArgument) naming the bad field.
void validate(const Bf16GemvParams& p);
// Plain reference, double accumulation.
void bf16_gemv_reference(const Bf16GemvParams& p);

}  // namespace hymoe::kernels
