// The metrics of vLLM's `bench serve` (vllm/benchmarks/serve.py, calculate_metrics), computed
// the same way: TTFT, TPOT (excl. the first token), ITL and E2E latency as mean, median,
// population std and linear-interpolated percentiles (numpy's default); request, output and
// total token throughput; goodput against SLOs; peak output tokens per one-second bucket and the
// peak number of concurrent requests. Empty inputs give 0 like numpy on `[] or 0`.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client.h"

namespace hymoe::bench {

// Summary of one metric, in milliseconds.
struct MetricStats {
  double mean_ms = 0;
  double median_ms = 0;
  double std_ms = 0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};

// numpy.percentile(values, p) with linear interpolation; values need not be sorted; 0 if empty.
double percentile(std::vector<double> values, double p);

// Stats of values given in seconds (reported in ms).
MetricStats summarize(const std::vector<double>& values_s, const std::vector<double>& percentiles);

// Service-level objectives for goodput, in milliseconds (vLLM's --goodput KEY:VALUE pairs).
struct GoodputSlo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};

// Parses {"ttft:300", "tpot:50"}; throws hymoe::Error (kInvalidArgument) on a bad pair, an
// unknown name (allowed: ttft, tpot, e2el) or a negative value.
GoodputSlo parse_goodput(const std::vector<std::string>& pairs);

struct BenchmarkMetrics {
  int completed = 0;
  int failed = 0;
  long long total_input = 0;
  long long total_output = 0;
  double request_throughput = 0;      // completed / duration
  double request_goodput = 0;         // requests meeting every SLO / duration
  double output_throughput = 0;       // output tokens / duration
  double total_token_throughput = 0;  // (input + output tokens) / duration
  MetricStats ttft, tpot, itl, e2el;
  double max_output_tokens_per_s = 0;
  int max_concurrent_requests = 0;
  std::vector<int> actual_output_lens;  // per request, 0 for failures
};

// Per-request TPOT in seconds: (latency - ttft) / (output_tokens - 1), 0 when <= 1 token.
double request_tpot(const RequestOutput& o);

BenchmarkMetrics calculate_metrics(const std::vector<RequestOutput>& outputs, double duration_s,
                                   const std::vector<double>& percentiles, const GoodputSlo& slo);

}  // namespace hymoe::bench
