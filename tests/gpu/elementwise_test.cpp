// RMSNorm, SiLU-and-multiply, embedding gather and YaRN RoPE against scalar references on fresh
// random inputs with NaN-poisoned outputs, vector and scalar (ragged) paths, strided rows.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "gpu_test_util.h"
#include "hymoe/gpu/activation.h"
#include "hymoe/gpu/embedding.h"
#include "hymoe/gpu/norm.h"
#include "hymoe/gpu/rope.h"

namespace hymoe::gpu {
namespace {

using test::make_rng;
using test::random_bf16;

// |out - ref| <= ulps BF16 steps of ref (2^-8 relative each) plus a tiny absolute slack.
void expect_bf16_close(const std::vector<Bf16>& out, const std::vector<double>& ref,
                       const std::vector<size_t>& index, double ulps, const char* what) {
  int bad = 0;
  for (size_t i : index) {
    const float o = out[i].to_float();
    const double tol = ulps * std::ldexp(std::fabs(ref[i]), -8) + 1e-30;
    if (!(std::fabs(o - ref[i]) <= tol)) {
      if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "] = " << o << ", expected " << ref[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

struct RowShape {
  int rows, cols;
  int64_t x_stride, out_stride;
};

class RmsNormTest : public ::testing::TestWithParam<RowShape> {};

TEST_P(RmsNormTest, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  const RowShape s = GetParam();
  auto rng = make_rng();
  Stream stream;
  const auto x = random_bf16(s.rows * s.x_stride, rng, 2.0f);
  auto w = random_bf16(s.cols, rng, 0.3f);
  for (auto& g : w) g = Bf16::from_float(g.to_float() + 1.0f);
  auto dx = test::to_device(x, stream);
  auto dw = test::to_device(w, stream);
  auto dout = test::poisoned<Bf16>(std::max<size_t>(1, s.rows * s.out_stride), stream);
  RmsNormParams p{dx.as<Bf16>(), dw.as<Bf16>(), dout.as<Bf16>(), s.rows, s.cols,
                  s.x_stride, s.out_stride, 1e-6f};
  rmsnorm(p, stream);
  const auto out = test::to_host<Bf16>(dout, s.rows * s.out_stride, stream);

  std::vector<double> ref(out.size(), 0.0);
  std::vector<size_t> written;
  for (int r = 0; r < s.rows; ++r) {
    double sumsq = 0.0;
    for (int c = 0; c < s.cols; ++c) {
      const double v = x[r * s.x_stride + c].to_float();
      sumsq += v * v;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(sumsq / s.cols + 1e-6));
    for (int c = 0; c < s.cols; ++c) {
      const float h = round_to_bf16(x[r * s.x_stride + c].to_float() * inv);
      ref[r * s.out_stride + c] = round_to_bf16(h * w[c].to_float());
      written.push_back(r * s.out_stride + c);
    }
    for (int64_t c = s.cols; c < s.out_stride; ++c)  // the gap between rows stays untouched
      EXPECT_EQ(out[r * s.out_stride + c].bits, 0xFFFF) << "row " << r << " col " << c;
  }
  // rsqrtf and the summation order may move h by one BF16 step: at most 2 steps in the output.
  expect_bf16_close(out, ref, written, 2.0, "rmsnorm");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         ::testing::Values(RowShape{1, 7168, 7168, 7168},
                                           RowShape{37, 1536, 1536, 1536},
                                           RowShape{5, 512, 576, 520},   // c_kv inside kv_a
                                           RowShape{3, 100, 103, 101},   // ragged: scalar path
                                           RowShape{0, 64, 64, 64}));

class SiluMulTest : public ::testing::TestWithParam<RowShape> {};

TEST_P(SiluMulTest, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  const RowShape s = GetParam();
  auto rng = make_rng();
  Stream stream;
  const auto x = random_bf16(s.rows * s.x_stride, rng, 3.0f);
  auto dx = test::to_device(x, stream);
  auto dout = test::poisoned<Bf16>(s.rows * s.out_stride, stream);
  silu_mul({dx.as<Bf16>(), dout.as<Bf16>(), s.rows, s.cols, s.x_stride, s.out_stride}, stream);
  const auto out = test::to_host<Bf16>(dout, s.rows * s.out_stride, stream);
  std::vector<double> ref(out.size(), 0.0);
  std::vector<size_t> written;
  for (int r = 0; r < s.rows; ++r) {
    for (int c = 0; c < s.cols; ++c) {
      const double g = x[r * s.x_stride + c].to_float();
      const double u = x[r * s.x_stride + s.cols + c].to_float();
      const float silu = round_to_bf16(static_cast<float>(g / (1.0 + std::exp(-g))));
      ref[r * s.out_stride + c] = round_to_bf16(static_cast<float>(silu * u));
      written.push_back(r * s.out_stride + c);
    }
    for (int64_t c = s.cols; c < s.out_stride; ++c)
      EXPECT_EQ(out[r * s.out_stride + c].bits, 0xFFFF);
  }
  // expf vs exp may flip the first rounding: one BF16 step, two in the product.
  expect_bf16_close(out, ref, written, 2.0, "silu_mul");
}

INSTANTIATE_TEST_SUITE_P(Shapes, SiluMulTest,
                         ::testing::Values(RowShape{4, 2048, 4096, 2048},
                                           RowShape{3, 18432, 36864, 18432},
                                           RowShape{7, 100, 205, 103}));

TEST(Embedding, GathersRowsAndZeroesBadIds) {
  HYMOE_REQUIRE_GPU();
  auto rng = make_rng();
  Stream stream;
  for (const auto& [vocab, dim, stride] : {std::tuple{1000, 7168, 7168}, std::tuple{77, 100, 104}}) {
    const auto table = random_bf16(static_cast<size_t>(vocab) * dim, rng);
    std::uniform_int_distribution<int> pick(0, vocab - 1);
    std::vector<int32_t> ids(301);
    for (auto& id : ids) id = pick(rng);
    ids[5] = -1;
    ids[17] = vocab;
    auto dt = test::to_device(table, stream);
    auto di = test::to_device(ids, stream);
    auto dout = test::poisoned<Bf16>(ids.size() * stride, stream);
    embedding_gather({di.as<int32_t>(), dt.as<Bf16>(), dout.as<Bf16>(),
                      static_cast<int>(ids.size()), vocab, dim, stride},
                     stream);
    const auto out = test::to_host<Bf16>(dout, ids.size() * stride, stream);
    int bad = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      const bool valid = ids[t] >= 0 && ids[t] < vocab;
      for (int c = 0; c < dim; ++c) {
        const uint16_t want = valid ? table[ids[t] * size_t(dim) + c].bits : uint16_t{0};
        bad += out[t * stride + c].bits != want;
      }
    }
    EXPECT_EQ(bad, 0) << "vocab " << vocab << " dim " << dim;
  }
}

TEST(GpuHost, YarnTableFollowsDeepSeekV3) {
  const YarnTable t = make_yarn_table(YarnConfig{}, 64);
  // DeepSeek-V3: correction range [floor(10.47), ceil(22.5)] = [10, 23] of the 32 frequencies.
  auto extra = [](int i) { return std::pow(10000.0, -2.0 * i / 64.0); };
  EXPECT_FLOAT_EQ(t.inv_freq[0], 1.0f);
  EXPECT_NEAR(t.inv_freq[9], extra(9), 1e-6 * extra(9));         // below the ramp: unscaled
  EXPECT_NEAR(t.inv_freq[31], extra(31) / 40.0, 1e-6 * extra(31));  // above: divided by factor
  const double ramp = (16 - 10) / 13.0;  // inside: linear mix
  const double mid = extra(16) / 40.0 * ramp + extra(16) * (1.0 - ramp);
  EXPECT_NEAR(t.inv_freq[16], mid, 1e-5 * mid);
  EXPECT_FLOAT_EQ(t.mscale, 1.0f);  // mscale == mscale_all_dim
  YarnConfig plain;
  plain.factor = 1.0;
  EXPECT_NEAR(make_yarn_table(plain, 64).inv_freq[31], extra(31), 1e-6 * extra(31));
  EXPECT_THROW(make_yarn_table(YarnConfig{}, 63), Error);
}

struct RopeShape {
  int tokens, heads;
  int64_t token_stride, head_stride, offset;  // offset of the rope part inside a head
};

class RopeTest : public ::testing::TestWithParam<RopeShape> {};

TEST_P(RopeTest, MatchesReference) {
  HYMOE_REQUIRE_GPU();
  const RopeShape s = GetParam();
  auto rng = make_rng();
  Stream stream;
  const auto x = random_bf16(s.tokens * s.token_stride, rng);
  std::uniform_int_distribution<int> pos_dist(0, 65535);
  std::vector<int32_t> pos(s.tokens);
  for (auto& v : pos) v = pos_dist(rng);
  pos[0] = 0;
  auto dx = test::to_device(x, stream);
  auto dp = test::to_device(pos, stream);
  RopeParams p;
  p.x = dx.as<Bf16>() + s.offset;
  p.positions = dp.as<int32_t>();
  p.tokens = s.tokens;
  p.heads = s.heads;
  p.token_stride = s.token_stride;
  p.head_stride = s.head_stride;
  p.table = make_yarn_table(YarnConfig{}, 64);
  rope_yarn(p, stream);
  const auto out = test::to_host<Bf16>(dx, x.size(), stream);

  std::vector<double> ref(out.size());
  for (size_t i = 0; i < x.size(); ++i) ref[i] = x[i].to_float();  // untouched elements
  std::vector<size_t> all(out.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  double max_err = 0.0;
  for (int t = 0; t < s.tokens; ++t) {
    for (int h = 0; h < s.heads; ++h) {
      const int64_t base = t * s.token_stride + h * s.head_stride + s.offset;
      for (int i = 0; i < 32; ++i) {
        const double a = x[base + 2 * i].to_float(), b = x[base + 2 * i + 1].to_float();
        const float angle = static_cast<float>(pos[t]) * p.table.inv_freq[i];  // FP32 as HF
        const double c = std::cos(double{angle}), sn = std::sin(double{angle});
        const double o1 = a * c - b * sn, o2 = b * c + a * sn;
        // One BF16 rounding of a value bounded by |a| + |b|.
        const double tol = std::ldexp(std::fabs(a) + std::fabs(b), -8) + 1e-6;
        max_err = std::max({max_err, std::fabs(out[base + i].to_float() - o1) / tol,
                            std::fabs(out[base + 32 + i].to_float() - o2) / tol});
        ref[base + i] = out[base + i].to_float();  // checked above
        ref[base + 32 + i] = out[base + 32 + i].to_float();
      }
    }
  }
  EXPECT_LE(max_err, 1.0) << "rope: worst error in units of the tolerance";
  expect_bf16_close(out, ref, all, 0.0, "rope untouched");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeTest,
                         ::testing::Values(RopeShape{9, 128, 128 * 192, 192, 128},  // q_pe
                                           RopeShape{33, 1, 576, 576, 512},         // k_pe
                                           RopeShape{5, 3, 3 * 200, 200, 7}));

}  // namespace
}  // namespace hymoe::gpu
