// Entry points of the layer path's small kernels: shape checks, then the typed launchers.
#include "hymoe/gpu/layer_kernels.h"

#include <limits>

#include "hymoe/gpu/cuda_check.h"
#include "kernel_launch.h"

namespace hymoe::gpu {
namespace {

constexpr int kMaxGridY = 65535;
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void embed_f32(const EmbedF32Params& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.dim >= 1, kInvalidArgument, "embed_f32: bad shape tokens={} dim={}", p.tokens, p.dim);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.ids && p.table && p.out, kInvalidArgument, "embed_f32: null pointer");
  HYMOE_CUDA_CHECK(launch::embed_f32(p, stream));
}

void rmsnorm_f32(const RmsNormF32Params& p, cudaStream_t stream) {
  HYMOE_CHECK(p.rows >= 0 && p.cols >= 1, kInvalidArgument, "rmsnorm_f32: bad shape rows={} cols={}", p.rows, p.cols);
  if (p.rows == 0) return;
  HYMOE_CHECK(p.x && p.weight && p.out, kInvalidArgument, "rmsnorm_f32: null pointer");
  HYMOE_CUDA_CHECK(launch::rmsnorm_f32(p, stream));
}

void residual_add(const ResidualAddParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.n >= 0, kInvalidArgument, "residual_add: n={}", p.n);
  if (p.n == 0 || (!p.a && !p.b)) return;
  HYMOE_CHECK(p.h, kInvalidArgument, "residual_add: null pointer");
  HYMOE_CUDA_CHECK(launch::residual_add(p, stream));
}

void dense_gemv_f32(const DenseGemvParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 1 && p.tokens <= kDenseGemvMaxTokens && p.n >= 1 && p.k >= 8 && p.k % 8 == 0 &&
                  p.ldy >= p.n,
              kInvalidArgument, "dense_gemv_f32: bad shape tokens={} n={} k={} ldy={} (tokens 1..{}, k % 8 == 0)",
              p.tokens, p.n, p.k, p.ldy, kDenseGemvMaxTokens);
  HYMOE_CHECK(p.w && p.x && p.y, kInvalidArgument, "dense_gemv_f32: null pointer");
  HYMOE_CHECK(aligned16(p.w) && aligned16(p.x), kInvalidArgument, "dense_gemv_f32: w and x must be 16-byte aligned");
  HYMOE_CUDA_CHECK(launch::dense_gemv_f32(p, stream));
}

void silu_mul_f32(const SiluMulF32Params& p, cudaStream_t stream) {
  HYMOE_CHECK(p.rows >= 0 && p.cols >= 1 && p.in_stride >= 2 * int64_t{p.cols} && p.out_stride >= p.cols,
              kInvalidArgument, "silu_mul_f32: bad shape rows={} cols={} in_stride={} out_stride={}", p.rows, p.cols,
              p.in_stride, p.out_stride);
  if (p.rows == 0) return;
  HYMOE_CHECK(p.gate_up && p.out, kInvalidArgument, "silu_mul_f32: null pointer");
  HYMOE_CUDA_CHECK(launch::silu_mul_f32(p, stream));
}

void dense_gemm_f32(const DenseGemmF32Params& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.tokens <= 64 * kMaxGridY && p.n >= 1 && p.k >= 1 && p.ldy >= p.n, kInvalidArgument,
              "dense_gemm_f32: bad shape tokens={} n={} k={} ldy={}", p.tokens, p.n, p.k, p.ldy);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.w && p.x && p.y, kInvalidArgument, "dense_gemm_f32: null pointer");
  HYMOE_CUDA_CHECK(launch::dense_gemm_f32(p, stream));
}

void widen_bf16(const WidenBf16Params& p, cudaStream_t stream) {
  HYMOE_CHECK(p.rows >= 0 && p.rows <= std::numeric_limits<int32_t>::max() && p.cols >= 1 &&
                  (p.x_stride == 0 || p.x_stride >= p.cols) && (p.out_stride == 0 || p.out_stride >= p.cols),
              kInvalidArgument, "widen_bf16: bad shape rows={} cols={} x_stride={} out_stride={}", p.rows, p.cols,
              p.x_stride, p.out_stride);
  if (p.rows == 0) return;
  HYMOE_CHECK(p.x && p.out, kInvalidArgument, "widen_bf16: null pointer");
  HYMOE_CUDA_CHECK(launch::widen_bf16(p, stream));
}

void mla_gather_latent(const MlaGatherLatentParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.width >= 8 && p.width % 8 == 0 && p.block_tokens >= 1, kInvalidArgument,
              "mla_gather_latent: bad shape tokens={} width={} (a multiple of 8) block_tokens={}", p.tokens, p.width,
              p.block_tokens);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.cache && p.block_table && p.out, kInvalidArgument, "mla_gather_latent: null pointer");
  HYMOE_CHECK(aligned16(p.cache) && aligned16(p.out), kInvalidArgument,
              "mla_gather_latent: cache and out must be 16-byte aligned");
  HYMOE_CUDA_CHECK(launch::mla_gather_latent(p, stream));
}

void mla_assemble_kv(const MlaAssembleKvParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.heads >= 1 && p.nope >= 8 && p.nope % 8 == 0 && p.rope >= 0 && p.rope % 8 == 0 &&
                  p.vdim >= 8 && p.vdim % 8 == 0 && p.lora >= 0 && p.lora % 8 == 0 && p.latent_stride % 8 == 0 &&
                  p.latent_stride >= p.lora + p.rope,
              kInvalidArgument,
              "mla_assemble_kv: bad shape tokens={} heads={} nope={} rope={} vdim={} lora={} latent_stride={} (dims "
              "multiples of 8)",
              p.tokens, p.heads, p.nope, p.rope, p.vdim, p.lora, p.latent_stride);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.kvb && p.latent && p.out, kInvalidArgument, "mla_assemble_kv: null pointer");
  HYMOE_CHECK(aligned16(p.kvb) && aligned16(p.latent) && aligned16(p.out), kInvalidArgument,
              "mla_assemble_kv: kvb, latent and out must be 16-byte aligned");
  HYMOE_CUDA_CHECK(launch::mla_assemble_kv(p, stream));
}

void mla_latent_rows(const MlaLatentRowsParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.lora >= 1 && p.rope >= 0 && p.rope % 2 == 0 && p.table.rope_dim == p.rope &&
                  p.kva_stride >= p.lora + p.rope,
              kInvalidArgument, "mla_latent_rows: bad shape tokens={} lora={} rope={} (table {}) stride={}", p.tokens,
              p.lora, p.rope, p.table.rope_dim, p.kva_stride);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.kva && p.norm_weight && p.positions && p.slots && p.cache, kInvalidArgument,
              "mla_latent_rows: null pointer");
  HYMOE_CUDA_CHECK(launch::mla_latent_rows(p, stream));
}

void mla_absorb_q(const MlaAbsorbParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.tokens <= kMaxGridY && p.heads >= 1 && p.nope >= 1 && p.rope >= 0 && p.rope % 2 == 0 &&
                  p.table.rope_dim == p.rope && p.lora >= 1,
              kInvalidArgument, "mla_absorb_q: bad shape tokens={} heads={} nope={} rope={} (table {}) lora={}",
              p.tokens, p.heads, p.nope, p.rope, p.table.rope_dim, p.lora);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.q && p.w_uk && p.out && (p.positions || p.rope == 0), kInvalidArgument, "mla_absorb_q: null pointer");
  HYMOE_CUDA_CHECK(launch::mla_absorb_q(p, stream));
}

void mla_unabsorb(const MlaUnabsorbParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.tokens <= kMaxGridY && p.heads >= 1 && p.lora >= 1 && p.v_dim >= 1,
              kInvalidArgument, "mla_unabsorb: bad shape tokens={} heads={} lora={} v_dim={}", p.tokens, p.heads,
              p.lora, p.v_dim);
  if (p.tokens == 0) return;
  HYMOE_CHECK((p.o_lat != nullptr) != (p.o_lat_bf16 != nullptr) && p.w_uv_t && p.out, kInvalidArgument,
              "mla_unabsorb: null pointer (or both o_lat and o_lat_bf16 set)");
  HYMOE_CUDA_CHECK(launch::mla_unabsorb(p, stream));
}

void mla_attention_any(const MlaAttentionParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.tokens <= kMaxGridY && p.heads >= 1 && p.lora >= 1 && p.rope >= 0 &&
                  p.lora <= 128 * 8 && p.block_tokens >= 1 && p.max_blocks >= 1,
              kInvalidArgument,
              "mla_attention_any: bad shape tokens={} heads={} lora={} (<= 1024) rope={} block_tokens={} max_blocks={}",
              p.tokens, p.heads, p.lora, p.rope, p.block_tokens, p.max_blocks);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.q && p.cache && p.block_table && p.seq_lens && p.out, kInvalidArgument,
              "mla_attention_any: null pointer");
  HYMOE_CUDA_CHECK(launch::mla_attention_any(p, stream));
}

void moe_gemv(const MoeGemvParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 0 && p.top_k >= 1 && p.experts >= 1 && p.hidden >= 16 && p.hidden % 16 == 0 &&
                  p.inter >= 16 && p.inter % 16 == 0 && int64_t{p.tokens} * p.top_k <= kMaxGridY &&
                  p.gate_scale_ld >= (p.hidden + 127) / 128 && p.down_scale_ld >= (p.inter + 127) / 128,
              kInvalidArgument,
              "moe_gemv: bad shape tokens={} top_k={} experts={} hidden={} inter={} scale_ld={},{}", p.tokens,
              p.top_k, p.experts, p.hidden, p.inter, p.gate_scale_ld, p.down_scale_ld);
  if (p.tokens == 0) return;
  HYMOE_CHECK(p.gate && p.up && p.down && p.topk_ids && p.topk_weights && p.x && p.act && p.out, kInvalidArgument,
              "moe_gemv: null pointer");
  HYMOE_CHECK(aligned16(p.x) && aligned16(p.act), kInvalidArgument, "moe_gemv: x and act must be 16-byte aligned");
  HYMOE_CUDA_CHECK(launch::moe_gemv(p, stream));
}

}  // namespace hymoe::gpu
