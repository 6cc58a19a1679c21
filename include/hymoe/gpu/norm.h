// RMSNorm as in HF DeepSeek-V3: h = bf16(x * rsqrt(mean(x^2) + eps)); out = bf16(weight * h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

struct RmsNormParams {
  const Bf16* x = nullptr;       // [rows, cols], row i at x + i * x_stride
  const Bf16* weight = nullptr;  // [cols]
  Bf16* out = nullptr;           // [rows, cols], row i at out + i * out_stride; may alias x
  int rows = 0;
  int cols = 0;                  // >= 1; any size (16-byte vector path when cols % 8 == 0)
  int64_t x_stride = 0;          // elements between rows (>= cols)
  int64_t out_stride = 0;
  float eps = 1e-6f;
};

// One block per row. Throws kInvalidArgument on bad shapes; rows == 0 launches nothing.
void rmsnorm(const RmsNormParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
