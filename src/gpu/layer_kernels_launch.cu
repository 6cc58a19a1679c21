// Launchers of the layer path's small kernels (layer_kernels.h).
#include <algorithm>

#include "kernel_launch.h"
#include "layer_kernels.cuh"

namespace hymoe::gpu::launch {

cudaError_t embed_f32(const EmbedF32Params& p, cudaStream_t stream) {
  kernels::embed_f32_kernel<<<p.tokens, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t rmsnorm_f32(const RmsNormF32Params& p, cudaStream_t stream) {
  kernels::rmsnorm_f32_kernel<<<p.rows, p.cols >= 2048 ? 512 : 128, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t residual_add(const ResidualAddParams& p, cudaStream_t stream) {
  const int blocks = static_cast<int>(std::min<int64_t>((p.n + 255) / 256, 4096));
  kernels::residual_add_kernel<<<blocks, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t dense_gemv_f32(const DenseGemvParams& p, cudaStream_t stream) {
  constexpr int kWarps = 8;
  kernels::dense_gemv_f32_kernel<<<(p.n + kWarps - 1) / kWarps, kWarps * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t silu_mul_f32(const SiluMulF32Params& p, cudaStream_t stream) {
  kernels::silu_mul_f32_kernel<<<p.rows, p.cols >= 1024 ? 256 : 128, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t dense_gemm_f32(const DenseGemmF32Params& p, cudaStream_t stream) {
  const dim3 grid((p.n + kernels::kDenseGemmTile - 1) / kernels::kDenseGemmTile,
                  (p.tokens + kernels::kDenseGemmTile - 1) / kernels::kDenseGemmTile);
  kernels::dense_gemm_f32_kernel<<<grid, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t widen_bf16(const WidenBf16Params& p, cudaStream_t stream) {
  kernels::widen_bf16_kernel<<<p.rows, p.cols >= 1024 ? 256 : 128, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t mla_gather_latent(const MlaGatherLatentParams& p, cudaStream_t stream) {
  kernels::mla_gather_latent_kernel<<<p.tokens, 64, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t mla_assemble_kv(const MlaAssembleKvParams& p, cudaStream_t stream) {
  kernels::mla_assemble_kv_kernel<<<p.tokens, 256, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t mla_latent_rows(const MlaLatentRowsParams& p, cudaStream_t stream) {
  kernels::mla_latent_rows_kernel<<<p.tokens, 128, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t mla_absorb_q(const MlaAbsorbParams& p, cudaStream_t stream) {
  const dim3 grid(p.heads, p.tokens);
  kernels::mla_absorb_q_kernel<<<grid, 128, sizeof(float) * p.nope, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t mla_unabsorb(const MlaUnabsorbParams& p, cudaStream_t stream) {
  const dim3 grid(p.heads, p.tokens);
  kernels::mla_unabsorb_kernel<<<grid, 128, sizeof(float) * p.lora, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t mla_attention_any(const MlaAttentionParams& p, cudaStream_t stream) {
  const dim3 grid(p.heads, p.tokens);
  kernels::mla_attention_any_kernel<<<grid, kernels::kMlaAnyThreads, sizeof(float) * (p.lora + p.rope), stream>>>(p);
  return cudaGetLastError();
}

cudaError_t moe_gemv(const MoeGemvParams& p, cudaStream_t stream) {
  constexpr int kWarps = 8;
  kernels::moe_gemv_gate_up_kernel<<<dim3((p.inter + kWarps - 1) / kWarps, p.tokens * p.top_k), kWarps * 32, 0, stream>>>(p);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  kernels::moe_gemv_down_kernel<<<dim3((p.hidden + kWarps - 1) / kWarps, p.tokens), kWarps * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
