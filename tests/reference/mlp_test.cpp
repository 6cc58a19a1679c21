// SiLU-gated MLP and the MoE block against explicit computations.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "hymoe/common/numeric.h"
#include "linear.h"
#include "mlp.h"
#include "random_weights.h"
#include "test_util.h"

namespace hymoe::reference {
namespace {

using testing::nan_vector;
using testing::random_vector;
using testing::rel_error;

std::vector<double> textbook_mlp(const MlpWeights& w, const std::vector<float>& x) {
  auto W = [](const Fp8Matrix& m, int64_t i, int64_t j) {
    return double{fp8_e4m3_to_float(m.data[i * m.cols + j])} *
           m.scale_inv[(i / 128) * ((m.cols + 127) / 128) + j / 128];
  };
  std::vector<double> h(static_cast<size_t>(w.gate.rows));
  for (int64_t i = 0; i < w.gate.rows; ++i) {
    double g = 0.0, u = 0.0;
    for (int64_t j = 0; j < w.gate.cols; ++j) {
      g += W(w.gate, i, j) * x[j];
      u += W(w.up, i, j) * x[j];
    }
    h[i] = g / (1.0 + std::exp(-g)) * u;
  }
  std::vector<double> y(static_cast<size_t>(w.down.rows), 0.0);
  for (int64_t i = 0; i < w.down.rows; ++i) {
    for (int64_t j = 0; j < w.down.cols; ++j) y[i] += W(w.down, i, j) * h[j];
  }
  return y;
}

TEST(ReferenceMlp, DenseMlpMatchesTextbook) {
  const ModelConfig cfg = testing::tiny_test_config();
  testing::RandomWeights store(cfg, 51);
  std::mt19937_64 rng(52);
  const auto x = random_vector(256, rng);
  std::vector<float> y = nan_vector(256);
  mlp(*store.weights().layers[0].dense, x, y);
  EXPECT_LT(rel_error(y, textbook_mlp(*store.weights().layers[0].dense, x)), 1e-6);
}

TEST(ReferenceMlp, MoeIsRoutedWeightedSumPlusShared) {
  const ModelConfig cfg = testing::tiny_test_config();
  testing::RandomWeights store(cfg, 53);
  const MoeWeights& m = *store.weights().layers[2].moe;
  std::mt19937_64 rng(54);
  const RoutingParams rp = RoutingParams::from_config(cfg);
  std::set<int64_t> seen;
  for (int trial = 0; trial < 8; ++trial) {
    const auto x = random_vector(256, rng);
    // Router scores by hand: sigmoid of the BF16 router times x.
    std::vector<double> s(16), bias(16);
    for (int e = 0; e < 16; ++e) {
      double logit = 0.0;
      for (int j = 0; j < 256; ++j) {
        logit += double{bf16_to_float(static_cast<const uint16_t*>(m.router.data)[e * 256 + j])} * x[j];
      }
      s[e] = 1.0 / (1.0 + std::exp(-logit));
      bias[e] = static_cast<const float*>(m.router_bias.data)[e];
    }
    const auto picks = route_noaux_tc(s, bias, rp);
    std::vector<double> expect = textbook_mlp(*m.shared, x);
    for (const auto& c : picks) {
      const auto y = textbook_mlp(m.experts[static_cast<size_t>(c.expert)], x);
      for (size_t i = 0; i < y.size(); ++i) expect[i] += c.weight * y[i];
      seen.insert(c.expert);
    }
    std::vector<float> out = nan_vector(256);
    std::vector<ExpertChoice> chosen;
    moe(m, rp, x, out, &chosen);
    EXPECT_LT(rel_error(out, expect), 1e-6);
    ASSERT_EQ(chosen.size(), picks.size());
    for (size_t k = 0; k < picks.size(); ++k) EXPECT_EQ(chosen[k].expert, picks[k].expert);
  }
  EXPECT_GT(seen.size(), 4u);  // the random tokens really route to different experts
}

}  // namespace
}  // namespace hymoe::reference
