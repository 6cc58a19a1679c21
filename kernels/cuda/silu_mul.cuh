// SiLU-and-multiply over [rows, 2*cols] -> [rows, cols]; grid (column chunks, rows).
#pragma once

#include "common.cuh"
#include "hymoe/gpu/activation.h"

namespace hymoe::gpu::kernels {

__device__ __forceinline__ uint16_t silu_mul_one(uint16_t g_bits, uint16_t u_bits) {
  const float g = bf16_bits_to_float(g_bits);
  const float silu = round_bf16(g / (1.0f + expf(-g)));
  return float_to_bf16_bits(silu * bf16_bits_to_float(u_bits));
}

template <bool kVec>
__global__ void silu_mul_kernel(SiluMulParams p) {
  const int row = blockIdx.y;
  const auto* gate = reinterpret_cast<const uint16_t*>(p.gate_up) + row * p.in_stride;
  const auto* up = gate + p.cols;
  auto* out = reinterpret_cast<uint16_t*>(p.out) + row * p.out_stride;
  if constexpr (kVec) {
    const int c = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (c >= p.cols) return;
    const Bf16x8 g = *reinterpret_cast<const Bf16x8*>(gate + c);
    const Bf16x8 u = *reinterpret_cast<const Bf16x8*>(up + c);
    Bf16x8 o;
#pragma unroll
    for (int i = 0; i < 8; ++i) o.v[i] = silu_mul_one(g.v[i], u.v[i]);
    *reinterpret_cast<Bf16x8*>(out + c) = o;
  } else {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= p.cols) return;
    out[c] = silu_mul_one(gate[c], up[c]);
  }
}

}  // namespace hymoe::gpu::kernels
