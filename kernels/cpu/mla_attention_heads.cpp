// The absorbed MLA attention of a block of heads: W_UK absorption, attention, W_UV, per chunk of
// tokens, each stage through its dispatching kernel, reading q and writing out in place.
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
  float* qlat = room(s.qlat, rows * lora);
  float* olat = room(s.olat, rows * lora);
  for (int64_t c0 = 0; c0 < p.tokens; c0 += kMlaTokenChunk) {
    const int64_t n = std::min(kMlaTokenChunk, p.tokens - c0);
    const float* q = p.q + c0 * p.heads * qk;
    for (int64_t j = 0; j < hn; ++j) {
      const int64_t h = p.head_begin + j;
      MlaAbsorbParams g;
      g.w = p.w_uk + h * p.nope * lora;
      g.k = p.nope;
      g.n = lora;
      g.x = q + h * qk;
      g.x_stride = p.heads * qk;
      g.tokens = n;
      g.y = qlat + j * n * lora;
      g.y_stride = lora;
      mla_absorb(g);
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
    a.q_pe = q + p.head_begin * qk + p.nope;
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
      MlaAbsorbParams g;
      g.w = p.w_uv_t + h * lora * p.v_dim;
      g.k = lora;
      g.n = p.v_dim;
      g.x = olat + j * n * lora;
      g.x_stride = lora;
      g.tokens = n;
      g.y = p.out + c0 * p.heads * p.v_dim + h * p.v_dim;
      g.y_stride = p.heads * p.v_dim;
      mla_absorb(g);
    }
  }
}

}  // namespace hymoe::kernels
