#include "hymoe/kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "hymoe/common/error.h"

namespace hymoe::kernels {
namespace {

// YaRN helpers, as HF modeling_deepseek_v3 defines them.
double yarn_correction_dim(double rotations, int dim, double base, double max_pos) {
  return (dim * std::log(max_pos / (rotations * 2.0 * std::numbers::pi))) / (2.0 * std::log(base));
}
double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

RopeTable RopeTable::make(int dim, double theta, const std::optional<YarnParams>& yarn) {
  HYMOE_CHECK(dim > 0 && dim % 2 == 0 && dim <= 512, kInvalidArgument,
              "rope: dim {} must be even and at most 512", dim);
  RopeTable t;
  t.dim = dim;
  const int half = dim / 2;
  t.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) {
    // HF: 1 / base ** (arange(0, dim, 2, float32) / dim), in float32.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float freq_extra = 1.0f / std::pow(static_cast<float>(theta), expo);
    if (!yarn) {
      t.inv_freq[i] = freq_extra;
      continue;
    }
    const float freq_inter = 1.0f / (static_cast<float>(yarn->factor) * std::pow(static_cast<float>(theta), expo));
    const double max_pos = static_cast<double>(yarn->original_max_position_embeddings);
    double low = std::floor(yarn_correction_dim(yarn->beta_fast, dim, theta, max_pos));
    double high = std::ceil(yarn_correction_dim(yarn->beta_slow, dim, theta, max_pos));
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extra_mask = 1.0f - ramp;
    t.inv_freq[i] = freq_inter * (1.0f - extra_mask) + freq_extra * extra_mask;
  }
  if (yarn) {
    t.cos_sin_scale = static_cast<float>(yarn_mscale(yarn->factor, yarn->mscale) /
                                         yarn_mscale(yarn->factor, yarn->mscale_all_dim));
  }
  return t;
}

void rope_apply(const RopeTable& table, int64_t pos, float* x, int64_t heads, int64_t stride) {
  const int half = table.dim / 2;
  float cs[256], sn[256];  // dim <= 512: checked by RopeTable::make
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * table.inv_freq[i];
    cs[i] = std::cos(angle) * table.cos_sin_scale;
    sn[i] = std::sin(angle) * table.cos_sin_scale;
  }
  float tmp[512];
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * stride;
    for (int i = 0; i < half; ++i) {
      const float a = v[2 * i], b = v[2 * i + 1];
      tmp[i] = a * cs[i] - b * sn[i];
      tmp[i + half] = b * cs[i] + a * sn[i];
    }
    std::copy(tmp, tmp + table.dim, v);
  }
}

void rope_apply_reference(const RopeTable& table, int64_t pos, float* x, int64_t heads,
                          int64_t stride) {
  const int half = table.dim / 2;
  std::vector<double> out(table.dim);
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * stride;
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<float>(pos) * table.inv_freq[i];
      const double c = std::cos(angle) * table.cos_sin_scale;
      const double s = std::sin(angle) * table.cos_sin_scale;
      out[i] = v[2 * i] * c - v[2 * i + 1] * s;
      out[i + half] = v[2 * i + 1] * c + v[2 * i] * s;
    }
    for (int i = 0; i < table.dim; ++i) v[i] = static_cast<float>(out[i]);
  }
}

}  // namespace hymoe::kernels
