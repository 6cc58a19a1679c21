#include "yarn_rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "hymoe/common/error.h"

namespace hymoe::reference {
namespace {

// The rope dim index at which a frequency makes `rotations` turns over the original context.
double correction_dim(double rotations, double dim, double base, double original_max_pos) {
  return dim * std::log(original_max_pos / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(base));
}

}  // namespace

double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

YarnRope::YarnRope(const ModelConfig& config) : dim_(config.qk_rope_head_dim) {
  HYMOE_CHECK(dim_ > 0 && dim_ % 2 == 0, kInvalidArgument,
              "qk_rope_head_dim {} must be positive and even", dim_);
  HYMOE_CHECK(config.rope_theta > 1.0, kInvalidArgument, "rope_theta {} must be > 1",
              config.rope_theta);
  const double base = config.rope_theta;
  const double d = static_cast<double>(dim_);
  const int64_t pairs = dim_ / 2;
  inv_freq_.resize(static_cast<size_t>(pairs));
  softmax_scale_ = 1.0 / std::sqrt(static_cast<double>(config.qk_head_dim()));

  if (!config.rope_scaling) {
    for (int64_t i = 0; i < pairs; ++i) inv_freq_[i] = std::pow(base, -2.0 * i / d);
    return;
  }
  const YarnScaling& y = *config.rope_scaling;
  HYMOE_CHECK(y.factor > 0 && y.original_max_position_embeddings > 0 && y.beta_fast > 0 &&
                  y.beta_slow > 0,
              kInvalidArgument, "rope_scaling: factor, original_max_position_embeddings and betas "
                                "must be positive");
  const double orig = static_cast<double>(y.original_max_position_embeddings);
  const double low = std::max(std::floor(correction_dim(y.beta_fast, d, base, orig)), 0.0);
  double high = std::min(std::ceil(correction_dim(y.beta_slow, d, base, orig)), d - 1.0);
  if (low == high) high += 0.001;
  for (int64_t i = 0; i < pairs; ++i) {
    const double extrap = std::pow(base, -2.0 * i / d);
    const double interp = extrap / y.factor;
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    inv_freq_[i] = interp * ramp + extrap * (1.0 - ramp);
  }
  attention_factor_ = (y.mscale != 0.0 && y.mscale_all_dim != 0.0)
                          ? yarn_get_mscale(y.factor, y.mscale) /
                                yarn_get_mscale(y.factor, y.mscale_all_dim)
                          : yarn_get_mscale(y.factor, 1.0);
  if (y.mscale_all_dim != 0.0) {
    const double m = yarn_get_mscale(y.factor, y.mscale_all_dim);
    softmax_scale_ *= m * m;
  }
}

void YarnRope::apply(std::span<float> x, int64_t pos) const {
  HYMOE_CHECK(static_cast<int64_t>(x.size()) == dim_, kInvalidArgument,
              "rope over {} values, rope dim is {}", x.size(), dim_);
  for (int64_t i = 0; i < dim_ / 2; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq_[i];
    const double c = std::cos(angle) * attention_factor_;
    const double s = std::sin(angle) * attention_factor_;
    const double re = x[2 * i];
    const double im = x[2 * i + 1];
    x[2 * i] = static_cast<float>(re * c - im * s);
    x[2 * i + 1] = static_cast<float>(re * s + im * c);
  }
}

}  // namespace hymoe::reference
