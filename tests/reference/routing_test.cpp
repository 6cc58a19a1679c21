// noaux_tc routing on hand-built scores (group limits, bias, ties) and properties on random ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "hymoe/common/error.h"
#include "routing.h"

namespace hymoe::reference {
namespace {

RoutingParams tiny_params() {
  RoutingParams p;
  p.n_experts = 16;
  p.n_group = 4;  // groups {0-3}, {4-7}, {8-11}, {12-15}
  p.topk_group = 2;
  p.top_k = 4;
  p.norm_topk_prob = true;
  p.routed_scaling_factor = 2.5;
  return p;
}

std::vector<int64_t> experts_of(const std::vector<ExpertChoice>& r) {
  std::vector<int64_t> e;
  for (const ExpertChoice& c : r) e.push_back(c.expert);
  return e;
}

TEST(ReferenceRouting, GroupScoreIsSumOfTopTwo) {
  // Group 0 has the single best expert (0.95) but a weak second: 0.95 + 0.10 = 1.05.
  // Group 1: 0.60 + 0.58 = 1.18.  Group 2: 0.55 + 0.54 = 1.09.  Group 3: 0.50 + 0.50 = 1.00.
  // By sum of top two, groups 1 and 2 are kept; the max rule would keep group 0.
  std::vector<double> s = {0.95, 0.10, 0.05, 0.02,   //
                           0.60, 0.58, 0.20, 0.01,   //
                           0.55, 0.54, 0.53, 0.03,   //
                           0.50, 0.50, 0.49, 0.48};
  std::vector<double> bias(16, 0.0);
  const auto r = route_noaux_tc(s, bias, tiny_params());
  EXPECT_EQ(experts_of(r), (std::vector<int64_t>{4, 5, 8, 9}));
  const double sum = 0.60 + 0.58 + 0.55 + 0.54;
  EXPECT_NEAR(r[0].weight, 0.60 / sum * 2.5, 1e-15);
  EXPECT_NEAR(r[3].weight, 0.54 / sum * 2.5, 1e-15);
  double total = 0.0;
  for (const auto& c : r) total += c.weight;
  EXPECT_NEAR(total, 2.5, 1e-12);
}

TEST(ReferenceRouting, BiasChoosesButScoresWeigh) {
  std::vector<double> s = {0.90, 0.80, 0.70, 0.60, 0.50, 0.40, 0.30, 0.20,
                           0.15, 0.14, 0.13, 0.12, 0.11, 0.10, 0.09, 0.08};
  std::vector<double> bias(16, 0.0);
  // Without bias: groups 0 (1.70) and 1 (0.90) kept; top 4 = 0, 1, 2, 3.
  EXPECT_EQ(experts_of(route_noaux_tc(s, bias, tiny_params())), (std::vector<int64_t>{0, 1, 2, 3}));
  // Bias lifts experts 12 and 13 (group 3: 0.11+1 + 0.10+1 = 2.21) and 14 a little.
  bias[12] = 1.0;
  bias[13] = 1.0;
  bias[14] = 0.5;
  const auto r = route_noaux_tc(s, bias, tiny_params());
  // Kept groups: 3 (2.21) and 0 (1.70). Choices: 12 (1.11), 13 (1.10), 0 (0.90), 1 (0.80).
  EXPECT_EQ(experts_of(r), (std::vector<int64_t>{12, 13, 0, 1}));
  // Weights come from the unbiased scores.
  const double sum = 0.11 + 0.10 + 0.90 + 0.80;
  EXPECT_NEAR(r[0].weight, 0.11 / sum * 2.5, 1e-15);
  EXPECT_NEAR(r[2].weight, 0.90 / sum * 2.5, 1e-15);
}

TEST(ReferenceRouting, DroppedGroupsAreNeverChosen) {
  // Group limits decide before expert choices; near-zero and negative choices (bias < -score)
  // must not let experts of dropped groups in (HF's 0.0 fill would, in the second case).
  std::vector<double> s(16, 0.5);
  std::vector<double> bias(16, -0.9);  // every choice -0.4 ...
  bias[15] = 0.0;                      // ... except 15: 0.5; group 3 = 0.5 + -0.4 = 0.1
  for (int e = 0; e < 12; ++e) bias[e] = -0.6 + 0.01 * e;  // groups 0-2 in (-0.1, 0.02]
  // Group sums of the top two: g0 = -0.08 + -0.07 = -0.15, g1 = -0.04 + -0.03 = -0.07,
  // g2 = 0.00 + 0.01 = 0.01, g3 = 0.5 + -0.4 = 0.10 -> kept: 3 and 2.
  auto r = route_noaux_tc(s, bias, tiny_params());
  EXPECT_EQ(experts_of(r), (std::vector<int64_t>{15, 11, 10, 9}));
  // Now make group 3's pair weak: it is dropped and 15 can not be chosen.
  bias[14] = -2.0;
  bias[13] = -2.0;
  bias[12] = -2.0;
  bias[15] = 0.3;  // choice 0.8, but group 3 = 0.8 + -1.5 = -0.7 is the worst
  r = route_noaux_tc(s, bias, tiny_params());
  EXPECT_EQ(experts_of(r), (std::vector<int64_t>{11, 10, 9, 8}));
  for (const auto& c : r) EXPECT_NEAR(c.weight, 2.5 / 4, 1e-15);
}

TEST(ReferenceRouting, TiesGoToTheLowerIndex) {
  std::vector<double> s(16, 0.3);  // every group ties, every expert ties
  std::vector<double> bias(16, 0.0);
  EXPECT_EQ(experts_of(route_noaux_tc(s, bias, tiny_params())), (std::vector<int64_t>{0, 1, 2, 3}));
  // Groups 1 and 3 tie above the others; within them experts 5 and 13 tie for the best.
  s[5] = s[13] = 0.9;
  s[6] = s[14] = 0.8;
  const auto r = route_noaux_tc(s, bias, tiny_params());
  EXPECT_EQ(experts_of(r), (std::vector<int64_t>{5, 13, 6, 14}));
}

TEST(ReferenceRouting, WithoutNormalisationWeightsAreScaledScores) {
  RoutingParams p = tiny_params();
  p.norm_topk_prob = false;
  std::vector<double> s = {0.9, 0.8, 0.1, 0.1, 0.7, 0.6, 0.1, 0.1,
                           0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1};
  std::vector<double> bias(16, 0.0);
  const auto r = route_noaux_tc(s, bias, p);
  ASSERT_EQ(experts_of(r), (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_NEAR(r[0].weight, 0.9 * 2.5, 1e-15);
  EXPECT_NEAR(r[3].weight, 0.6 * 2.5, 1e-15);
}

TEST(ReferenceRouting, SingleGroupIsPlainTopK) {  // Kimi-K2: n_group 1
  RoutingParams p = tiny_params();
  p.n_group = 1;
  p.topk_group = 1;
  p.top_k = 3;
  std::vector<double> s = {0.1, 0.2, 0.9, 0.3, 0.8, 0.1, 0.1, 0.1,
                           0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.7};
  std::vector<double> bias(16, 0.0);
  EXPECT_EQ(experts_of(route_noaux_tc(s, bias, p)), (std::vector<int64_t>{2, 4, 15}));
}

TEST(ReferenceRouting, RandomScoresSatisfyTheDefinition) {
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> u(0.0, 1.0), b(-0.2, 0.2);
  RoutingParams p;
  p.n_experts = 64;
  p.n_group = 8;
  p.topk_group = 3;
  p.top_k = 6;
  p.routed_scaling_factor = 2.827;
  const int64_t per = 8;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> s(64), bias(64), choice(64);
    for (int e = 0; e < 64; ++e) {
      s[e] = u(rng);
      bias[e] = b(rng);
      choice[e] = s[e] + bias[e];
    }
    const auto r = route_noaux_tc(s, bias, p);
    ASSERT_EQ(r.size(), 6u);
    // Group scores by brute force over all pairs.
    std::vector<double> gs(8, -1e9);
    for (int g = 0; g < 8; ++g) {
      for (int a = 0; a < per; ++a) {
        for (int c = a + 1; c < per; ++c) gs[g] = std::max(gs[g], choice[g * per + a] + choice[g * per + c]);
      }
    }
    std::set<int64_t> chosen_groups, chosen;
    double wsum = 0.0;
    for (const auto& c : r) {
      chosen_groups.insert(c.expert / per);
      chosen.insert(c.expert);
      wsum += c.weight;
    }
    EXPECT_NEAR(wsum, 2.827, 1e-12);
    // A chosen expert's group ranks in the top 3 of group scores.
    for (int64_t g : chosen_groups) {
      int better = 0;
      for (int h = 0; h < 8; ++h) better += gs[h] > gs[g];
      EXPECT_LT(better, 3);
    }
    // No unchosen expert of a kept group beats a chosen one. The kept groups are the 3 best.
    std::vector<int> order(8);
    for (int g = 0; g < 8; ++g) order[g] = g;
    std::stable_sort(order.begin(), order.end(), [&](int a, int c) { return gs[a] > gs[c]; });
    double worst_chosen = 1e9;
    for (int64_t e : chosen) worst_chosen = std::min(worst_chosen, choice[e]);
    for (int k = 0; k < 3; ++k) {
      for (int e = order[k] * per; e < (order[k] + 1) * per; ++e) {
        if (!chosen.count(e)) {
          EXPECT_LE(choice[e], worst_chosen);
        }
      }
    }
  }
}

TEST(ReferenceRouting, BadParametersAreErrors) {
  std::vector<double> s(16, 0.5), bias(16, 0.0);
  RoutingParams p = tiny_params();
  p.n_group = 3;
  EXPECT_THROW(route_noaux_tc(s, bias, p), Error);
  p = tiny_params();
  p.top_k = 9;  // 2 kept groups hold only 8 experts
  EXPECT_THROW(route_noaux_tc(s, bias, p), Error);
  p = tiny_params();
  std::vector<double> short_bias(15, 0.0);
  EXPECT_THROW(route_noaux_tc(s, short_bias, p), Error);
}

}  // namespace
}  // namespace hymoe::reference
