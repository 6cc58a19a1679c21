// The absorbed MLA attention of a block of heads: W_UK absorption, attention, W_UV, per chunk of
// tokens, each stage through its dispatching kernel.
#include <algorithm>

#include "hymoe/kernels/mla_attention.h"

namespace hymoe::kernels {
namespace {

template <typename T>
T* room(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

}  // namespace

void mla_attention_heads(const MlaHeadsParams& p, MlaHeadsScratch& s) {
  const int64_t hn = p.head_end - p.head_begin, qk = p.nope + p.rope, lora = p.lora;
  if (hn <= 0 || p.tokens <= 0) return;
  const int64_t rows = hn * std::min(kMlaTokenChunk, p.tokens);
  float* qn = room(s.qn, rows * p.nope);
  float* qlat = room(s.qlat, rows * lora);
  float* olat = room(s.olat, rows * lora);
  float* ov = room(s.ov, rows * p.v_dim);
  for (int64_t c0 = 0; c0 < p.tokens; c0 += kMlaTokenChunk) {
    const int64_t n = std::min(kMlaTokenChunk, p.tokens - c0);
    for (int64_t j = 0; j < hn; ++j) {
      const int64_t h = p.head_begin + j;
      for (int64_t t = 0; t < n; ++t) {
        const float* src = p.q + (c0 + t) * p.heads * qk + h * qk;
        std::copy(src, src + p.nope, qn + (j * n + t) * p.nope);
      }
      Bf16GemvParams g;
      g.w = p.w_uk_t + h * lora * p.nope;
      g.rows = lora;
      g.cols = p.nope;
      g.x = qn + j * n * p.nope;
      g.tokens = n;
      g.y = qlat + j * n * lora;
      g.row_begin = 0;
      g.row_end = lora;
      bf16_gemv(g);
    }
    MlaAttentionParams a;
    a.lora = lora;
    a.rope = p.rope;
    a.first_position = p.first_position + c0;
    a.token_begin = 0;
    a.token_end = n;
    a.head_begin = 0;
    a.head_end = hn;
    a.q_lat = qlat;
    a.q_lat_token_stride = lora;
    a.q_lat_head_stride = n * lora;
    a.q_pe = p.q + c0 * p.heads * qk + p.head_begin * qk + p.nope;
    a.q_pe_token_stride = p.heads * qk;
    a.q_pe_head_stride = qk;
    a.pages = p.pages;
    a.page_tokens = p.page_tokens;
    a.scale = p.scale;
    a.out = olat;
    a.out_token_stride = lora;
    a.out_head_stride = n * lora;
    mla_attention(a, s.attn);
    for (int64_t j = 0; j < hn; ++j) {
      const int64_t h = p.head_begin + j;
      Bf16GemvParams g;
      g.w = p.w_uv + h * p.v_dim * lora;
      g.rows = p.v_dim;
      g.cols = lora;
      g.x = olat + j * n * lora;
      g.tokens = n;
      g.y = ov + j * n * p.v_dim;
      g.row_begin = 0;
      g.row_end = p.v_dim;
      bf16_gemv(g);
      for (int64_t t = 0; t < n; ++t) {
        const float* src = ov + (j * n + t) * p.v_dim;
        std::copy(src, src + p.v_dim, p.out + (c0 + t) * p.heads * p.v_dim + h * p.v_dim);
      }
    }
  }
}

}  // namespace hymoe::kernels
