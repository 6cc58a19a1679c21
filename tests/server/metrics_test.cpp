#include "hymoe/server/metrics.h"

#include <gtest/gtest.h>

namespace hymoe::server {
namespace {

TEST(Histogram, CumulativeBucketsSumAndCount) {
  Histogram h({1.0, 2.0});
  h.observe(0.5);
  h.observe(1.0);  // le="1" is inclusive
  h.observe(1.5);
  h.observe(9.0);
  std::string out;
  h.render(out, "x", "help", "m=\"a\"");
  EXPECT_NE(out.find("x_bucket{m=\"a\",le=\"1\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{m=\"a\",le=\"2\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{m=\"a\",le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_sum{m=\"a\"} 12\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count{m=\"a\"} 4\n"), std::string::npos) << out;
}

TEST(Metrics, VllmNamesAndValues) {
  Metrics m("tiny\"model");
  m.set_queue(3, 2);
  m.set_kv_usage(0.25);
  m.set_prefix_cache(120, 64);
  m.set_paths(1, 2, 32768, 515);
  EXPECT_EQ(m.render().find("pacing"), std::string::npos);  // no pacer: no pacing series
  m.set_pacing(1.5, 2.5e10, 0.075);
  m.on_first_token(0.2);
  m.on_token(0.05);
  m.on_finished(FinishedReason::kLength, 10, 4, 0.5);
  m.on_finished(FinishedReason::kAbort, 7, 1, 0.1);
  const std::string out = m.render();
  for (const char* line : {"vllm:num_requests_running{model_name=\"tiny\\\"model\"} 3\n",
                           "vllm:num_requests_waiting{model_name=\"tiny\\\"model\"} 2\n",
                           "vllm:kv_cache_usage_perc{model_name=\"tiny\\\"model\"} 0.25\n",
                           "vllm:prompt_tokens_total{model_name=\"tiny\\\"model\"} 17\n",
                           "# TYPE vllm:prefix_cache_queries_total counter\n",
                           "vllm:prefix_cache_queries_total{model_name=\"tiny\\\"model\"} 120\n",
                           "vllm:prefix_cache_hits_total{model_name=\"tiny\\\"model\"} 64\n",
                           "vllm:generation_tokens_total{model_name=\"tiny\\\"model\"} 5\n",
                           "hymoe:long_path_requests_running{model_name=\"tiny\\\"model\"} 1\n",
                           "hymoe:long_path_requests_waiting{model_name=\"tiny\\\"model\"} 2\n",
                           "# TYPE hymoe:prompt_tokens_computed_total counter\n",
                           "# TYPE hymoe:long_path_copy_pacing_seconds_total counter\n",
                           "hymoe:long_path_copy_pacing_seconds_total{model_name=\"tiny\\\"model\"} 1.5\n",
                           "hymoe:long_path_copy_rate_limit_bytes_per_second{model_name=\"tiny\\\"model\"} 25000000000\n",
                           "hymoe:tpot_objective_seconds{model_name=\"tiny\\\"model\"} 0.075\n",
                           "hymoe:prompt_tokens_computed_total{model_name=\"tiny\\\"model\",path=\"main\"} 515\n",
                           "hymoe:prompt_tokens_computed_total{model_name=\"tiny\\\"model\",path=\"long\"} 32768\n",
                           "finished_reason=\"length\"} 1\n", "finished_reason=\"abort\"} 1\n",
                           "vllm:time_to_first_token_seconds_count{model_name=\"tiny\\\"model\"} 1\n",
                           "vllm:inter_token_latency_seconds_count", "vllm:e2e_request_latency_seconds_sum"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
}

}  // namespace
}  // namespace hymoe::server

namespace hymoe::server {
namespace {

TEST(Metrics, BackendInfoOnceSet) {
  Metrics m("tiny");
  EXPECT_EQ(m.render().find("hymoe:backend_info"), std::string::npos);
  m.set_backend("hybrid");
  const std::string out = m.render();
  EXPECT_NE(out.find("# TYPE hymoe:backend_info gauge"), std::string::npos) << out;
  EXPECT_NE(out.find("backend=\"hybrid\"} 1"), std::string::npos) << out;
}

}  // namespace
}  // namespace hymoe::server
