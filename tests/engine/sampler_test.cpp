#include "hymoe/engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace hymoe {
namespace {

// A plain reference of the same rules: full sort, filter, then the id-ordered inverse CDF.
int32_t reference_sample(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed,
                         uint64_t step) {
  const size_t n = logits.size();
  if (p.greedy()) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  size_t m = n;
  if (p.top_k > 0) m = std::min<size_t>(m, static_cast<size_t>(p.top_k));
  const float mx = logits[ids[0]];
  std::vector<float> prob(n, 0.0f);
  double total = 0.0;
  for (size_t i = 0; i < m; ++i) {
    prob[ids[i]] = static_cast<float>(std::exp((static_cast<double>(logits[ids[i]]) - mx) / p.temperature));
    total += prob[ids[i]];
  }
  if (p.top_p < 1.0) {
    double cum = 0.0;
    size_t keep = 0;
    while (keep < m && cum < p.top_p * total) cum += prob[ids[keep++]];
    m = std::max<size_t>(keep, 1);
  }
  std::vector<int32_t> kept(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(m));
  if (p.min_p > 0.0) {
    float pmax = prob[kept[0]];
    std::erase_if(kept, [&](int32_t t) { return prob[t] < static_cast<float>(p.min_p) * pmax; });
  }
  std::sort(kept.begin(), kept.end());
  double mass = 0.0;
  for (int32_t t : kept) mass += prob[t];
  double target = sampling_uniform(seed, step) * mass, cum = 0.0;
  for (int32_t t : kept) {
    cum += prob[t];
    if (target < cum) return t;
  }
  return kept.back();
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s(5);
  SamplingParams p;
  p.temperature = 0.0;
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 2.0f, NAN};
  EXPECT_EQ(s.sample(l, p, {}, 1, 0).token, 1);
}

TEST(Sampler, MatchesReferenceOnRandomInputs) {
  std::mt19937_64 rng(2026);
  for (int iter = 0; iter < 300; ++iter) {
    const int32_t vocab = 1 + static_cast<int32_t>(rng() % 3000);
    std::normal_distribution<float> nd(0.0f, 1.0f + static_cast<float>(rng() % 5));
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& v : logits) v = nd(rng);
    SamplingParams p;
    p.temperature = 0.2 + static_cast<double>(rng() % 100) / 60.0;
    p.top_k = (rng() % 2) ? static_cast<int32_t>(rng() % 50) : 0;
    p.top_p = (rng() % 2) ? 0.05 + static_cast<double>(rng() % 95) / 100.0 : 1.0;
    p.min_p = (rng() % 3 == 0) ? static_cast<double>(rng() % 50) / 100.0 : 0.0;
    Sampler s(vocab);
    const uint64_t seed = rng(), step = rng() % 1000;
    EXPECT_EQ(s.sample(logits, p, {}, seed, step).token, reference_sample(logits, p, seed, step))
        << "iter " << iter << " vocab " << vocab;
  }
}

TEST(Sampler, FollowsTheDistribution) {
  // 4 tokens with probabilities 0.4 0.3 0.2 0.1 at temperature 1: frequencies over 40k draws.
  std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  Sampler s(4);
  SamplingParams p;
  std::vector<int> hits(4, 0);
  const int draws = 40000;
  for (int i = 0; i < draws; ++i) ++hits[static_cast<size_t>(s.sample(logits, p, {}, 99, static_cast<uint64_t>(i)).token)];
  const double expect[4] = {0.4, 0.3, 0.2, 0.1};
  for (int t = 0; t < 4; ++t) {
    double sd = std::sqrt(draws * expect[t] * (1 - expect[t]));
    EXPECT_NEAR(hits[static_cast<size_t>(t)], draws * expect[t], 5 * sd) << t;
  }
}

TEST(Sampler, TopKTopPMinPRestrictTheSet) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  Sampler s(4);
  auto seen = [&](SamplingParams p) {
    std::vector<bool> hit(4, false);
    for (uint64_t i = 0; i < 3000; ++i) hit[static_cast<size_t>(s.sample(logits, p, {}, 5, i).token)] = true;
    return hit;
  };
  SamplingParams k2;
  k2.top_k = 2;
  EXPECT_EQ(seen(k2), (std::vector<bool>{true, true, false, false}));
  SamplingParams p75;
  p75.top_p = 0.75;  // 0.5 + 0.3 reaches it
  EXPECT_EQ(seen(p75), (std::vector<bool>{true, true, false, false}));
  SamplingParams m;
  m.min_p = 0.25;  // keep p >= 0.125
  EXPECT_EQ(seen(m), (std::vector<bool>{true, true, true, false}));
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> logits(500);
  for (float& v : logits) v = nd(rng);
  Sampler s(500);
  SamplingParams p;
  std::vector<int32_t> a, b, c;
  for (uint64_t i = 0; i < 64; ++i) {
    a.push_back(s.sample(logits, p, {}, 42, i).token);
    b.push_back(s.sample(logits, p, {}, 42, i).token);
    c.push_back(s.sample(logits, p, {}, 43, i).token);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sampler, PenaltiesAndLogprobs) {
  std::vector<float> logits = {1.0f, 1.2f, 0.0f};
  Sampler s(3);
  SamplingParams p;
  p.temperature = 0.0;
  p.frequency_penalty = 0.15;  // token 1 generated twice: 1.2 - 0.3 = 0.9 < 1.0
  p.logprobs = true;
  p.top_logprobs = 2;
  std::vector<int32_t> gen = {1, 1};
  auto r = s.sample(logits, p, gen, 0, 2);
  EXPECT_EQ(r.token, 0);
  double norm = std::log(std::exp(1.0) + std::exp(1.2) + std::exp(0.0));
  EXPECT_NEAR(r.logprob, 1.0 - norm, 1e-6);  // raw distribution
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].first, 1);
  EXPECT_NEAR(r.top[0].second, 1.2 - norm, 1e-6);
  EXPECT_EQ(r.top[1].first, 0);
  // Presence penalty applies once per distinct token; counts reset between calls.
  SamplingParams q;
  q.temperature = 0.0;
  q.presence_penalty = 0.25;
  EXPECT_EQ(s.sample(logits, q, gen, 0, 2).token, 0);
  EXPECT_EQ(s.sample(logits, q, {}, 0, 0).token, 1);
}

TEST(Sampler, UniformIsInRangeAndSpread) {
  double sum = 0.0;
  for (uint64_t i = 0; i < 10000; ++i) {
    double u = sampling_uniform(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

}  // namespace
}  // namespace hymoe
