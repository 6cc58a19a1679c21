// Merge of two attention results over disjoint key sets by their log-sum-exp (mla_prefill.h).
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "common.cuh"
#include "hymoe/gpu/mla_prefill.h"

namespace hymoe::gpu::kernels {

// Grid: one block per row. Phase 1: per head the two weights (shared memory) and the new lse;
// phase 2: the outputs, two columns a thread.
__global__ void mla_merge_attention_kernel(MlaMergeParams p) {
  extern __shared__ float w[];  // [2][heads]
  const int64_t r = blockIdx.x;
  for (int h = threadIdx.x; h < p.heads; h += blockDim.x) {
    float& l1 = p.lse[int64_t{h} * p.lse_head_stride + r];
    const float l2 = p.part_lse[int64_t{h} * p.part_lse_head_stride + r];
    const float m = fmaxf(l1, l2);
    const float a = m == -INFINITY ? 0.0f : expf(l1 - m), b = m == -INFINITY ? 0.0f : expf(l2 - m);
    const float sum = a + b;
    w[h] = sum > 0.0f ? a / sum : 0.0f;
    w[p.heads + h] = sum > 0.0f ? b / sum : 0.0f;
    l1 = sum > 0.0f ? m + logf(sum) : -INFINITY;
  }
  __syncthreads();
  constexpr int kPairs = kMlaVDim / 2;
  auto* out = reinterpret_cast<uint16_t*>(p.out) + r * p.out_token_stride;
  const auto* part = reinterpret_cast<const uint16_t*>(p.part) + r * p.part_token_stride;
  for (int i = threadIdx.x; i < p.heads * kPairs; i += blockDim.x) {
    const int h = i / kPairs, c = 2 * (i % kPairs);
    uint16_t* o = out + int64_t{h} * p.out_head_stride + c;
    const uint16_t* q = part + int64_t{h} * p.part_head_stride + c;
    const float a = w[h], b = w[p.heads + h];
    o[0] = float_to_bf16_bits(a * bf16_bits_to_float(o[0]) + b * bf16_bits_to_float(q[0]));
    o[1] = float_to_bf16_bits(a * bf16_bits_to_float(o[1]) + b * bf16_bits_to_float(q[1]));
  }
}

}  // namespace hymoe::gpu::kernels
