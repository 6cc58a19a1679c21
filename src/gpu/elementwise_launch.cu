// Launchers of the row-wise kernels: RMSNorm, SiLU-and-multiply, embedding gather, YaRN RoPE.
#include <algorithm>

#include "embedding.cuh"
#include "kernel_launch.h"
#include "rmsnorm.cuh"
#include "rope_yarn.cuh"
#include "silu_mul.cuh"

namespace hymoe::gpu::launch {

cudaError_t rmsnorm(const RmsNormParams& p, bool vec, int threads, cudaStream_t stream) {
  if (vec) {
    kernels::rmsnorm_kernel<true><<<p.rows, threads, 0, stream>>>(p);
  } else {
    kernels::rmsnorm_kernel<false><<<p.rows, threads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

cudaError_t silu_mul(const SiluMulParams& p, bool vec, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int per_block = vec ? kThreads * 8 : kThreads;
  const dim3 grid((p.cols + per_block - 1) / per_block, p.rows);
  if (vec) {
    kernels::silu_mul_kernel<true><<<grid, kThreads, 0, stream>>>(p);
  } else {
    kernels::silu_mul_kernel<false><<<grid, kThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

cudaError_t embedding_gather(const EmbeddingParams& p, bool vec, int threads, cudaStream_t stream) {
  if (vec) {
    kernels::embedding_kernel<true><<<p.tokens, threads, 0, stream>>>(p);
  } else {
    kernels::embedding_kernel<false><<<p.tokens, threads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

cudaError_t rope_yarn(const RopeParams& p, cudaStream_t stream) {
  const int half = p.table.rope_dim / 2;
  const int heads_per_block = std::max(1, std::min(p.heads, 256 / half));
  const dim3 grid((p.heads + heads_per_block - 1) / heads_per_block, p.tokens);
  kernels::rope_yarn_kernel<<<grid, heads_per_block * half, 0, stream>>>(p, heads_per_block);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
