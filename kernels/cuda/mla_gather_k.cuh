// Gathers MLA's per-head keys into one tensor [keys, heads, 192] = k_nope[key, head] | k_pe[key]
// (k_pe is shared by the heads), for attention libraries that take a single K (cuDNN).
// One thread moves 16 bytes: 16 chunks of k_nope then 8 of k_pe per (key, head).
#pragma once

#include <cstdint>

#include "common.cuh"
#include "hymoe/gpu/mla_prefill.h"

namespace hymoe::gpu::kernels {

inline constexpr int kGatherChunks = kMlaQkDim / 8;  // 24 chunks of 8 BF16

__global__ void mla_gather_k_kernel(MlaPrefillParams p, int keys, Bf16* __restrict__ dst) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t total = int64_t{keys} * p.heads * kGatherChunks;
  if (i >= total) return;
  const int chunk = static_cast<int>(i % kGatherChunks);
  const int64_t row = i / kGatherChunks;  // key * heads + head
  const int head = static_cast<int>(row % p.heads);
  const int64_t key = row / p.heads;
  const Bf16* src = chunk < kMlaNopeDim / 8
                        ? p.k_nope + key * p.k_token_stride + head * p.k_head_stride + chunk * 8
                        : p.k_pe + key * p.k_pe_token_stride + head * p.k_pe_head_stride +
                              (chunk - kMlaNopeDim / 8) * 8;
  *reinterpret_cast<uint4*>(dst + row * kMlaQkDim + chunk * 8) =
      *reinterpret_cast<const uint4*>(src);
}

}  // namespace hymoe::gpu::kernels
