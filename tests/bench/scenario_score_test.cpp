// score_scenario on synthetic request records with fresh random times: the ratios against the
// solo baselines, and a mixed scenario's wall time against the same requests one after the
// other (a x solo 1P E2E + b x solo 1D E2E), in the struct, the JSON and the printed table.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "metrics.h"
#include "scenarios.h"
#include "../test_seed.h"
#include "synthetic_requests.h"

namespace hymoe::bench {
namespace {

class ScenarioScore : public ::testing::Test {
 protected:
  void SetUp() override {
    gen_.seed(static_cast<uint32_t>(hymoe::test::test_seed()));
  }

  double uniform(double lo, double hi) { return gen_.uniform(lo, hi); }
  RequestOutput stream(double start, double ttft, int tokens, double gap_lo, double gap_hi) {
    return gen_.stream(start, ttft, tokens, gap_lo, gap_hi);
  }

  RequestOutput prefill(double start) {
    return stream(start, uniform(0.8, 2.0), 1 + static_cast<int>(uniform(0, 3)), 0.02, 0.05);
  }
  RequestOutput decode(double start) {
    return stream(start, uniform(0.02, 0.1), 40 + static_cast<int>(uniform(0, 40)), 0.01, 0.06);
  }

  // A scenario of a prefills and b decodes: decodes start first, prefills a little later.
  ScenarioResult scenario(int a, int b) {
    ScenarioResult r;
    r.spec = {(a ? fmt::format("{}P", a) : "") + (a && b ? "+" : "") +
                  (b ? fmt::format("{}D", b) : ""),
              a, b};
    for (int i = 0; i < b; ++i) {
      r.requests.push_back({'D', i, decode(uniform(0.0, 0.05)), 0, {}, {}, {}});
    }
    for (int i = 0; i < a; ++i) {
      r.requests.push_back({'P', i, prefill(uniform(0.2, 0.4)), 0, {}, {}, {}});
    }
    return r;
  }

  test::SyntheticRequests gen_;
};

// Wall time by its definition: first start to last end.
double wall_of(const ScenarioResult& r) {
  double lo = 1e300, hi = -1e300;
  for (const auto& q : r.requests) {
    lo = std::min(lo, q.output.start_time);
    hi = std::max(hi, q.output.start_time + q.output.latency);
  }
  return hi - lo;
}

TEST_F(ScenarioScore, MixedWallTimeAgainstTheSoloSum) {
  SoloBaselines solo;
  ScenarioResult p1 = scenario(1, 0), d1 = scenario(0, 1);
  score_scenario(p1, solo);
  score_scenario(d1, solo);
  const double p_e2e = p1.requests[0].output.latency, d_e2e = d1.requests[0].output.latency;
  ASSERT_TRUE(solo.p_e2e_s && solo.d_e2e_s);
  EXPECT_DOUBLE_EQ(*solo.p_e2e_s, p_e2e);
  EXPECT_DOUBLE_EQ(*solo.d_e2e_s, d_e2e);
  EXPECT_DOUBLE_EQ(*solo.p_ttft_s, p1.requests[0].output.ttft);
  EXPECT_DOUBLE_EQ(*solo.d_tpot_s, request_tpot(d1.requests[0].output));
  // Solo runs: their wall time is their one request; no sequential comparison.
  ASSERT_TRUE(p1.wall_s && d1.wall_s);
  EXPECT_NEAR(*p1.wall_s, p_e2e, 1e-12);
  EXPECT_NEAR(*d1.wall_s, d_e2e, 1e-12);
  EXPECT_FALSE(p1.sequential_s);
  EXPECT_FALSE(d1.wall_over_sequential);
  EXPECT_NEAR(*p1.requests[0].ttft_ratio, 1.0, 1e-12);

  for (const auto& [a, b] : {std::pair{1, 1}, {0, 2}, {1, 2}, {2, 3}, {3, 0}}) {
    ScenarioResult m = scenario(a, b);
    score_scenario(m, solo);
    const double seq = a * p_e2e + b * d_e2e, wall = wall_of(m);
    ASSERT_TRUE(m.wall_s && m.sequential_s && m.wall_over_sequential) << m.spec.name;
    EXPECT_NEAR(*m.wall_s, wall, 1e-12) << m.spec.name;
    EXPECT_NEAR(*m.sequential_s, seq, 1e-12) << m.spec.name;
    EXPECT_NEAR(*m.wall_over_sequential, wall / seq, 1e-12) << m.spec.name;
    // The baselines stay those of the first solo runs.
    EXPECT_DOUBLE_EQ(*solo.p_e2e_s, p_e2e);

    // The other ratios, by their definitions.
    for (const auto& q : m.requests) {
      if (q.role == 'P') {
        EXPECT_NEAR(*q.ttft_ratio, q.output.ttft / *solo.p_ttft_s, 1e-12);
        continue;
      }
      EXPECT_NEAR(q.tpot_s, request_tpot(q.output), 1e-15);
      EXPECT_EQ(q.tpot_in_prefill_s.has_value(), a > 0);
      EXPECT_NEAR(*q.tpot_ratio, q.tpot_in_prefill_s.value_or(q.tpot_s) / *solo.d_tpot_s, 1e-12);
    }

    const auto j = scenario_json(m);
    EXPECT_NEAR(j["wall_ms"].get<double>(), wall * 1000, 1e-9);
    EXPECT_NEAR(j["sequential_ms"].get<double>(), seq * 1000, 1e-9);
    EXPECT_NEAR(j["wall_over_sequential"].get<double>(), wall / seq, 1e-12);

    const std::string table = format_scenarios({p1, d1, m});
    EXPECT_NE(table.find("Total latency against one after the other"), std::string::npos);
    const std::string row = fmt::format("{:<8} {:>12} {:>22} {:>12}", m.spec.name,
                                        fmt::format("{:.1f}", wall * 1000),
                                        fmt::format("{:.1f}", seq * 1000),
                                        fmt::format("{:.3f}", wall / seq));
    EXPECT_NE(table.find(row), std::string::npos) << row << "\n" << table;
  }
}

TEST_F(ScenarioScore, NoSumWithoutItsBaselinesAndNoWallWithAFailure) {
  // 2D before any 1D: nothing to add up.
  SoloBaselines solo;
  ScenarioResult early = scenario(0, 2);
  score_scenario(early, solo);
  ASSERT_TRUE(early.wall_s);
  EXPECT_NEAR(*early.wall_s, wall_of(early), 1e-12);
  EXPECT_FALSE(early.sequential_s);
  EXPECT_FALSE(early.wall_over_sequential);
  EXPECT_FALSE(early.decode_tpot_ratio);
  EXPECT_TRUE(scenario_json(early)["sequential_ms"].is_null());

  // A failed 1P sets no baseline: 1P+1D then has a D baseline but no P one.
  ScenarioResult p1 = scenario(1, 0), d1 = scenario(0, 1);
  p1.requests[0].output.success = false;
  p1.requests[0].output.error = "HTTP 500: boom";
  score_scenario(p1, solo);
  score_scenario(d1, solo);
  EXPECT_FALSE(solo.p_e2e_s);
  EXPECT_FALSE(p1.wall_s);
  ScenarioResult m = scenario(1, 1);
  score_scenario(m, solo);
  EXPECT_FALSE(m.sequential_s);
  const std::string table = format_scenarios({p1, d1, early, m});
  EXPECT_NE(table.find(fmt::format("{:<8} {:>12} {:>22} {:>12}", "1P+1D",
                                   fmt::format("{:.1f}", *m.wall_s * 1000), "-", "-")),
            std::string::npos)
      << table;

  // A failed request in a mixed scenario: it has no end, so no wall time and no ratio.
  SoloBaselines ok;
  ScenarioResult p2 = scenario(1, 0), d2 = scenario(0, 1);
  score_scenario(p2, ok);
  score_scenario(d2, ok);
  ScenarioResult broken = scenario(1, 2);
  broken.requests[1].output.success = false;
  score_scenario(broken, ok);
  ASSERT_TRUE(broken.sequential_s);
  EXPECT_NEAR(*broken.sequential_s,
              p2.requests[0].output.latency + 2 * d2.requests[0].output.latency, 1e-12);
  EXPECT_FALSE(broken.wall_s);
  EXPECT_FALSE(broken.wall_over_sequential);
  EXPECT_FALSE(broken.requests[1].tpot_ratio);
  EXPECT_TRUE(broken.requests[0].tpot_ratio);
}

}  // namespace
}  // namespace hymoe::bench
