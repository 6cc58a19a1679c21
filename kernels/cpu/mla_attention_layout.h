// Internal: how the MLA attention variants walk a call's rows and the paged cache.
#pragma once

#include <algorithm>
#include <cstdint>

#include "hymoe/kernels/mla_attention.h"

namespace hymoe::kernels::detail {

// The call's rows in order: row i is token token_begin + i / heads, head head_begin + i % heads.
struct MlaRows {
  int64_t heads = 0, count = 0;
  explicit MlaRows(const MlaAttentionParams& p)
      : heads(p.head_end - p.head_begin), count((p.token_end - p.token_begin) * (p.head_end - p.head_begin)) {}
  int64_t token(const MlaAttentionParams& p, int64_t i) const { return p.token_begin + i / heads; }
  int64_t head(const MlaAttentionParams& p, int64_t i) const { return p.head_begin + i % heads; }
  int64_t position(const MlaAttentionParams& p, int64_t i) const { return p.first_position + token(p, i); }
  const float* q_lat(const MlaAttentionParams& p, int64_t i) const {
    return p.q_lat + token(p, i) * p.q_lat_token_stride + head(p, i) * p.q_lat_head_stride;
  }
  const float* q_pe(const MlaAttentionParams& p, int64_t i) const {
    return p.q_pe + token(p, i) * p.q_pe_token_stride + head(p, i) * p.q_pe_head_stride;
  }
  float* out(const MlaAttentionParams& p, int64_t i) const {
    return p.out + token(p, i) * p.out_token_stride + head(p, i) * p.out_head_stride;
  }
};

// Cache row of absolute position j.
inline const uint16_t* mla_cache_row(const MlaAttentionParams& p, int64_t j) {
  return p.pages[j / p.page_tokens] + (j % p.page_tokens) * (p.lora + p.rope);
}

// Keys the call reads: 0 .. kv_len - 1 (the last query's position).
inline int64_t mla_kv_len(const MlaAttentionParams& p) { return p.first_position + p.token_end; }

}  // namespace hymoe::kernels::detail
