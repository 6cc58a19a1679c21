// RMSNorm, one block per row. kVec: 16-byte loads (cols % 8 == 0, rows 16-byte aligned).
#pragma once

#include "common.cuh"
#include "hymoe/gpu/norm.h"

namespace hymoe::gpu::kernels {

template <bool kVec>
__global__ void rmsnorm_kernel(RmsNormParams p) {
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  const auto* x = reinterpret_cast<const uint16_t*>(p.x) + row * p.x_stride;
  const auto* w = reinterpret_cast<const uint16_t*>(p.weight);
  auto* out = reinterpret_cast<uint16_t*>(p.out) + row * p.out_stride;

  float sumsq = 0.0f;
  if constexpr (kVec) {
    for (int c = threadIdx.x * 8; c < p.cols; c += blockDim.x * 8) {
      const Bf16x8 v = *reinterpret_cast<const Bf16x8*>(x + c);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float f = bf16_bits_to_float(v.v[i]);
        sumsq += f * f;
      }
    }
  } else {
    for (int c = threadIdx.x; c < p.cols; c += blockDim.x) {
      const float f = bf16_bits_to_float(x[c]);
      sumsq += f * f;
    }
  }
  const float inv = rsqrtf(block_sum(sumsq, scratch) / static_cast<float>(p.cols) + p.eps);
  // The row is re-read (L1/L2 hit) rather than kept in registers: any cols, no spills.
  if constexpr (kVec) {
    for (int c = threadIdx.x * 8; c < p.cols; c += blockDim.x * 8) {
      const Bf16x8 v = *reinterpret_cast<const Bf16x8*>(x + c);
      const Bf16x8 g = *reinterpret_cast<const Bf16x8*>(w + c);
      Bf16x8 o;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float h = round_bf16(bf16_bits_to_float(v.v[i]) * inv);
        o.v[i] = float_to_bf16_bits(h * bf16_bits_to_float(g.v[i]));
      }
      *reinterpret_cast<Bf16x8*>(out + c) = o;
    }
  } else {
    for (int c = threadIdx.x; c < p.cols; c += blockDim.x) {
      const float h = round_bf16(bf16_bits_to_float(x[c]) * inv);
      out[c] = float_to_bf16_bits(h * bf16_bits_to_float(w[c]));
    }
  }
}

}  // namespace hymoe::gpu::kernels
