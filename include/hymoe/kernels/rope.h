// Rotary position embedding of DeepSeek-V3 (YaRN-scaled), on the rope part of q and k.
//
// Layout exactly as HF DeepseekV3's apply_rotary_pos_emb: the input holds interleaved pairs
// (x[2i], x[2i+1]) rotated by angle pos * inv_freq[i]; the output is de-interleaved ("rotate half"
// order): out[i] = x[2i] cos - x[2i+1] sin, out[i + d/2] = x[2i+1] cos + x[2i] sin.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace hymoe::kernels {

// YaRN's parameters, as HF's rope_scaling of type "yarn" gives them (config.json). The defaults
// are DeepSeek-V3's.
struct YarnParams {
  double factor = 40.0;
  int64_t original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 1.0;
};

struct RopeTable {
  int dim = 0;                  // rotary dims (qk_rope_head_dim, 64)
  std::vector<float> inv_freq;  // [dim / 2], YaRN-corrected when scaling is given
  float cos_sin_scale = 1.0f;   // YaRN's mscale(factor, mscale) / mscale(factor, mscale_all_dim)

  // inv_freq as HF DeepseekV3YarnRotaryEmbedding computes it (plain RoPE without yarn).
  static RopeTable make(int dim, double theta, const std::optional<YarnParams>& yarn);
};

// Rotates `heads` vectors of table.dim values (head h at x + h * stride) for position pos,
// in place. Angles are computed in FP32 as HF does (pos * inv_freq).
void rope_apply(const RopeTable& table, int64_t pos, float* x, int64_t heads, int64_t stride);
// Reference in double (angles from the same FP32 product, trig in double).
void rope_apply_reference(const RopeTable& table, int64_t pos, float* x, int64_t heads,
                          int64_t stride);

}  // namespace hymoe::kernels
