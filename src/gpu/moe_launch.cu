// Launchers of the MoE dispatch kernels.
#include "kernel_launch.h"
#include "moe_permute.cuh"

namespace hymoe::gpu::launch {

cudaError_t moe_expert_offsets(const MoeOffsetsParams& p, cudaStream_t stream) {
  kernels::moe_count_kernel<<<1, kernels::kMoeCountThreads, 0, stream>>>(p);
  const int64_t entries = static_cast<int64_t>(p.tokens) * p.top_k;
  if (entries > 0)
    kernels::moe_assign_kernel<<<static_cast<unsigned>((entries + 255) / 256), 256, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t moe_permute_fp8(const MoePermuteParams& p, cudaStream_t stream) {
  const int64_t entries = static_cast<int64_t>(p.tokens) * p.top_k;
  kernels::moe_permute_fp8_kernel<<<static_cast<unsigned>(entries), 128, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t moe_unpermute_add(const MoeUnpermuteAddParams& p, cudaStream_t stream) {
  const dim3 grid(p.tokens, (p.cols + 2047) / 2048);
  kernels::moe_unpermute_add_kernel<<<grid, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t moe_unpermute(const MoeUnpermuteParams& p, cudaStream_t stream) {
  const dim3 grid(p.tokens, (p.cols + 2047) / 2048);
  kernels::moe_unpermute_kernel<<<grid, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
