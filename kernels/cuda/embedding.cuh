// Embedding gather: one block per token, 16-byte copies when rows allow.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/embedding.h"

namespace hymoe::gpu::kernels {

template <bool kVec>
__global__ void embedding_kernel(EmbeddingParams p) {
  const int t = blockIdx.x;
  const int64_t id = p.ids[t];
  const bool valid = id >= 0 && id < p.vocab;
  const auto* src = reinterpret_cast<const uint16_t*>(p.table) + (valid ? id : 0) * p.dim;
  auto* dst = reinterpret_cast<uint16_t*>(p.out) + t * p.out_stride;
  if constexpr (kVec) {
    for (int c = threadIdx.x * 8; c < p.dim; c += blockDim.x * 8) {
      Bf16x8 v = {};
      if (valid) v = *reinterpret_cast<const Bf16x8*>(src + c);
      *reinterpret_cast<Bf16x8*>(dst + c) = v;
    }
  } else {
    for (int c = threadIdx.x; c < p.dim; c += blockDim.x) dst[c] = valid ? src[c] : uint16_t{0};
  }
}

}  // namespace hymoe::gpu::kernels
