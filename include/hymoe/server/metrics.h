// Prometheus metrics of the server, under vLLM's metric names (vllm:...) so existing
// dashboards and scrapers work unchanged. Thread-safe; rendered in the text exposition format.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace hymoe::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends "# TYPE" and the _bucket/_sum/_count lines for `name` with `labels` ("k=\"v\"").
  void render(std::string& out, const std::string& name, const std::string& help,
              const std::string& labels) const;
  uint64_t count() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket (non-cumulative); last is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

enum class FinishedReason { kStop, kLength, kAbort, kError };

class Metrics {
 public:
  explicit Metrics(std::string model_name);

  // Request lifecycle.
  void set_queue(int64_t running, int64_t waiting);
  void set_kv_usage(double fraction);  // 0..1
  // Prefix cache totals in tokens (the scheduler's cumulative counts): prompt tokens looked up,
  // and those found.
  void set_prefix_cache(int64_t queries, int64_t hits);
  // The scheduler's two paths (its cumulative counts): requests in and waiting for the long-prompt
  // path's step, and the prompt tokens each path computed (prefix-cache hits excluded).
  void set_paths(int64_t long_running, int64_t long_waiting, int64_t long_prompt_tokens, int64_t main_prompt_tokens);
  // The long path's copy pacing (CopyPacer; shown once set): the loader's total wait, the copy
  // rate in force (bytes/s, 0 = unpaced) and the TPOT objective (0 = none known yet).
  void set_pacing(double waited_seconds, double rate_bytes_per_s, double objective_seconds);
  // The executor serving the model (hymoe:backend_info{backend="..."} 1).
  void set_backend(const std::string& backend);
  void on_first_token(double ttft_seconds);
  void on_token(double inter_token_seconds);
  void on_finished(FinishedReason reason, int64_t prompt_tokens, int64_t generation_tokens,
                   double e2e_seconds);

  std::string render() const;

  int64_t running() const { return running_.load(); }
  int64_t waiting() const { return waiting_.load(); }

 private:
  std::string labels_;
  mutable std::mutex backend_mutex_;
  std::string backend_;
  std::atomic<int64_t> running_{0}, waiting_{0};
  std::atomic<double> kv_usage_{0.0};
  std::atomic<int64_t> prefix_queries_{0}, prefix_hits_{0};
  std::atomic<int64_t> long_running_{0}, long_waiting_{0}, long_tokens_{0}, main_tokens_{0};
  std::atomic<bool> pacing_set_{false};
  std::atomic<double> paced_s_{0.0}, pace_rate_{0.0}, tpot_objective_{0.0};
  std::atomic<uint64_t> prompt_tokens_{0}, generation_tokens_{0};
  std::atomic<uint64_t> finished_[4] = {};
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  Histogram prompt_len_;
  Histogram gen_len_;
};

}  // namespace hymoe::server
