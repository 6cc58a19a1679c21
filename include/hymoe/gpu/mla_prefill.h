// MLA prefill attention of DeepSeek-V3 in the naive form (keys and values expanded by kv_b):
// per head h, q = [q_nope (128) | q_pe (64)], k = [k_nope[h] (128) | k_pe (64, shared by every
// head)], v[h] (128). Causal: query i sits at position past + i and attends keys
// j <= past + i, j < kv_tokens. past > 0 is chunked prefill: a chunk of new tokens attends the
// cached tokens and itself (kv_tokens >= past + tokens). Flash-style: online softmax, no score
// matrix in memory.
// Key windows: with kv_tokens < past + tokens the keys are a window that the later queries see
// whole (past is then the first query's position relative to the window's first key); each
// row's log-sum-exp (lse) lets mla_merge_attention combine windows into the attention over all
// of them, so that a long sequence's expanded keys need not be in memory at once.
// Every tensor takes a token and a head stride (elements), so kv_b's output [kv, heads, 256]
// (k_nope | v per head) is read in place, as is a [kv, heads, 320] layout k_nope | k_pe | v whose
// keys cuDNN takes without a gather (mla_prefill_cudnn.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

inline constexpr int kMlaNopeDim = 128;
inline constexpr int kMlaQkDim = kMlaNopeDim + 64;  // 192
inline constexpr int kMlaVDim = 128;

// Tensor cores (mma.sync flash-attention-2 style, the default) or the CUDA-core kernel (kept as a
// second implementation to cross-check).
enum class MlaPrefillImpl { kAuto, kTensorCores, kCudaCores };

struct MlaPrefillParams {
  const Bf16* q = nullptr;       // [tokens, heads, 192]
  const Bf16* k_nope = nullptr;  // [kv_tokens, heads, 128]
  const Bf16* k_pe = nullptr;    // [kv_tokens, 64] shared by the heads (or per head, below)
  const Bf16* v = nullptr;       // [kv_tokens, heads, 128]
  Bf16* out = nullptr;           // [tokens, heads, 128]
  int tokens = 0;
  int kv_tokens = 0;             // >= past + tokens
  int heads = 0;
  int past = 0;                  // position of query 0
  int64_t q_token_stride = 0, q_head_stride = 0;
  int64_t k_token_stride = 0, k_head_stride = 0;
  int64_t k_pe_token_stride = 0;
  // 0: one rope key per token, shared by every head (MLA's own layout). Non-zero: a copy per head
  // at this stride, e.g. a [kv_tokens, heads, 192 + ...] buffer holding k_nope | k_pe per head,
  // which cuDNN's path reads in place instead of gathering K first.
  int64_t k_pe_head_stride = 0;
  int64_t v_token_stride = 0, v_head_stride = 0;
  int64_t out_token_stride = 0, out_head_stride = 0;
  float softmax_scale = 0.0f;
  // Optional [heads, tokens] FP32: each row's log-sum-exp of its scaled visible scores (natural
  // log), for mla_merge_attention.
  float* lse = nullptr;
  MlaPrefillImpl impl = MlaPrefillImpl::kAuto;
};

// The kernel's view of `tokens` queries [tokens, heads, 192] (q_nope | q_pe) at positions past..
// over keys and values as mla_assemble_kv lays them out ([kv_tokens, heads, 128 | 64 | 128]:
// k_nope | k_pe | v per head, K read in place), into out [tokens, heads, 128]. No lse.
inline MlaPrefillParams mla_prefill_over_assembled(const Bf16* q, const Bf16* keys, Bf16* out, int tokens, int kv_tokens,
                                                   int heads, int past, float softmax_scale) {
  constexpr int64_t per_head = kMlaQkDim + kMlaVDim;
  MlaPrefillParams p;
  p.q = q;
  p.k_nope = keys;
  p.k_pe = keys + kMlaNopeDim;
  p.v = keys + kMlaQkDim;
  p.out = out;
  p.tokens = tokens;
  p.kv_tokens = kv_tokens;
  p.heads = heads;
  p.past = past;
  p.q_token_stride = int64_t{heads} * kMlaQkDim;
  p.q_head_stride = kMlaQkDim;
  p.k_token_stride = p.k_pe_token_stride = p.v_token_stride = heads * per_head;
  p.k_head_stride = p.k_pe_head_stride = p.v_head_stride = per_head;
  p.out_token_stride = int64_t{heads} * kMlaVDim;
  p.out_head_stride = kMlaVDim;
  p.softmax_scale = softmax_scale;
  return p;
}

// Strides must keep every row 16-byte aligned (multiples of 8 elements, aligned pointers).
// The tensor-core kernel uses mma.sync; cuDNN's fused attention or a wgmma kernel is the path
// to Hopper's BF16 GEMM ceiling.
void mla_prefill(const MlaPrefillParams& p, cudaStream_t stream);

// Attention over two sets of keys from each's output and log-sum-exp (softmax weights
// renormalised): out = (e^lse out + e^part_lse part) / (e^lse + e^part_lse), lse = log of the
// denominator; in place into out and lse. Rows [0, rows), v of kMlaVDim per head, BF16 outputs,
// FP32 lse ([heads] at the given head strides, the rows consecutive). Each merge rounds the output
// to BF16 again: meant for a few windows (8 keep within 8e-3 of the whole attention), not hundreds.
struct MlaMergeParams {
  Bf16* out = nullptr;          // [rows, heads, 128] through its strides
  float* lse = nullptr;         // lse[h * lse_head_stride + row]
  const Bf16* part = nullptr;
  const float* part_lse = nullptr;
  int rows = 0, heads = 0;
  int64_t out_token_stride = 0, out_head_stride = 0;
  int64_t part_token_stride = 0, part_head_stride = 0;
  int64_t lse_head_stride = 0, part_lse_head_stride = 0;
};
void mla_merge_attention(const MlaMergeParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
