// Absorbed MLA attention (DeepSeek-V2/V3) of a block of queries of ONE sequence against its paged
// latent cache. With the absorption q_lat = W_UK[h]^T q_nope done beforehand, every head is a
// plain attention of width lora + rope over the shared cache rows [c_kv | k_pe]:
//
//   s[j] = scale * ([q_lat | q_pe] . cache[j])      for keys j <= the query's position
//   o_lat = sum_j softmax(s)[j] * c_kv[j]             (then out = W_UV[h] o_lat, by the caller)
//
// The rows (query token x head) of one call share every cache row: the kernel reads each cache
// row once per call, in key blocks of kMlaKeyBlock tokens at fixed absolute positions (0, 64,
// 128, ...) with an online softmax across blocks. A row's arithmetic depends only on its own
// query, its position and the cache, never on which other rows share the call, so a token's
// result is bitwise the same whether its prompt was chunked or batched differently (on one
// variant; variants differ in rounding).
//
// Precision: q enters the dot products as BF16 (like the cache), and so do the softmax weights p
// in the AVX512-BF16 variant; scores, the softmax and o_lat are FP32. Callers split the heads
// (and tokens) across threads.
#pragma once

#include <cstdint>
#include <vector>

#include "hymoe/kernels/isa.h"

namespace hymoe::kernels {

inline constexpr int64_t kMlaKeyBlock = 64;

// Scratch of one worker (one call at a time). Grown on first use to the largest call seen, so a
// worker that keeps it allocates nothing in steady state.
struct MlaAttentionScratch {
  std::vector<uint16_t> v_packed;  // a key block's c_kv rows, interleaved in key pairs
  std::vector<uint16_t> zero_row;  // stands in for the rows past the cache's end
  std::vector<uint16_t> q_tile;    // a few query rows in BF16
  std::vector<float> q_row;        // query rows, BF16-rounded, in FP32 (scalar, AVX-512F)
  std::vector<float> m, l;         // running max (log2 units) and sum per query row
};

struct MlaAttentionParams {
  int64_t lora = 512;  // kv_lora_rank: latent width (multiple of 64)
  int64_t rope = 64;   // qk_rope_head_dim (multiple of 32)
  // Query token t (0-based in this block) sits at absolute position first_position + t and sees
  // keys 0..first_position + t. The cache must hold rows 0..first_position + token_end - 1.
  int64_t first_position = 0;
  // The rows of this call: tokens [token_begin, token_end) x heads [head_begin, head_end).
  int64_t token_begin = 0, token_end = 0;
  int64_t head_begin = 0, head_end = 0;
  // FP32 queries: q_lat of (t, h) at q_lat + t * q_lat_token_stride + h * q_lat_head_stride
  // (lora values), q_pe likewise (rope values, already roped).
  const float* q_lat = nullptr;
  int64_t q_lat_token_stride = 0, q_lat_head_stride = 0;
  const float* q_pe = nullptr;
  int64_t q_pe_token_stride = 0, q_pe_head_stride = 0;
  // Paged BF16 cache of one layer: position j is row (j % page_tokens) of pages[j / page_tokens],
  // each row lora + rope values (c_kv then k_pe), rows of a page consecutive.
  const uint16_t* const* pages = nullptr;
  int64_t page_tokens = 64;
  float scale = 1.0f;  // softmax scale applied to the dot products
  // FP32 o_lat of (t, h) at out + t * out_token_stride + h * out_head_stride (lora values).
  float* out = nullptr;
  int64_t out_token_stride = 0, out_head_stride = 0;
};

// Dispatches to the best variant (AVX512-BF16, else AVX-512F, else scalar). No checks: hot path.
void mla_attention(const MlaAttentionParams& p, MlaAttentionScratch& scratch);
// One variant: kAvx512Bf16 runs the vdpbf16ps kernel, kAvx512 the FP32-FMA one (p in FP32),
// kScalar and kAvx2 the scalar one.
void mla_attention(Isa isa, const MlaAttentionParams& p, MlaAttentionScratch& scratch);
// Throws hymoe::Error (kInvalidArgument) naming the bad field.
void validate(const MlaAttentionParams& p);
// Reference in double, q rounded to BF16 as the kernels take it (the rest exact). When err_scale
// is given, also writes sum_j p[j] |c_kv[j]| / sum_j p[j] per output (the scale of the error that
// BF16 weights p can cause: at most 2^-8 of it), in out's layout.
void mla_attention_reference(const MlaAttentionParams& p, float* err_scale = nullptr);

// ---- The absorption products, y[t][0..n) = sum_{i<k} x[t][i] * W[i][0..n), W BF16 [k][n]
// row-major: q_lat = W_UK[h]^T q_nope (W_UK[h] as stored, [qk_nope][kv_lora]) and
// out = W_UV[h] o_lat (with W_UV[h] stored transposed, [kv_lora][v_head]). W is streamed once per
// 4 tokens, each weight widened to FP32 exactly and accumulated in FP32 (no horizontal sums).
struct MlaAbsorbParams {
  const uint16_t* w = nullptr;  // BF16 [k][n], n a multiple of 16
  int64_t k = 0, n = 0;
  const float* x = nullptr;  // FP32, token t at x + t * x_stride (k values)
  int64_t x_stride = 0;
  int64_t tokens = 1;
  float* y = nullptr;  // FP32, token t at y + t * y_stride (n values)
  int64_t y_stride = 0;
};

// Dispatches to the best variant (AVX-512 where available, else scalar). No checks: hot path.
void mla_absorb(const MlaAbsorbParams& p);
// One variant: kAvx512 and kAvx512Bf16 run the AVX-512 one, the others the scalar one.
void mla_absorb(Isa isa, const MlaAbsorbParams& p);
void validate(const MlaAbsorbParams& p);
// Reference in double.
void mla_absorb_reference(const MlaAbsorbParams& p);

// ---- The whole absorbed attention of a block of heads over a step's tokens (one or more
// sequences, each a run of consecutive tokens): per chunk of kMlaTokenChunk tokens of the step,
// q_lat = W_UK[h]^T q_nope (mla_absorb: all the chunk's tokens, of whatever sequence, share each
// weight read), mla_attention over each sequence's part of the chunk, out = W_UV[h] o_lat
// (mla_absorb). A decode step of B sequences reads W_UK/W_UV once, not B times. What the CPU
// executor runs on each worker (its block of heads), and what bench-cpu measures.

inline constexpr int64_t kMlaTokenChunk = 32;

struct MlaHeadsScratch {
  std::vector<float> qlat, olat;  // [head][token][kv_lora] of one chunk
  MlaAttentionScratch attn;
};

// One sequence's run of tokens in the step: query i of the run sits at first_position + i.
struct MlaSequence {
  int64_t first_position = 0, tokens = 0;
  const uint16_t* const* pages = nullptr;  // its cache pages of this layer
};

struct MlaHeadsParams {
  int64_t heads = 0, nope = 0, rope = 0, v_dim = 0, lora = 0;  // model dims (all heads)
  int64_t head_begin = 0, head_end = 0;                        // this call's heads
  const MlaSequence* sequences = nullptr;  // in token order; tokens = the sum of their tokens
  int64_t n_sequences = 0;
  const float* q = nullptr;          // FP32 [tokens][heads][nope + rope], q_pe roped
  const uint16_t* w_uk = nullptr;    // BF16 [heads][nope][lora] (as in kv_b_proj)
  const uint16_t* w_uv_t = nullptr;  // BF16 [heads][lora][v_dim] (W_UV transposed)
  int64_t page_tokens = 64;
  float scale = 1.0f;
  float* out = nullptr;  // FP32 [tokens][heads][v_dim]: this call writes its heads' columns
};

// Dispatching variants throughout (no checks beyond mla_attention's: validate the dims once).
void mla_attention_heads(const MlaHeadsParams& p, MlaHeadsScratch& scratch);

}  // namespace hymoe::kernels
