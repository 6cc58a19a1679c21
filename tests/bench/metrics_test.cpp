// Metric arithmetic on hand-computed cases (numpy semantics: linear percentiles, population std).
#include <gtest/gtest.h>

#include "hymoe/common/error.h"
#include "metrics.h"

namespace hymoe::bench {
namespace {

TEST(Percentile, MatchesNumpyLinearInterpolation) {
  const std::vector<double> v = {4, 1, 3, 2};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({7}, 90), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
}

TEST(Summarize, MeanMedianPopulationStdInMilliseconds) {
  const auto s = summarize({0.001, 0.002, 0.003, 0.004}, {50, 90});
  EXPECT_NEAR(s.mean_ms, 2.5, 1e-12);
  EXPECT_NEAR(s.median_ms, 2.5, 1e-12);
  EXPECT_NEAR(s.std_ms, std::sqrt(1.25), 1e-12);
  ASSERT_EQ(s.percentiles_ms.size(), 2u);
  EXPECT_EQ(s.percentiles_ms[1].first, 90);
  EXPECT_NEAR(s.percentiles_ms[1].second, 3.7, 1e-12);
  const auto empty = summarize({}, {99});
  EXPECT_EQ(empty.mean_ms, 0);
  EXPECT_EQ(empty.percentiles_ms[0].second, 0);
}

// A: start 0, ttft 0.05, 11 tokens 0.1 apart -> latency 1.05, tpot 0.1.
// B: start 0.5, ttft 0.3, 5 tokens 0.15 apart -> latency 0.9, tpot 0.15. C: failed.
std::vector<RequestOutput> hand_case() {
  RequestOutput a, b, c;
  a.success = true, a.start_time = 0, a.ttft = 0.05, a.latency = 1.05, a.output_tokens = 11;
  a.itl.assign(10, 0.1), a.prompt_len = 100;
  b.success = true, b.start_time = 0.5, b.ttft = 0.3, b.latency = 0.9, b.output_tokens = 5;
  b.itl.assign(4, 0.15), b.prompt_len = 50;
  c.success = false, c.error = "HTTP 500", c.prompt_len = 70, c.start_time = 0.2;
  return {a, b, c};
}

TEST(CalculateMetrics, HandComputedCase) {
  const auto m = calculate_metrics(hand_case(), 2.0, {50, 99}, {});
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 150);  // failures do not count
  EXPECT_EQ(m.total_output, 16);
  EXPECT_EQ(m.actual_output_lens, (std::vector<int>{11, 5, 0}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 8.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 83.0);
  EXPECT_NEAR(m.ttft.mean_ms, 175, 1e-9);
  EXPECT_NEAR(m.ttft.std_ms, 125, 1e-9);
  EXPECT_NEAR(m.tpot.mean_ms, 125, 1e-9);
  EXPECT_NEAR(m.tpot.median_ms, 125, 1e-9);
  EXPECT_NEAR(m.itl.mean_ms, 1600.0 / 14, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 100, 1e-9);
  EXPECT_NEAR(m.e2el.mean_ms, 975, 1e-9);
  EXPECT_NEAR(m.e2el.percentiles_ms[1].second, 900 + 150 * 0.99, 1e-9);
  EXPECT_EQ(m.max_concurrent_requests, 2);
  // Second 0 holds A's tokens at 0.05..0.95 (10) and B's at 0.8, 0.95 (2).
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 12);
  EXPECT_EQ(m.request_goodput, 0);  // no SLO given
}

TEST(CalculateMetrics, GoodputCountsRequestsMeetingEverySlo) {
  const auto outs = hand_case();
  EXPECT_DOUBLE_EQ(calculate_metrics(outs, 2.0, {99}, parse_goodput({"ttft:100"})).request_goodput,
                   0.5);
  EXPECT_DOUBLE_EQ(calculate_metrics(outs, 2.0, {99}, parse_goodput({"ttft:400"})).request_goodput,
                   1.0);
  EXPECT_DOUBLE_EQ(
      calculate_metrics(outs, 2.0, {99}, parse_goodput({"ttft:400", "tpot:120"})).request_goodput,
      0.5);
  EXPECT_DOUBLE_EQ(calculate_metrics(outs, 2.0, {99}, parse_goodput({"e2el:1000"})).request_goodput,
                   0.5);
}

TEST(CalculateMetrics, SingleTokenRequestHasNoTpotButIsGood) {
  RequestOutput o;
  o.success = true, o.ttft = 0.2, o.latency = 0.2, o.output_tokens = 1, o.prompt_len = 3;
  const auto m = calculate_metrics({o}, 1.0, {99}, parse_goodput({"tpot:1"}));
  EXPECT_EQ(m.tpot.mean_ms, 0);
  EXPECT_DOUBLE_EQ(m.request_goodput, 1.0);
  EXPECT_EQ(request_tpot(o), 0);
}

TEST(ParseGoodput, RejectsBadPairs) {
  const auto slo = parse_goodput({"ttft:300.5", "tpot:50", "e2el:0"});
  EXPECT_EQ(*slo.ttft_ms, 300.5);
  EXPECT_EQ(*slo.tpot_ms, 50);
  EXPECT_EQ(*slo.e2el_ms, 0);
  EXPECT_THROW(parse_goodput({"ttft"}), Error);
  EXPECT_THROW(parse_goodput({"ttft:abc"}), Error);
  EXPECT_THROW(parse_goodput({"itl:5"}), Error);
  EXPECT_THROW(parse_goodput({"ttft:-1"}), Error);
  EXPECT_THROW(calculate_metrics({}, 0.0, {99}, {}), Error);
}

}  // namespace
}  // namespace hymoe::bench
