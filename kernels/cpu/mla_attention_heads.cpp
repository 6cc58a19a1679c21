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
  int64_t total = 0;
  for (int64_t i = 0; i < p.n_sequences; ++i) total += p.sequences[i].tokens;
  if (hn <= 0 || total <= 0) return;
  const int64_t rows = hn * std::min(kMlaTokenChunk, total);
  float* qlat = room(s.qlat, rows * lora);
  float* olat = room(s.olat, rows * lora);
  int64_t seq = 0, seq_begin = 0;  // the first sequence reaching into the chunk, its first token
  for (int64_t c0 = 0; c0 < total; c0 += kMlaTokenChunk) {
    const int64_t n = std::min(kMlaTokenChunk, total - c0);
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
    // Each sequence's part [t0, t1) of the chunk [c0, c0 + n).
    while (seq_begin + p.sequences[seq].tokens <= c0) seq_begin += p.sequences[seq++].tokens;
    for (int64_t si = seq, sb = seq_begin; si < p.n_sequences && sb < c0 + n; sb += p.sequences[si++].tokens) {
      const MlaSequence& sq = p.sequences[si];
      const int64_t t0 = std::max(c0, sb), t1 = std::min(c0 + n, sb + sq.tokens);
      if (t1 <= t0) continue;
      MlaAttentionParams a;
      a.lora = lora;
      a.rope = p.rope;
      a.first_position = sq.first_position + (t0 - sb);
      a.token_begin = 0;
      a.token_end = t1 - t0;
      a.head_begin = 0;
      a.head_end = hn;
      a.q_lat = qlat + (t0 - c0) * lora;
      a.q_lat_token_stride = lora;
      a.q_lat_head_stride = n * lora;
      a.q_pe = p.q + t0 * p.heads * qk + p.head_begin * qk + p.nope;
      a.q_pe_token_stride = p.heads * qk;
      a.q_pe_head_stride = qk;
      a.pages = sq.pages;
      a.page_tokens = p.page_tokens;
      a.scale = p.scale;
      a.out = olat + (t0 - c0) * lora;
      a.out_token_stride = lora;
      a.out_head_stride = n * lora;
      mla_attention(a, s.attn);
    }
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
