#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "hymoe/common/error.h"

namespace hymoe::bench {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

MetricStats summarize(const std::vector<double>& values_s, const std::vector<double>& pcts) {
  MetricStats s;
  if (!values_s.empty()) {
    double sum = 0;
    for (double x : values_s) sum += x;
    const double mean = sum / static_cast<double>(values_s.size());
    double sq = 0;
    for (double x : values_s) sq += (x - mean) * (x - mean);
    s.mean_ms = mean * 1000;
    s.std_ms = std::sqrt(sq / static_cast<double>(values_s.size())) * 1000;
    s.median_ms = percentile(values_s, 50) * 1000;
  }
  for (double p : pcts) s.percentiles_ms.emplace_back(p, percentile(values_s, p) * 1000);
  return s;
}

GoodputSlo parse_goodput(const std::vector<std::string>& pairs) {
  GoodputSlo slo;
  for (const auto& pair : pairs) {
    const auto colon = pair.find(':');
    HYMOE_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < pair.size(),
                kInvalidArgument,
                "--goodput: \"{}\" is not KEY:VALUE (e.g. ttft:2000 tpot:50, in milliseconds)",
                pair);
    const std::string name = pair.substr(0, colon);
    const std::string text = pair.substr(colon + 1);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    HYMOE_CHECK(end && *end == '\0' && std::isfinite(value), kInvalidArgument,
                "--goodput: \"{}\" is not a number in \"{}\"", text, pair);
    HYMOE_CHECK(value >= 0, kInvalidArgument, "--goodput: {} must be non-negative, got {}", name,
                value);
    if (name == "ttft") slo.ttft_ms = value;
    else if (name == "tpot") slo.tpot_ms = value;
    else if (name == "e2el") slo.e2el_ms = value;
    else HYMOE_THROW(kInvalidArgument, "--goodput: unknown metric \"{}\" (ttft, tpot, e2el)", name);
  }
  return slo;
}

double request_tpot(const RequestOutput& o) {
  if (o.output_tokens <= 1) return 0;
  return (o.latency - o.ttft) / (o.output_tokens - 1);
}

BenchmarkMetrics calculate_metrics(const std::vector<RequestOutput>& outputs, double duration_s,
                                   const std::vector<double>& pcts, const GoodputSlo& slo) {
  HYMOE_CHECK(duration_s > 0, kInvalidArgument, "benchmark duration must be positive");
  BenchmarkMetrics m;
  std::vector<double> ttfts, tpots, itls, e2els;
  int good = 0;
  for (const auto& o : outputs) {
    if (!o.success) {
      m.actual_output_lens.push_back(0);
      ++m.failed;
      continue;
    }
    const int out_len = o.output_tokens > 0 ? o.output_tokens : 1;
    m.actual_output_lens.push_back(out_len);
    m.total_input += o.prompt_len;
    m.total_output += out_len;
    double tpot = 0;
    if (out_len > 1) {
      tpot = (o.latency - o.ttft) / (out_len - 1);
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), o.itl.begin(), o.itl.end());
    ttfts.push_back(o.ttft);
    e2els.push_back(o.latency);
    ++m.completed;
    // vLLM: a request is good when each chosen metric is at most its SLO (tpot 0 if <= 1 token).
    const bool is_good = (!slo.ttft_ms || o.ttft <= *slo.ttft_ms / 1000) &&
                         (!slo.tpot_ms || tpot <= *slo.tpot_ms / 1000) &&
                         (!slo.e2el_ms || o.latency <= *slo.e2el_ms / 1000);
    if (!slo.empty() && is_good) ++good;
  }
  m.request_throughput = m.completed / duration_s;
  m.request_goodput = good / duration_s;
  m.output_throughput = static_cast<double>(m.total_output) / duration_s;
  m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration_s;
  m.ttft = summarize(ttfts, pcts);
  m.tpot = summarize(tpots, pcts);
  m.itl = summarize(itls, pcts);
  m.e2el = summarize(e2els, pcts);

  // Peak output tokens in one-second buckets from the first successful start, and the peak
  // number of overlapping [start, start + latency) intervals (ends before starts on ties).
  double t_min = 0, t_max = 0;
  bool any = false;
  for (const auto& o : outputs) {
    if (!o.success) continue;
    t_min = any ? std::min(t_min, o.start_time) : o.start_time;
    t_max = any ? std::max(t_max, o.start_time + o.latency) : o.start_time + o.latency;
    any = true;
  }
  if (any) {
    const auto buckets = static_cast<std::size_t>(std::ceil(t_max - t_min)) + 1;
    std::vector<double> per_second(buckets, 0.0);
    std::vector<std::pair<double, int>> events;
    for (const auto& o : outputs) {
      if (!o.success) continue;
      // Token times rebuilt from start + ttft + cumulative itl, as vLLM does.
      double t = o.start_time + o.ttft;
      auto add = [&](double when) {
        const double b = std::floor(when - t_min);
        if (b >= 0 && b < static_cast<double>(buckets)) per_second[static_cast<std::size_t>(b)] += 1;
      };
      add(t);
      for (double gap : o.itl) add(t += gap);
      events.emplace_back(o.start_time, +1);
      events.emplace_back(o.start_time + o.latency, -1);
    }
    std::sort(events.begin(), events.end());
    int cur = 0;
    for (const auto& e : events) m.max_concurrent_requests = std::max(m.max_concurrent_requests, cur += e.second);
    m.max_output_tokens_per_s = *std::max_element(per_second.begin(), per_second.end());
  }
  return m;
}

}  // namespace hymoe::bench
