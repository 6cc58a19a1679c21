// RMSNorm, SiLU-and-multiply, RoPE and the noaux_tc router against their references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "hymoe/common/error.h"
#include "hymoe/kernels/moe_router.h"
#include "hymoe/kernels/rmsnorm.h"
#include "hymoe/kernels/rope.h"
#include "hymoe/kernels/silu_mul.h"
#include "kernel_test_util.h"

namespace hymoe::kernels {
namespace {

TEST(RmsNorm, MatchesReference) {
  std::mt19937_64 rng = test::make_rng();
  for (int64_t n : {7168, 1536, 512, 13}) {
    auto x = test::random_f32(n, rng, -3.0f, 3.0f);
    auto w = test::random_f32(n, rng, 0.5f, 1.5f);
    auto out = test::nan_vector(n), ref = test::nan_vector(n);
    rmsnorm(x.data(), w.data(), n, 1e-6f, out.data());
    rmsnorm_reference(x.data(), w.data(), n, 1e-6f, ref.data());
    EXPECT_LT(test::normalised_error(out.data(), ref.data(), n), 1e-6) << n;
    std::vector<uint16_t> b(n, 0xFFFF);
    rmsnorm_bf16(x.data(), w.data(), n, 1e-6f, b.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(bf16_to_float(b[i]), ref[i], std::fabs(ref[i]) * 1e-2 + 1e-6);
  }
}

TEST(SiluMul, MatchesReference) {
  std::mt19937_64 rng = test::make_rng();
  const int64_t n = 2048 + 3;
  auto g = test::random_f32(n, rng, -8.0f, 8.0f), u = test::random_f32(n, rng);
  auto out = test::nan_vector(n), ref = test::nan_vector(n);
  silu_mul(g.data(), u.data(), n, out.data());
  silu_mul_reference(g.data(), u.data(), n, ref.data());
  EXPECT_LT(test::normalised_error(out.data(), ref.data(), n), 1e-6);
  std::vector<uint16_t> b(n, 0xFFFF);
  silu_mul_bf16(g.data(), u.data(), n, b.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(b[i], float_to_bf16(out[i]));
}

TEST(Rope, YarnTableMatchesHfFormula) {
  // DeepSeek-V3: dim 64, theta 1e4, factor 40, original 4096, beta 32/1. HF's correction range
  // for these is [10, 23]: below it the plain frequency, above it divided by the factor.
  RopeTable t = RopeTable::make(64, 10000.0, YarnParams{});
  ASSERT_EQ(t.inv_freq.size(), 32u);
  EXPECT_FLOAT_EQ(t.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(t.inv_freq[5], 1.0f / std::pow(10000.0f, 10.0f / 64.0f));
  EXPECT_FLOAT_EQ(t.inv_freq[31], 1.0f / (40.0f * std::pow(10000.0f, 62.0f / 64.0f)));
  EXPECT_FLOAT_EQ(t.cos_sin_scale, 1.0f);  // mscale == mscale_all_dim
  const float mid = t.inv_freq[16];
  const float extra = 1.0f / std::pow(10000.0f, 32.0f / 64.0f);
  EXPECT_LT(mid, extra);
  EXPECT_GT(mid, extra / 40.0f);
}

TEST(Rope, MatchesReferenceAndPreservesNorm) {
  std::mt19937_64 rng = test::make_rng();
  RopeTable t = RopeTable::make(64, 10000.0, YarnParams{});
  const int64_t heads = 5, stride = 192;
  for (int64_t pos : {0L, 1L, 77L, 4095L, 32767L}) {
    auto x = test::random_f32(heads * stride, rng);
    auto a = x, b = x;
    rope_apply(t, pos, a.data() + 128, heads, stride);  // the rope part after 128 nope dims
    rope_apply_reference(t, pos, b.data() + 128, heads, stride);
    EXPECT_LT(test::normalised_error(a.data(), b.data(), a.size()), 1e-5) << pos;
    for (int64_t h = 0; h < heads; ++h) {
      double n0 = 0, n1 = 0;
      for (int i = 0; i < 64; ++i) {
        n0 += x[h * stride + 128 + i] * x[h * stride + 128 + i];
        n1 += a[h * stride + 128 + i] * a[h * stride + 128 + i];
      }
      EXPECT_NEAR(n0, n1, 1e-4 * n0);
      EXPECT_EQ(a[h * stride], x[h * stride]);  // nope part untouched
    }
  }
  // Position 0 only de-interleaves.
  std::vector<float> v(64);
  for (int i = 0; i < 64; ++i) v[i] = static_cast<float>(i);
  rope_apply(t, 0, v.data(), 1, 64);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(v[32], 1.0f);
  EXPECT_EQ(v[33], 3.0f);
}

TEST(Router, MatchesReferenceDeepSeekAndKimi) {
  std::mt19937_64 rng = test::make_rng();
  struct Cfg { int experts, groups, topk_group; float scaling; };
  for (Cfg cfg : {Cfg{256, 8, 4, 2.5f}, Cfg{384, 1, 1, 2.827f}, Cfg{64, 4, 2, 1.0f}}) {
    auto bias = test::random_f32(cfg.experts, rng, -0.2f, 0.2f);
    RouterParams p{cfg.experts, cfg.groups, cfg.topk_group, 8, true, cfg.scaling, bias.data()};
    validate(p);
    for (int token = 0; token < 50; ++token) {
      auto logits = test::random_f32(cfg.experts, rng, -4.0f, 4.0f);
      int32_t ids[8], rids[8];
      float w[8], rw[8];
      std::fill(w, w + 8, NAN);
      route_noaux_tc(p, logits.data(), ids, w);
      route_noaux_tc_reference(p, logits.data(), rids, rw);
      float sum = 0;
      std::set<int> distinct(ids, ids + 8);
      EXPECT_EQ(distinct.size(), 8u);
      // The kernel ranks by FP32 sigmoid + bias, the reference by double: experts whose choice
      // values lie within FP32 rounding of each other may swap places. Anything else is a bug.
      auto choice = [&](int e) { return 1.0 / (1.0 + std::exp(-double(logits[e]))) + bias[e]; };
      for (int k = 0; k < 8; ++k) {
        if (ids[k] == rids[k]) {
          EXPECT_NEAR(w[k], rw[k], 1e-5f);
        } else {
          EXPECT_NEAR(choice(ids[k]), choice(rids[k]), 1e-6) << "k " << k;
        }
        sum += w[k];
      }
      EXPECT_NEAR(sum, cfg.scaling, 1e-4f);
    }
  }
}

TEST(Router, KeepsOnlyTheBestGroups) {
  // Group 3 has the largest top-2 sum; with topk_group 1 every pick must come from it even
  // though group 0 holds the single largest score.
  std::vector<float> bias(64, 0.0f), logits(64, -5.0f);
  logits[0] = 6.0f;
  for (int e = 48; e < 64; ++e) logits[e] = 3.0f + 0.01f * e;
  RouterParams p{64, 4, 1, 4, true, 1.0f, bias.data()};
  int32_t ids[4];
  float w[4];
  route_noaux_tc(p, logits.data(), ids, w);
  for (int k = 0; k < 4; ++k) EXPECT_GE(ids[k], 48);
  EXPECT_EQ(ids[0], 63);
  p.n_group = 5;
  EXPECT_THROW(validate(p), Error);
}

}  // namespace
}  // namespace hymoe::kernels
