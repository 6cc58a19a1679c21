// SiLU-and-multiply of a gated MLP: out = bf16(bf16(silu(gate)) * up), as PyTorch computes
// act_fn(gate_proj(x)) * up_proj(x) in BF16.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

struct SiluMulParams {
  const Bf16* gate_up = nullptr;  // [rows, 2*cols]: gate in columns [0, cols), up in [cols, 2*cols)
  Bf16* out = nullptr;            // [rows, cols]
  int rows = 0;
  int cols = 0;
  int64_t in_stride = 0;          // elements between input rows (>= 2*cols)
  int64_t out_stride = 0;         // elements between output rows (>= cols)
};

void silu_mul(const SiluMulParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
