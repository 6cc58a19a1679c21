// YaRN rope: frequencies derived by hand for the tiny and DeepSeek-V3 dims, rotation against a
// direct complex multiplication, relative-position property, and the mscale factors.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>

#include "hymoe/common/error.h"
#include "random_weights.h"
#include "test_util.h"
#include "yarn_rope.h"

namespace hymoe::reference {
namespace {

using testing::random_vector;

// Hand derivation, theta 10000, original context 4096:
//   corr(r) = d * ln(4096 / (2 pi r)) / (2 ln 10000)
//   tiny, d = 32: corr(32) = 5.236 -> low 5,  corr(1) = 11.26 -> high 12
//   V3,   d = 64: corr(32) = 10.47 -> low 10, corr(1) = 22.53 -> high 23
// Pairs i <= low keep theta^(-2i/d); pairs i >= high are divided by the factor 40; in between
// the ramp (i - low) / (high - low) blends them.
void expect_yarn_freqs(const ModelConfig& c, int low, int high) {
  const YarnRope rope(c);
  const double d = static_cast<double>(c.qk_rope_head_dim);
  ASSERT_EQ(rope.dim(), c.qk_rope_head_dim);
  for (int i = 0; i < c.qk_rope_head_dim / 2; ++i) {
    const double base = std::pow(10000.0, -2.0 * i / d);
    double expect = base;
    if (i >= high) {
      expect = base / 40.0;
    } else if (i > low) {
      const double t = static_cast<double>(i - low) / (high - low);
      expect = base / 40.0 * t + base * (1.0 - t);
    }
    EXPECT_NEAR(rope.inv_freq(i) / expect, 1.0, 1e-12) << "pair " << i;
  }
}

TEST(ReferenceRope, YarnFrequenciesTinyDims) {
  expect_yarn_freqs(testing::tiny_test_config(), 5, 12);
}

TEST(ReferenceRope, YarnFrequenciesDeepSeekV3Dims) {
  ModelConfig c;  // defaults are DeepSeek-V3's
  expect_yarn_freqs(c, 10, 23);
}

TEST(ReferenceRope, SoftmaxScaleAndAttentionFactor) {
  const double m = 0.1 * std::log(40.0) + 1.0;  // 1.36889
  {
    const YarnRope rope(testing::tiny_test_config());  // qk head 64 + 32
    EXPECT_NEAR(rope.softmax_scale(), m * m / std::sqrt(96.0), 1e-15);
    EXPECT_DOUBLE_EQ(rope.attention_factor(), 1.0);  // mscale == mscale_all_dim
  }
  {
    ModelConfig c;  // DeepSeek-V3: qk head 192
    EXPECT_NEAR(YarnRope(c).softmax_scale(), m * m / std::sqrt(192.0), 1e-15);
  }
  {
    ModelConfig c = testing::tiny_test_config();
    c.rope_scaling->mscale = 0.707;  // DeepSeek-V2-Lite's values: the ratio cancels
    c.rope_scaling->mscale_all_dim = 0.707;
    const double m2 = 0.1 * 0.707 * std::log(40.0) + 1.0;
    EXPECT_NEAR(YarnRope(c).attention_factor(), 1.0, 1e-15);
    EXPECT_NEAR(YarnRope(c).softmax_scale(), m2 * m2 / std::sqrt(96.0), 1e-15);
  }
  {
    ModelConfig c = testing::tiny_test_config();
    c.rope_scaling->mscale_all_dim = 0.0;  // cos/sin take get_mscale(factor), softmax does not
    EXPECT_NEAR(YarnRope(c).attention_factor(), m, 1e-15);
    EXPECT_NEAR(YarnRope(c).softmax_scale(), 1.0 / std::sqrt(96.0), 1e-15);
  }
  {
    ModelConfig c = testing::tiny_test_config();
    c.rope_scaling.reset();
    const YarnRope rope(c);
    EXPECT_DOUBLE_EQ(rope.attention_factor(), 1.0);
    EXPECT_NEAR(rope.softmax_scale(), 1.0 / std::sqrt(96.0), 1e-15);
    for (int i = 0; i < 16; ++i) {
      EXPECT_NEAR(rope.inv_freq(i), std::pow(10000.0, -i / 16.0), 1e-15);
    }
  }
}

TEST(ReferenceRope, ApplyIsComplexRotationOfInterleavedPairs) {
  ModelConfig c = testing::tiny_test_config();
  c.rope_scaling->mscale_all_dim = 0.0;  // attention factor != 1 so its use is checked too
  const YarnRope rope(c);
  std::mt19937_64 rng(21);
  for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4095}, int64_t{163839}}) {
    const std::vector<float> x = random_vector(32, rng);
    std::vector<float> y = x;
    rope.apply(y, pos);
    for (int i = 0; i < 16; ++i) {
      const std::complex<double> z(x[2 * i], x[2 * i + 1]);
      const std::complex<double> r =
          z * std::polar(rope.attention_factor(), static_cast<double>(pos) * rope.inv_freq(i));
      EXPECT_NEAR(y[2 * i], r.real(), 2e-6 * std::abs(r) + 1e-7) << "pos " << pos << " pair " << i;
      EXPECT_NEAR(y[2 * i + 1], r.imag(), 2e-6 * std::abs(r) + 1e-7);
    }
  }
}

TEST(ReferenceRope, ScoresDependOnRelativePositionOnly) {
  const YarnRope rope(testing::tiny_test_config());
  std::mt19937_64 rng(22);
  const std::vector<float> q = random_vector(32, rng), k = random_vector(32, rng);
  auto score = [&](int64_t qpos, int64_t kpos) {
    std::vector<float> a = q, b = k;
    rope.apply(a, qpos);
    rope.apply(b, kpos);
    double s = 0.0;
    for (int i = 0; i < 32; ++i) s += double{a[i]} * b[i];
    return s;
  };
  EXPECT_NEAR(score(10, 3), score(110, 103), 1e-5);
  EXPECT_NEAR(score(5, 5), score(1000, 1000), 1e-5);
  EXPECT_GT(std::abs(score(10, 3) - score(10, 4)), 1e-4);  // and it does depend on distance
}

TEST(ReferenceRope, WrongSizeIsAnError) {
  const YarnRope rope(testing::tiny_test_config());
  std::vector<float> x(31);
  EXPECT_THROW(rope.apply(x, 0), Error);
}

}  // namespace
}  // namespace hymoe::reference
