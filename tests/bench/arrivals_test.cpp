// Arrival generator statistics with fixed seeds: mean gap 1/rate, coefficient of variation
// 1/sqrt(burstiness) (gamma), last arrival exactly n/rate, determinism per seed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "arrivals.h"
#include "hymoe/common/error.h"

namespace hymoe::bench {
namespace {

struct GapStats {
  double mean, cv;
};

GapStats gap_stats(const std::vector<double>& t) {
  std::vector<double> g;
  double prev = 0;
  for (double x : t) g.push_back(x - prev), prev = x;
  double sum = 0, sq = 0;
  for (double x : g) sum += x;
  const double mean = sum / static_cast<double>(g.size());
  for (double x : g) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / static_cast<double>(g.size())) / mean};
}

TEST(Arrivals, InfiniteRateSendsEverythingAtZero) {
  const auto t = generate_arrivals(5, {std::numeric_limits<double>::infinity(), 1.0, 1});
  EXPECT_EQ(t, std::vector<double>(5, 0.0));
}

TEST(Arrivals, InfiniteBurstinessIsEvenlySpaced) {
  const auto t = generate_arrivals(4, {2.0, std::numeric_limits<double>::infinity(), 1});
  ASSERT_EQ(t.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(t[i], 0.5 * (i + 1), 1e-12);
}

class GammaArrivals : public ::testing::TestWithParam<double> {};

TEST_P(GammaArrivals, MeanGapAndVariationMatchTheGamma) {
  const double burstiness = GetParam();
  const int n = 40000;
  const double rate = 8.0;
  const auto t = generate_arrivals(n, {rate, burstiness, 12345});
  ASSERT_EQ(t.size(), static_cast<std::size_t>(n));
  for (int i = 1; i < n; ++i) ASSERT_GE(t[i], t[i - 1]);
  EXPECT_NEAR(t.back(), n / rate, 1e-9);  // rescaled like vLLM
  const auto s = gap_stats(t);
  EXPECT_NEAR(s.mean, 1 / rate, 1e-9);
  // CV of Gamma(k) is 1/sqrt(k); with 40000 samples its estimate is within a few percent.
  const double cv = 1 / std::sqrt(burstiness);
  EXPECT_NEAR(s.cv, cv, 0.05 * cv) << "burstiness " << burstiness;
}

INSTANTIATE_TEST_SUITE_P(Burstiness, GammaArrivals, ::testing::Values(0.25, 0.5, 1.0, 2.0, 4.0));

TEST(Arrivals, PoissonCountsPerWindowHaveVarianceEqualToMean) {
  const auto t = generate_arrivals(50000, {20.0, 1.0, 99});
  const int windows = static_cast<int>(t.back());  // one-second windows, mean 20 each
  std::vector<int> count(static_cast<std::size_t>(windows), 0);
  for (double x : t)
    if (x < windows) ++count[static_cast<std::size_t>(x)];
  double sum = 0, sq = 0;
  for (int c : count) sum += c;
  const double mean = sum / windows;
  for (int c : count) sq += (c - mean) * (c - mean);
  const double var = sq / windows;
  EXPECT_NEAR(mean, 20, 0.2);
  EXPECT_NEAR(var / mean, 1.0, 0.1);  // index of dispersion of a Poisson process
}

TEST(Arrivals, SeedDecidesTheSequence) {
  const auto a = generate_arrivals(100, {5.0, 1.0, 1});
  EXPECT_EQ(a, generate_arrivals(100, {5.0, 1.0, 1}));
  const auto b = generate_arrivals(100, {5.0, 1.0, 2});
  int same = 0;
  for (int i = 0; i < 99; ++i) same += a[i] == b[i];
  EXPECT_EQ(same, 0);
}

TEST(Arrivals, RejectsBadSettings) {
  EXPECT_THROW(generate_arrivals(3, {0.0, 1.0, 0}), Error);
  EXPECT_THROW(generate_arrivals(3, {-1.0, 1.0, 0}), Error);
  EXPECT_THROW(generate_arrivals(3, {1.0, 0.0, 0}), Error);
  EXPECT_TRUE(generate_arrivals(0, {1.0, 1.0, 0}).empty());
}

}  // namespace
}  // namespace hymoe::bench
