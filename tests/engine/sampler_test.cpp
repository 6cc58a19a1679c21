#include "hymoe/engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
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

// Fresh random logits; the seed goes into the failure messages.
std::vector<float> random_logits(std::mt19937_64& rng, size_t n, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> l(n);
  for (float& v : l) v = nd(rng);
  return l;
}

TEST(SamplerLogitBias, PlusHundredForcesTheTokenGreedyAndSampled) {
  const uint64_t seed = 4501;
  std::mt19937_64 rng(seed);
  const auto logits = random_logits(rng, 2000, 3.0f);
  Sampler s(2000);
  for (double temperature : {0.0, 0.7, 1.0, 2.0}) {
    SamplingParams p;
    p.temperature = temperature;
    p.logit_bias = {{1234, 100.0f}};
    for (uint64_t step = 0; step < 200; ++step) {
      EXPECT_EQ(s.sample(logits, p, {}, seed, step).token, 1234) << "seed " << seed << " T " << temperature;
    }
  }
}

TEST(SamplerLogitBias, MinusHundredBansTheTopToken) {
  const uint64_t seed = 4502;
  std::mt19937_64 rng(seed);
  auto logits = random_logits(rng, 500, 1.0f);
  logits[77] = 30.0f;  // the clear favourite: sampling would pick it almost always
  Sampler s(500);
  SamplingParams g;
  g.temperature = 0.0;
  EXPECT_EQ(s.sample(logits, g, {}, seed, 0).token, 77);
  g.logit_bias = {{77, -100.0f}};
  auto without = logits;
  without[77] = -1e30f;  // greedy then takes the runner-up
  EXPECT_EQ(s.sample(logits, g, {}, seed, 0).token,
            static_cast<int32_t>(std::max_element(without.begin(), without.end()) - without.begin()))
      << "seed " << seed;
  SamplingParams q;
  q.logit_bias = {{77, -100.0f}};
  for (uint64_t step = 0; step < 2000; ++step) {
    ASSERT_NE(s.sample(logits, q, {}, seed, step).token, 77) << "seed " << seed << " step " << step;
  }
}

TEST(SamplerLogitBias, SeveralTokensMatchTheReferenceOnBiasedLogits) {
  const uint64_t seed = 4503;
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 200; ++iter) {
    const size_t vocab = 2 + rng() % 3000;
    const auto logits = random_logits(rng, vocab, 1.0f + static_cast<float>(rng() % 4));
    SamplingParams p;
    p.temperature = (rng() % 4 == 0) ? 0.0 : 0.2 + static_cast<double>(rng() % 100) / 60.0;
    p.top_k = (rng() % 2) ? static_cast<int32_t>(rng() % 50) : 0;
    p.top_p = (rng() % 2) ? 0.05 + static_cast<double>(rng() % 95) / 100.0 : 1.0;
    p.min_p = (rng() % 3 == 0) ? static_cast<double>(rng() % 50) / 100.0 : 0.0;
    // Up to 8 distinct ids with biases anywhere in [-100, 100], sorted as the server sends them.
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    ids.resize(std::min<size_t>(vocab, 1 + rng() % 8));
    std::sort(ids.begin(), ids.end());
    auto biased = logits;
    for (int32_t t : ids) {
      const float b = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 10.0f;
      p.logit_bias.emplace_back(t, b);
      biased[static_cast<size_t>(t)] += b;
    }
    Sampler s(static_cast<int32_t>(vocab));
    const uint64_t draw_seed = rng(), step = rng() % 1000;
    SamplingParams plain = p;
    plain.logit_bias.clear();
    EXPECT_EQ(s.sample(logits, p, {}, draw_seed, step).token, reference_sample(biased, plain, draw_seed, step))
        << "seed " << seed << " iter " << iter << " vocab " << vocab;
  }
}

TEST(SamplerLogitBias, NoBiasIsBitwiseUnchangedAndLogprobsAreBiased) {
  const uint64_t seed = 4504;
  std::mt19937_64 rng(seed);
  const auto logits = random_logits(rng, 1000, 2.0f);
  Sampler s(1000);
  SamplingParams p;
  p.temperature = 0.8;
  p.logprobs = true;
  p.top_logprobs = 5;
  // An empty bias and a bias of 0 on a token give exactly the same token, logprob and top list.
  SamplingParams zero = p;
  zero.logit_bias = {{3, 0.0f}};
  for (uint64_t step = 0; step < 100; ++step) {
    const auto a = s.sample(logits, p, {}, seed, step);
    const auto b = s.sample(logits, zero, {}, seed, step);
    ASSERT_EQ(a.token, b.token) << "seed " << seed;
    ASSERT_EQ(std::bit_cast<uint32_t>(a.logprob), std::bit_cast<uint32_t>(b.logprob)) << "seed " << seed;
    ASSERT_EQ(a.top.size(), b.top.size());
    for (size_t i = 0; i < a.top.size(); ++i) {
      ASSERT_EQ(a.top[i].first, b.top[i].first);
      ASSERT_EQ(std::bit_cast<uint32_t>(a.top[i].second), std::bit_cast<uint32_t>(b.top[i].second));
    }
  }
  // With a bias the log-probabilities are log_softmax(logits + bias): the forced token's is ~0
  // and it heads the alternatives.
  SamplingParams forced = p;
  forced.logit_bias = {{10, 100.0f}, {20, -100.0f}};
  auto biased = logits;
  biased[10] += 100.0f;
  biased[20] -= 100.0f;
  double mx = *std::max_element(biased.begin(), biased.end()), sum = 0.0;
  for (float v : biased) sum += std::exp(static_cast<double>(v) - mx);
  const double norm = mx + std::log(sum);
  const auto r = s.sample(logits, forced, {}, seed, 0);
  EXPECT_EQ(r.token, 10);
  EXPECT_NEAR(r.logprob, static_cast<double>(biased[10]) - norm, 1e-6);
  EXPECT_NEAR(r.logprob, 0.0, 1e-6);
  ASSERT_EQ(r.top.size(), 5u);
  EXPECT_EQ(r.top[0].first, 10);
  for (const auto& [t, lp] : r.top) {
    EXPECT_NE(t, 20);
    EXPECT_NEAR(lp, static_cast<double>(biased[static_cast<size_t>(t)]) - norm, 1e-5) << t;
  }
}

TEST(SamplerLogitBias, IdsOutsideTheVocabularyAreSkipped) {
  std::vector<float> logits = {0.0f, 1.0f, 0.5f};
  Sampler s(3);
  SamplingParams p;
  p.temperature = 0.0;
  p.logit_bias = {{-1, 100.0f}, {0, 50.0f}, {3, 100.0f}};
  EXPECT_EQ(s.sample(logits, p, {}, 0, 0).token, 0);
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
