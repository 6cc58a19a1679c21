// YaRN rotary position embedding of DeepSeek-V3 (HF DeepseekV3YarnRotaryEmbedding), applied in
// place to the rope part of each head. The input pairs are interleaved (x[2i], x[2i+1]) as the
// checkpoint's projections produce them; like the HF reference, the output is written in the
// rotate-half layout: out[i] = x[2i]*c_i - x[2i+1]*s_i, out[i+d/2] = x[2i+1]*c_i + x[2i]*s_i,
// with c_i = cos(pos*inv_freq_i)*mscale, s_i = sin(pos*inv_freq_i)*mscale. q_pe and k_pe get the
// same permutation, so their dot products are those of the interleaved form.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

inline constexpr int kMaxRopeDim = 128;

struct YarnConfig {
  double theta = 10000.0;
  double factor = 40.0;                   // 1 disables YaRN (plain RoPE)
  double original_max_position = 4096.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 1.0;
};

// The rotary table of YaRN: inv_freq[i] for i < rope_dim/2 and the cos/sin multiplier, computed as
// HF does (FP32 inv_freq). Pure host code. Throws kInvalidArgument for odd or too large rope_dim.
struct YarnTable {
  int rope_dim = 0;
  float inv_freq[kMaxRopeDim / 2] = {};
  float mscale = 1.0f;  // yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)
};
YarnTable make_yarn_table(const YarnConfig& config, int rope_dim);

struct RopeParams {
  Bf16* x = nullptr;              // rope part of head h of token t at x + t*token_stride + h*head_stride
  const int32_t* positions = nullptr;  // [tokens] absolute positions
  int tokens = 0;
  int heads = 0;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
  YarnTable table;
};

// Angles are pos * inv_freq in FP32 (as HF), sin/cos in full precision, output rounded once.
void rope_yarn(const RopeParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
