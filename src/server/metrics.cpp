#include "hymoe/server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace hymoe::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mutex_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
  std::lock_guard lock(mutex_);
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, cum);
  out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, sum_, name, labels, count_);
}

namespace {
std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
          2.5,   5.0,   7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> token_buckets() {
  return {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000};
}
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}
}  // namespace

Metrics::Metrics(std::string model_name)
    : labels_(fmt::format("model_name=\"{}\"", escape_label(model_name))),
      ttft_(latency_buckets()),
      itl_(latency_buckets()),
      e2e_(latency_buckets()),
      prompt_len_(token_buckets()),
      gen_len_(token_buckets()) {}

void Metrics::set_queue(int64_t running, int64_t waiting) {
  running_ = running;
  waiting_ = waiting;
}
void Metrics::set_kv_usage(double fraction) { kv_usage_ = fraction; }
void Metrics::set_prefix_cache(int64_t queries, int64_t hits) {
  prefix_queries_ = queries;
  prefix_hits_ = hits;
}

void Metrics::set_paths(int64_t long_running, int64_t long_waiting, int64_t long_prompt_tokens,
                        int64_t main_prompt_tokens) {
  long_running_ = long_running;
  long_waiting_ = long_waiting;
  long_tokens_ = long_prompt_tokens;
  main_tokens_ = main_prompt_tokens;
}

void Metrics::set_pacing(double waited_seconds, double rate_bytes_per_s, double objective_seconds) {
  paced_s_ = waited_seconds;
  pace_rate_ = rate_bytes_per_s;
  tpot_objective_ = objective_seconds;
  pacing_set_ = true;
}

void Metrics::set_backend(const std::string& backend) {
  std::lock_guard lock(backend_mutex_);
  backend_ = backend;
}
void Metrics::on_first_token(double s) { ttft_.observe(s); }
void Metrics::on_token(double s) { itl_.observe(s); }

void Metrics::on_finished(FinishedReason reason, int64_t prompt_tokens, int64_t generation_tokens,
                          double e2e_seconds) {
  finished_[static_cast<int>(reason)] += 1;
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  generation_tokens_ += static_cast<uint64_t>(generation_tokens);
  e2e_.observe(e2e_seconds);
  prompt_len_.observe(static_cast<double>(prompt_tokens));
  gen_len_.observe(static_cast<double>(generation_tokens));
}

std::string Metrics::render() const {
  std::string out;
  auto gauge = [&](const char* name, const char* help, double v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{{}}} {}\n", name, help, name, name, labels_, v);
  };
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{{}}} {}\n", name, help, name, name, labels_, v);
  };
  gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
        static_cast<double>(running_.load()));
  gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
        static_cast<double>(waiting_.load()));
  gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv_usage_.load());
  {
    std::lock_guard lock(backend_mutex_);
    if (!backend_.empty())
      out += fmt::format("# HELP hymoe:backend_info The executor serving the model.\n# TYPE hymoe:backend_info gauge\n"
                         "hymoe:backend_info{{{},backend=\"{}\"}} 1\n", labels_, backend_);
  }
  // vLLM v1's names (prometheus_client adds _total to a counter); both in tokens.
  counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
          static_cast<uint64_t>(prefix_queries_.load()));
  counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
          static_cast<uint64_t>(prefix_hits_.load()));
  gauge("hymoe:long_path_requests_running", "Requests in the long-prompt path's running step (stream-loading prefill).",
        static_cast<double>(long_running_.load()));
  gauge("hymoe:long_path_requests_waiting", "Requests whose prompt waits for the long-prompt path.",
        static_cast<double>(long_waiting_.load()));
  if (pacing_set_.load()) {
    out += fmt::format("# HELP hymoe:long_path_copy_pacing_seconds_total Time the long path's expert copies were held "
                       "back to keep decodes within the TPOT objective.\n# TYPE hymoe:long_path_copy_pacing_seconds_total "
                       "counter\nhymoe:long_path_copy_pacing_seconds_total{{{}}} {}\n", labels_, paced_s_.load());
    gauge("hymoe:long_path_copy_rate_limit_bytes_per_second",
          "The long path's expert copy rate limit while requests decode (0 = unpaced).", pace_rate_.load());
    gauge("hymoe:tpot_objective_seconds", "The decode time per token the long path's copies are paced to (0 = not yet known).",
          tpot_objective_.load());
  }
  out += "# HELP hymoe:prompt_tokens_computed_total Prompt tokens computed, by path (prefix-cache hits excluded).\n"
         "# TYPE hymoe:prompt_tokens_computed_total counter\n";
  out += fmt::format("hymoe:prompt_tokens_computed_total{{{},path=\"main\"}} {}\n", labels_, main_tokens_.load());
  out += fmt::format("hymoe:prompt_tokens_computed_total{{{},path=\"long\"}} {}\n", labels_, long_tokens_.load());
  counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", prompt_tokens_.load());
  counter("vllm:generation_tokens_total", "Number of generation tokens processed.", generation_tokens_.load());
  out += "# HELP vllm:request_success_total Count of successfully processed requests.\n"
         "# TYPE vllm:request_success_total counter\n";
  const char* reasons[4] = {"stop", "length", "abort", "error"};
  for (int i = 0; i < 4; ++i) {
    out += fmt::format("vllm:request_success_total{{{},finished_reason=\"{}\"}} {}\n", labels_, reasons[i],
                       finished_[i].load());
  }
  ttft_.render(out, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels_);
  itl_.render(out, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels_);
  e2e_.render(out, "vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", labels_);
  prompt_len_.render(out, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", labels_);
  gen_len_.render(out, "vllm:request_generation_tokens", "Number of generation tokens processed.", labels_);
  return out;
}

}  // namespace hymoe::server
