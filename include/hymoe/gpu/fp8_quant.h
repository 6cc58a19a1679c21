// Activation quantisation for the block-scaled FP8 GEMM: per token, per 128 columns,
// scale = amax/448 (1 where the block is all zero), q = fp8_e4m3(x / scale) rounded to nearest
// even and saturated. x ~= q * scale. The scales are stored block-major, token fastest
// (scales[kb * scale_ld + t]): the layout cuBLASLt's VEC128_32F mode reads for the activations.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

inline constexpr int kFp8BlockSize = 128;

// Grouped scale layout ("grouped VEC128", for the per-expert GEMMs of moe.h): group g (rows
// [offset_g, offset_g + m_g)) has a packed [col_blocks][m_g] block (row fastest) starting at this
// float offset: 16-byte aligned (cuBLASLt refuses unaligned scale pointers) and never overlapping
// the previous group's block. The whole layout needs grouped_scale_floats(...) floats.
constexpr int64_t grouped_scale_offset(int col_blocks, int64_t group_offset, int group) {
  return (int64_t{col_blocks} * group_offset + 3) / 4 * 4 + int64_t{4} * group;
}
constexpr int64_t grouped_scale_floats(int col_blocks, int64_t rows, int groups) {
  return grouped_scale_offset(col_blocks, rows, groups);
}

struct Fp8QuantParams {
  const Bf16* x = nullptr;   // [tokens, cols], row t at x + t * x_stride
  Fp8E4M3* out = nullptr;    // [tokens, cols], row t at out + t * out_stride
  float* scales = nullptr;   // [ceil(cols/128), scale_ld]
  int tokens = 0;
  int cols = 0;              // any; the last block may be partial
  int64_t x_stride = 0;
  int64_t out_stride = 0;
  int64_t scale_ld = 0;      // >= tokens (ignored with group_offsets)
  // Optional: rows grouped by expert (moe.h): group g's scales go to the grouped layout,
  // scales[grouped_scale_offset(col_blocks, offsets[g], g) + kb * m_g + (t - offsets[g])].
  const int32_t* group_offsets = nullptr;  // [groups + 1] on the device, offsets[groups] == tokens
  int groups = 0;
  // Programmatic dependent launch (sm_90 and newer; ignored below), as Fp8GemvParams::pdl: the
  // next kernel may launch at once (a PDL GEMV streams its weights meanwhile); x is read only
  // after the previous kernel has completed.
  bool pdl = false;
};

void quantize_fp8_per_token_block(const Fp8QuantParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
