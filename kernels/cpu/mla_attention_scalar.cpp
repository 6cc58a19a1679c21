// MLA attention, scalar variant: the same key blocks and online softmax as the vector kernels,
// in plain FP32 loops (q rounded to BF16 like theirs; the weights p stay FP32).
#include <algorithm>
#include <cmath>
#include <limits>

#include "hymoe/common/numeric.h"
#include "mla_attention_layout.h"
#include "variants.h"

namespace hymoe::kernels::detail {

void mla_attention_scalar(const MlaAttentionParams& p, MlaAttentionScratch& sc) {
  const MlaRows rows(p);
  const int64_t lora = p.lora, width = p.lora + p.rope, kv_len = mla_kv_len(p);
  if (static_cast<int64_t>(sc.m.size()) < rows.count) {
    sc.m.resize(static_cast<size_t>(rows.count));
    sc.l.resize(static_cast<size_t>(rows.count));
  }
  if (static_cast<int64_t>(sc.q_row.size()) < width) sc.q_row.resize(static_cast<size_t>(width));
  float* q = sc.q_row.data();
  const float sl2 = p.scale * 1.4426950408889634f;
  float s[kMlaKeyBlock];
  for (int64_t b0 = 0; b0 < kv_len; b0 += kMlaKeyBlock) {
    const int64_t nb = std::min(kMlaKeyBlock, kv_len - b0);
    for (int64_t i = 0; i < rows.count; ++i) {
      const int64_t n = std::min(nb, rows.position(p, i) - b0 + 1);
      if (n <= 0) continue;
      const float* ql = rows.q_lat(p, i);
      const float* qp = rows.q_pe(p, i);
      for (int64_t c = 0; c < lora; ++c) q[c] = bf16_to_float(float_to_bf16(ql[c]));
      for (int64_t c = 0; c < p.rope; ++c) q[lora + c] = bf16_to_float(float_to_bf16(qp[c]));
      float bmax = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < n; ++k) {
        const uint16_t* row = mla_cache_row(p, b0 + k);
        float d = 0.0f;
        for (int64_t c = 0; c < width; ++c) d += q[c] * bf16_to_float(row[c]);
        s[k] = d * sl2;
        bmax = std::max(bmax, s[k]);
      }
      const size_t ii = static_cast<size_t>(i);
      const float m_new = b0 == 0 ? bmax : std::max(sc.m[ii], bmax);
      const float alpha = b0 == 0 ? 0.0f : std::exp2(sc.m[ii] - m_new);
      float sum = 0.0f;
      for (int64_t k = 0; k < n; ++k) {
        s[k] = std::exp2(s[k] - m_new);
        sum += s[k];
      }
      sc.l[ii] = (b0 == 0 ? 0.0f : sc.l[ii] * alpha) + sum;
      sc.m[ii] = m_new;
      float* o = rows.out(p, i);
      if (b0 == 0) {
        std::fill(o, o + lora, 0.0f);
      } else {
        for (int64_t c = 0; c < lora; ++c) o[c] *= alpha;
      }
      for (int64_t k = 0; k < n; ++k) {
        const uint16_t* row = mla_cache_row(p, b0 + k);
        for (int64_t c = 0; c < lora; ++c) o[c] += s[k] * bf16_to_float(row[c]);
      }
    }
  }
  for (int64_t i = 0; i < rows.count; ++i) {
    const float inv = 1.0f / sc.l[static_cast<size_t>(i)];
    float* o = rows.out(p, i);
    for (int64_t c = 0; c < lora; ++c) o[c] *= inv;
  }
}

}  // namespace hymoe::kernels::detail
