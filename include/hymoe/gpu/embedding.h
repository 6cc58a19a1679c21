// Embedding gather: out[t] = table[ids[t]] (BF16 rows).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

struct EmbeddingParams {
  const int32_t* ids = nullptr;  // [tokens] on the device
  const Bf16* table = nullptr;   // [vocab, dim]
  Bf16* out = nullptr;           // [tokens, dim], row t at out + t * out_stride
  int tokens = 0;
  int64_t vocab = 0;
  int dim = 0;
  int64_t out_stride = 0;
};

// An id outside [0, vocab) yields a row of zeros (the kernel cannot raise; callers validate
// request tokens on the host before they get here).
void embedding_gather(const EmbeddingParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
