// The small kernels of the GPU layer path (the hybrid executor and SLP): the FP32 residual stream,
// dense (BF16-weight) GEMVs with FP32 in and out (router, lm_head), latent cache writes, and the
// absorbed MLA attention for any dimensions (the tuned mla_decode covers 512 + 64 only).
// Activations are rounded to BF16 where the CPU engine rounds them (a linear layer's input, the
// cache) and stay FP32 between (linear outputs, norms, rope, q absorption, attention output), so
// both engines carry the same precision. Each has a scalar reference in
// tests/gpu/layer_kernels_test.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hymoe/gpu/dtypes.h"
#include "hymoe/gpu/moe.h"
#include "hymoe/gpu/rope.h"

namespace hymoe::gpu {

// out[t] = table[ids[t]] as FP32. ids must lie in [0, vocab) (checked on the host by the caller).
struct EmbedF32Params {
  const int32_t* ids = nullptr;  // [tokens]
  const Bf16* table = nullptr;   // [vocab, dim]
  float* out = nullptr;          // [tokens, dim]
  int tokens = 0;
  int dim = 0;
};
void embed_f32(const EmbedF32Params& p, cudaStream_t stream);

// RMSNorm of FP32 rows with FP32 weights: out = x * rsqrt(mean(x^2) + eps) * w in FP32, rounded
// to BF16 once (the CPU engine's order). Optionally also the FP32 result (out_f32, contiguous).
struct RmsNormF32Params {
  const float* x = nullptr;       // [rows, cols], row r at x + r * x_stride
  const float* weight = nullptr;  // [cols]
  Bf16* out = nullptr;            // [rows, cols], row r at out + r * out_stride
  float* out_f32 = nullptr;       // [rows, cols] or null
  int rows = 0;
  int cols = 0;
  float eps = 1e-6f;
  int64_t x_stride = 0;           // 0: cols
  int64_t out_stride = 0;         // 0: cols
};
void rmsnorm_f32(const RmsNormF32Params& p, cudaStream_t stream);

// h[i] += a[i] + b[i] (each optional), FP32, for i < n.
struct ResidualAddParams {
  float* h = nullptr;
  const float* a = nullptr;
  const float* b = nullptr;
  int64_t n = 0;
};

// out[r][c] = BF16(silu(gate_up[r][c]) * gate_up[r][cols + c]) from FP32 gate and up halves.
struct SiluMulF32Params {
  const float* gate_up = nullptr;  // [rows, in_stride]: gate in [0, cols), up in [cols, 2 cols)
  Bf16* out = nullptr;             // [rows, out_stride]
  int rows = 0;
  int cols = 0;
  int64_t in_stride = 0;
  int64_t out_stride = 0;
};
void silu_mul_f32(const SiluMulF32Params& p, cudaStream_t stream);
void residual_add(const ResidualAddParams& p, cudaStream_t stream);

// The same product for any number of tokens (a prompt's router scores): y[t][r] = sum_c w[r][c] *
// x[t][c], FP32, in 64 x 64 tiles; each output accumulates over c in order in one FP32 sum, so a
// token's result does not depend on the tokens beside it (not the GEMV's order: results agree
// with dense_gemv_f32's to rounding).
struct DenseGemmF32Params {
  const Bf16* w = nullptr;  // [n, k]
  const float* x = nullptr; // [tokens, k]
  float* y = nullptr;       // [tokens, ldy]
  int tokens = 0;
  int n = 0;
  int k = 0;
  int64_t ldy = 0;          // >= n
};
void dense_gemm_f32(const DenseGemmF32Params& p, cudaStream_t stream);

// out[r][c] = FP32(x[r][c]): a prompt-sized GEMM's BF16 output (gemm.h) widened where the FP32
// stages above read it (norms, latent rows, the residual stream).
struct WidenBf16Params {
  const Bf16* x = nullptr;  // [rows, x_stride]
  float* out = nullptr;     // [rows, out_stride]
  int rows = 0;
  int cols = 0;
  int64_t x_stride = 0;     // 0: cols
  int64_t out_stride = 0;   // 0: cols
};
void widen_bf16(const WidenBf16Params& p, cudaStream_t stream);

// y[t][r] = sum_c w[r][c] * x[t][c] for t < tokens (up to kDenseGemvMaxTokens), FP32
// accumulation in a fixed order (a row's result does not depend on the other tokens).
inline constexpr int kDenseGemvMaxTokens = 8;
struct DenseGemvParams {
  const Bf16* w = nullptr;  // [n, k]
  const float* x = nullptr; // [tokens, k]
  float* y = nullptr;       // [tokens, ldy]
  int tokens = 0;
  int n = 0;
  int k = 0;
  int64_t ldy = 0;          // >= n
};
void dense_gemv_f32(const DenseGemvParams& p, cudaStream_t stream);

// This step's latent cache rows from kv_a's FP32 output [c_kv | k_pe]: c_kv RMS-normalised
// (FP32 weight), k_pe YaRN-roped at positions[t] (the rope_yarn layout: pairs in, halves out),
// both rounded to BF16 into the cache row slots[t] of one layer's pool (cache + slots[t] *
// (lora + rope); slot = block * block_tokens + position % block_tokens).
struct MlaLatentRowsParams {
  const float* kva = nullptr;         // [tokens, kva_stride]: c_kv in [0, lora), k_pe after
  const float* norm_weight = nullptr; // [lora]
  const int32_t* positions = nullptr; // [tokens]
  const int32_t* slots = nullptr;     // [tokens]
  Bf16* cache = nullptr;              // one layer: [blocks * block_tokens, lora + rope]
  YarnTable table{};                  // table.rope_dim == rope
  int tokens = 0;
  int lora = 0;
  int rope = 0;
  int64_t kva_stride = 0;
  float eps = 1e-6f;
};
void mla_latent_rows(const MlaLatentRowsParams& p, cudaStream_t stream);

// One sequence's latent cache rows of positions [0, tokens) gathered in order into a dense
// buffer (the prompt's K/V expansion reads them as one matrix): out[p] = cache row
// block_table[p / block_tokens] * block_tokens + p % block_tokens. width elements a row.
struct MlaGatherLatentParams {
  const Bf16* cache = nullptr;          // one layer: [blocks * block_tokens, width]
  const int32_t* block_table = nullptr; // [ceil(tokens / block_tokens)] on the device
  Bf16* out = nullptr;                  // [tokens, width]
  int tokens = 0;
  int width = 0;                        // a multiple of 8
  int block_tokens = 0;
};
void mla_gather_latent(const MlaGatherLatentParams& p, cudaStream_t stream);

// A prompt's keys and values in the layout both prefill attention kernels read in place, K
// without cuDNN's gather: out[t][h] = [ k_nope (nope) | k_pe (rope) | v (vdim) ] from kv_b's
// output kvb[t][h] = [ k_nope | v ] and the latent row's rope key latent[t][lora, lora + rope)
// (shared by the heads, copied to each). Plain copies; nope, rope and vdim multiples of 8.
struct MlaAssembleKvParams {
  const Bf16* kvb = nullptr;     // [tokens, heads, nope + vdim], token stride heads * (nope + vdim)
  const Bf16* latent = nullptr;  // [tokens, latent_stride]: k_pe at column lora
  Bf16* out = nullptr;           // [tokens, heads, nope + rope + vdim]
  int tokens = 0;
  int heads = 0;
  int nope = 0, rope = 0, vdim = 0;
  int lora = 0;
  int64_t latent_stride = 0;
};
void mla_assemble_kv(const MlaAssembleKvParams& p, cudaStream_t stream);

// q absorption: out[t][h] = [ W_UK[h]^T q[t][h][0, nope) | rope(q[t][h][nope, nope + rope)) ],
// the latent query the attention reads (lora + rope wide), FP32 in, accumulation and out; q_pe
// YaRN-roped at positions[t] on the way (the rope_yarn layout).
struct MlaAbsorbParams {
  const float* q = nullptr;            // [tokens, heads, nope + rope]
  const Bf16* w_uk = nullptr;          // [heads, nope, lora]
  const int32_t* positions = nullptr;  // [tokens]
  float* out = nullptr;                // [tokens, heads, lora + rope]
  Bf16* out_bf16 = nullptr;            // optional: the same rounded to BF16 (the tuned decode's q)
  YarnTable table{};                   // table.rope_dim == rope
  int tokens = 0;
  int heads = 0;
  int nope = 0;
  int rope = 0;
  int lora = 0;
};
void mla_absorb_q(const MlaAbsorbParams& p, cudaStream_t stream);

// The attention output through W_UV: out[t][h][v] = sum_c o_lat[t][h][c] * W_UV[h][v][c],
// rounded to BF16 once (o_proj's input).
struct MlaUnabsorbParams {
  const float* o_lat = nullptr;  // [tokens, heads, lora], or
  const Bf16* o_lat_bf16 = nullptr;  // the same in BF16 (mla_decode's output); exactly one is set
  const Bf16* w_uv_t = nullptr;  // [heads, lora, v_dim] (W_UV transposed)
  Bf16* out = nullptr;           // [tokens, heads * v_dim]
  int tokens = 0;
  int heads = 0;
  int lora = 0;
  int v_dim = 0;
};
void mla_unabsorb(const MlaUnabsorbParams& p, cudaStream_t stream);

// Absorbed MLA attention of each query token over its sequence's latent cache, for any lora,
// rope and heads: token t attends positions [0, seq_lens[t]) of the blocks in its row of
// block_table, score = q[t][h] . row * scale, online softmax in FP32, o_lat = sum p * c_kv.
// One block per (token, head); a token's result depends only on its own inputs. FP32 q and out.
struct MlaAttentionParams {
  const float* q = nullptr;             // [tokens, heads, lora + rope]
  const Bf16* cache = nullptr;          // one layer: [blocks, block_tokens, lora + rope]
  const int32_t* block_table = nullptr; // [tokens, max_blocks]
  const int32_t* seq_lens = nullptr;    // [tokens], each >= 1
  float* out = nullptr;                 // [tokens, heads, lora]
  int tokens = 0;
  int heads = 0;
  int lora = 0;
  int rope = 0;
  int block_tokens = 0;
  int max_blocks = 0;
  float scale = 1.0f;
};
void mla_attention_any(const MlaAttentionParams& p, cudaStream_t stream);

// Routed experts of up to a few tokens on the GPU (MoE layers whose experts the hybrid placement
// keeps on the device): out[t] = sum_k topk_weights[t][k] * down_e(silu(gate_e x[t]) * up_e x[t])
// with e = topk_ids[t][k], read on the device (no host round trip). FP8 weights as moe.h's
// ExpertWeight with 128x128 block scales of row length gate_scale_ld (gate, up) and
// down_scale_ld (down): the checkpoint's ceil(cols / 128), or GroupedFp8Gemm's padded
// block_scale_ld. BF16 activations, FP32 accumulation, act rounded to BF16 between the two
// halves (as the CPU experts). One warp per output row and slot; a row's result depends only on
// its own token.
struct MoeGemvParams {
  const ExpertWeight* gate = nullptr;  // [experts] on the device: [inter, hidden]
  const ExpertWeight* up = nullptr;    // [experts]: [inter, hidden]
  const ExpertWeight* down = nullptr;  // [experts]: [hidden, inter]
  const int32_t* topk_ids = nullptr;     // [tokens, top_k]
  const float* topk_weights = nullptr;   // [tokens, top_k]
  const Bf16* x = nullptr;  // [tokens, hidden]
  Bf16* act = nullptr;      // scratch [tokens * top_k, inter]
  float* out = nullptr;     // [tokens, hidden] (written, not added to)
  int tokens = 0;
  int top_k = 0;
  int experts = 0;
  int hidden = 0;  // a multiple of 16
  int inter = 0;   // a multiple of 16
  int64_t gate_scale_ld = 0;  // >= ceil(hidden / 128)
  int64_t down_scale_ld = 0;  // >= ceil(inter / 128)
};
void moe_gemv(const MoeGemvParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
