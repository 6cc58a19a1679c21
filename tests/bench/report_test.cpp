// Result JSON field names (vLLM's schema), file naming, text report, SVG output, scenario math.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "charts.h"
#include "hymoe/common/error.h"
#include "result_json.h"
#include "scenarios.h"
#include "svg.h"

namespace hymoe::bench {
namespace {

std::vector<RequestOutput> two_requests() {
  RequestOutput a, b;
  a.success = true, a.start_time = 0.1, a.ttft = 0.2, a.latency = 0.5, a.output_tokens = 4;
  a.itl = {0.1, 0.1, 0.1}, a.prompt_len = 10, a.generated_text = "abcd";
  b.success = false, b.error = "HTTP 500: boom", b.prompt_len = 12, b.start_time = 0.3;
  return {a, b};
}

TEST(PyFloat, MatchesPythonStr) {
  EXPECT_EQ(py_float(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(py_float(10), "10.0");
  EXPECT_EQ(py_float(2.5), "2.5");
  EXPECT_EQ(percentile_word(99), "99");
  EXPECT_EQ(percentile_word(99.9), "99.9");
}

TEST(ResultJson, VllmFieldNames) {
  RunSettings s;
  s.date = "20261129-101500";
  s.model_id = "org/model-x";
  s.num_prompts = 2;
  s.request_rate = std::numeric_limits<double>::infinity();
  s.percentile_metrics = {"ttft", "tpot", "itl", "e2el"};
  s.percentiles = {50, 99.9};
  s.goodput = parse_goodput({"ttft:300"});
  const auto outs = two_requests();
  const auto m = calculate_metrics(outs, 1.0, s.percentiles, s.goodput);
  auto r = build_result_json(s, m, outs, 1.0);
  for (const char* k :
       {"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
        "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
        "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
        "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
        "max_concurrent_requests", "latencies", "queue_times", "mean_ttft_ms", "median_ttft_ms",
        "std_ttft_ms", "p50_ttft_ms", "p99.9_ttft_ms", "mean_tpot_ms", "p99.9_tpot_ms",
        "mean_itl_ms", "p50_itl_ms", "mean_e2el_ms", "p99.9_e2el_ms"})
    EXPECT_TRUE(r.contains(k)) << k;
  EXPECT_EQ(r["request_rate"], "inf");
  EXPECT_TRUE(r["max_concurrency"].is_null());
  EXPECT_EQ(r["completed"], 1);
  EXPECT_EQ(r["failed"], 1);
  EXPECT_DOUBLE_EQ(r["request_goodput"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(r["mean_ttft_ms"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(r["mean_tpot_ms"].get<double>(), 100);
  EXPECT_EQ(r["error_counts"]["HTTP 500: boom"], 1);
  EXPECT_FALSE(r.contains("ttfts"));  // per-request arrays only with --save-detailed
  EXPECT_FALSE(r.contains("client_queue_time"));

  s.save_detailed = true;
  s.max_concurrency = 4;
  s.percentile_metrics.push_back("client_queue_time");
  r = build_result_json(s, m, outs, 1.0);
  EXPECT_EQ(r["errors"][1], "HTTP 500: boom");
  EXPECT_EQ(r["output_lens"], nlohmann::json::array({4, 0}));
  EXPECT_EQ(r["itls"][0].size(), 3u);
  EXPECT_EQ(r["generated_texts"][0], "abcd");
  EXPECT_EQ(r["max_concurrency"], 4);
  EXPECT_TRUE(r.contains("mean_client_queue_time_ms"));

  const std::string text = format_report(s, r);
  EXPECT_NE(text.find("============ Serving Benchmark Result ============"), std::string::npos);
  EXPECT_NE(text.find("Successful requests:                     1"), std::string::npos);
  EXPECT_NE(text.find("P99.9 TTFT (ms):"), std::string::npos);
  EXPECT_NE(text.find("Request goodput (req/s):"), std::string::npos);
}

TEST(ResultPath, VllmNaming) {
  RunSettings s;
  s.date = "20261129-101500";
  s.model_id = "deepseek-ai/DeepSeek-V3";
  s.request_rate = std::numeric_limits<double>::infinity();
  EXPECT_EQ(result_path(s, "", ""), "openai-infqps-DeepSeek-V3-20261129-101500.json");
  s.request_rate = 4;
  s.max_concurrency = 8;
  s.label = "hymoe";
  EXPECT_EQ(result_path(s, "out", ""), "out/hymoe-4.0qps-concurrency8-DeepSeek-V3-20261129-101500.json");
  EXPECT_EQ(result_path(s, "out", "x.json"), "out/x.json");
}

TEST(Svg, NiceTicksAndEscaping) {
  EXPECT_EQ(svg::nice_ticks(0, 10), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const auto unit = svg::nice_ticks(0, 1);
  ASSERT_EQ(unit.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(unit[i], 0.2 * i, 1e-12);
  const auto t = svg::nice_ticks(13, 87);
  EXPECT_GE(t.front(), 13);
  EXPECT_LE(t.back(), 87);
  EXPECT_GE(t.size(), 3u);
  EXPECT_EQ(svg::escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Charts, TimelineCdfAndInterference) {
  const auto outs = two_requests();
  const auto tl = timeline_chart("t <1>", outs, parse_goodput({"ttft:300"}));
  EXPECT_EQ(tl.rfind("<svg", 0), 0u);
  EXPECT_NE(tl.find("</svg>"), std::string::npos);
  EXPECT_NE(tl.find("t &lt;1&gt;"), std::string::npos);
  EXPECT_EQ(count(tl, "<circle"), 4);  // one TTFT, one TPOT, the failure on both panels
  EXPECT_EQ(count(tl, "stroke-dasharray"), 1);  // the TTFT SLO
  EXPECT_EQ(tl.find("nan"), std::string::npos);
  const auto cdf = cdf_chart("c", outs, {});
  EXPECT_EQ(count(cdf, "<polyline"), 4);

  ScenarioResult r1, r2;
  r1.spec = {"1P+1D", 1, 1};
  r1.prefill_ttft_ratio = 1.05;
  r1.decode_tpot_ratio = 3.5;
  r2.spec = {"2D", 0, 2};
  r2.decode_tpot_ratio = 1.01;
  const auto bars = interference_chart("i", {r1, r2});
  EXPECT_EQ(count(bars, "<rect x="), 3 + 2 + 1);  // 3 bars, 2 legend boxes, the plot frame
  EXPECT_NE(bars.find("3.50"), std::string::npos);
  EXPECT_NE(bars.find("1P+1D"), std::string::npos);
}

TEST(Scenarios, ParseNamesAndAddBaselines) {
  auto s = parse_scenarios("1P+2D");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "1P");
  EXPECT_EQ(s[1].name, "1D");
  EXPECT_EQ(s[2].name, "1P+2D");
  EXPECT_EQ(s[2].prefills, 1);
  EXPECT_EQ(s[2].decodes, 2);
  s = parse_scenarios("all");
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[3].name, "2D");
  s = parse_scenarios("2D, 1D");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "2D");
  EXPECT_THROW(parse_scenarios("1X"), Error);
  EXPECT_THROW(parse_scenarios("P"), Error);
  EXPECT_THROW(parse_scenarios("0P"), Error);
  EXPECT_THROW(parse_scenarios(""), Error);
}

TEST(Scenarios, TpotInWindowCountsTheStallThatClosesIt) {
  RequestOutput d;
  d.token_times = {1.0, 1.1, 1.2, 2.2, 2.3, 2.4};  // a 1 s stall from 1.2 to 2.2
  // Window (1.15, 2.0]: gaps ending at 1.2 (0.1) and the one closing it at 2.2 (1.0).
  EXPECT_NEAR(*tpot_in_window(d, 1.15, 2.0), 0.55, 1e-12);
  // Window before any gap ends.
  EXPECT_NEAR(*tpot_in_window(d, 0.0, 0.5), 0.1, 1e-12);
  EXPECT_FALSE(tpot_in_window(d, 3.0, 4.0));
}

}  // namespace
}  // namespace hymoe::bench
