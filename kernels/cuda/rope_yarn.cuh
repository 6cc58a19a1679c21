// YaRN RoPE in place. Grid (head groups, tokens); a block holds whole heads, one thread per pair.
// The rotate-half output overwrites elements other threads of the same head still read, so all
// reads happen before a block barrier and all writes after it.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/rope.h"

namespace hymoe::gpu::kernels {

__global__ void rope_yarn_kernel(RopeParams p, int heads_per_block) {
  const int half = p.table.rope_dim / 2;
  const int t = blockIdx.y;
  const int h = blockIdx.x * heads_per_block + static_cast<int>(threadIdx.x) / half;
  const int i = static_cast<int>(threadIdx.x) % half;
  const bool active = h < p.heads && static_cast<int>(threadIdx.x) < heads_per_block * half;
  uint16_t* x = nullptr;
  float a = 0.0f, b = 0.0f, c = 0.0f, s = 0.0f;
  if (active) {
    x = reinterpret_cast<uint16_t*>(p.x) + t * p.token_stride + h * p.head_stride;
    a = bf16_bits_to_float(x[2 * i]);
    b = bf16_bits_to_float(x[2 * i + 1]);
    // FP32 angle as HF computes it (t * inv_freq in FP32), then accurate sin/cos.
    const float angle = static_cast<float>(p.positions[t]) * p.table.inv_freq[i];
    sincosf(angle, &s, &c);
    c *= p.table.mscale;
    s *= p.table.mscale;
  }
  __syncthreads();
  if (active) {
    x[i] = float_to_bf16_bits(a * c - b * s);
    x[i + half] = float_to_bf16_bits(b * c + a * s);
  }
}

}  // namespace hymoe::gpu::kernels
