// YaRN inverse frequencies, following HF DeepseekV3YarnRotaryEmbedding step by step.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "hymoe/common/error.h"
#include "hymoe/gpu/rope.h"

namespace hymoe::gpu {
namespace {

double correction_dim(double rotations, int dim, double base, double max_position) {
  return dim * std::log(max_position / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

double yarn_mscale(double factor, double mscale) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

}  // namespace

YarnTable make_yarn_table(const YarnConfig& config, int rope_dim) {
  HYMOE_CHECK(rope_dim >= 2 && rope_dim % 2 == 0 && rope_dim <= kMaxRopeDim, kInvalidArgument,
              "rope_dim {} must be even and <= {}", rope_dim, kMaxRopeDim);
  HYMOE_CHECK(config.theta > 1.0 && config.factor > 0.0, kInvalidArgument,
              "bad rope config: theta {} factor {}", config.theta, config.factor);
  YarnTable table;
  table.rope_dim = rope_dim;
  const int half = rope_dim / 2;
  double low = 0.0, high = 0.0;
  const bool yarn = config.factor > 1.0;
  if (yarn) {
    low = std::max(0.0, std::floor(correction_dim(config.beta_fast, rope_dim, config.theta,
                                                  config.original_max_position)));
    high = std::min(static_cast<double>(rope_dim - 1),
                    std::ceil(correction_dim(config.beta_slow, rope_dim, config.theta,
                                             config.original_max_position)));
    if (low == high) high += 0.001;
  }
  for (int i = 0; i < half; ++i) {
    // FP32 as in HF: base ** (arange(0, dim, 2) / dim) in float32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
    const float pos_freq = std::pow(static_cast<float>(config.theta), exponent);
    const float extra = 1.0f / pos_freq;
    if (!yarn) {
      table.inv_freq[i] = extra;
      continue;
    }
    const float inter = 1.0f / (static_cast<float>(config.factor) * pos_freq);
    const float ramp =
        std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extra_mask = 1.0f - ramp;
    table.inv_freq[i] = inter * (1.0f - extra_mask) + extra * extra_mask;
  }
  table.mscale = static_cast<float>(yarn_mscale(config.factor, config.mscale) /
                                    yarn_mscale(config.factor, config.mscale_all_dim));
  return table;
}

}  // namespace hymoe::gpu
