// Rotary position embedding of DeepSeek-V3 with YaRN scaling, as Hugging Face transformers'
// DeepseekV3 model computes it (modeling_rope_utils "yarn" + DeepseekV3Attention):
//
//  - rope dim d = qk_rope_head_dim; pair i (0 <= i < d/2) turns by pos * inv_freq[i];
//  - inv_freq[i] = interp[i] * ramp[i] + extrap[i] * (1 - ramp[i]), with
//      extrap[i] = theta^(-2i/d), interp[i] = extrap[i] / factor,
//      ramp[i]  = clamp((i - low) / (high - low), 0, 1),
//      low  = max(floor(corr(beta_fast)), 0), high = min(ceil(corr(beta_slow)), d - 1),
//      corr(r) = d * ln(original_max_position_embeddings / (2 pi r)) / (2 ln theta);
//      (high += 0.001 when low == high);
//  - cos and sin are multiplied by attention_factor =
//      get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both are non-zero,
//      else get_mscale(factor, 1), where get_mscale(s, m) = 0.1 * m * ln(s) + 1 (1 when s <= 1);
//  - the softmax scale is qk_head_dim^-0.5 * get_mscale(factor, mscale_all_dim)^2
//      (no extra factor when mscale_all_dim is 0).
// Without rope_scaling: inv_freq[i] = theta^(-2i/d), attention_factor 1, softmax qk_head_dim^-0.5.
//
// Layout: the checkpoint's rope dims are interleaved pairs (x[2i], x[2i+1]) (DeepSeek's complex
// form); apply() rotates each pair in place and keeps that layout. HF's rope_interleave path
// returns the same numbers de-interleaved ([x'0, x'2, ..., x'1, x'3, ...]); q.k products are the
// same either way because q and k are permuted alike.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hymoe/model/config.h"

namespace hymoe::reference {

class YarnRope {
 public:
  // Throws hymoe::Error (kInvalidArgument) for an odd or non-positive rope dim or theta <= 1.
  explicit YarnRope(const ModelConfig& config);

  int64_t dim() const { return dim_; }
  double inv_freq(int64_t pair) const { return inv_freq_[static_cast<size_t>(pair)]; }
  double attention_factor() const { return attention_factor_; }
  double softmax_scale() const { return softmax_scale_; }

  // Rotates the interleaved pairs of x (size dim()) for position pos, scaling by
  // attention_factor(). Throws hymoe::Error (kInvalidArgument) when x.size() != dim().
  void apply(std::span<float> x, int64_t pos) const;

 private:
  int64_t dim_ = 0;
  std::vector<double> inv_freq_;
  double attention_factor_ = 1.0;
  double softmax_scale_ = 1.0;
};

// get_mscale(scale, m) of the YaRN paper as DeepSeek uses it: 0.1 * m * ln(scale) + 1, or 1 when
// scale <= 1.
double yarn_get_mscale(double scale, double mscale);

}  // namespace hymoe::reference
