// The result of a run in the JSON schema of vLLM's `bench serve --save-result`: run settings
// (date, backend, label, model_id, tokenizer_id, num_prompts, request_rate, burstiness,
// max_concurrency, metadata KEY=VALUE pairs), totals and throughputs, per-metric mean/median/std
// and p<N>_<metric>_ms for each chosen percentile, and with --save-detailed the per-request
// arrays (input_lens, output_lens, ttfts, itls, start_times, generated_texts, errors; seconds).
// The text report printed to stdout follows vLLM's "Serving Benchmark Result" block.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics.h"

namespace hymoe::bench {

struct RunSettings {
  std::string date;  // "%Y%m%d-%H%M%S"
  std::string backend = "openai";  // openai | openai-chat
  std::string label;               // empty: backend
  std::string model_id;
  std::string tokenizer_id;        // how prompt lengths were made ("server /tokenize", ...)
  int num_prompts = 0;
  double request_rate = 0;         // infinity allowed
  double burstiness = 1.0;
  std::optional<int> max_concurrency;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<std::string> percentile_metrics{"ttft", "tpot", "itl"};  // of ttft,tpot,itl,e2el,...
  std::vector<double> percentiles{99};
  GoodputSlo goodput;
  bool save_detailed = false;
};

// Python's str(float): "inf", "10.0", "2.5" (used in file names and percentile keys).
std::string py_float(double v);

// "p99", "p99.9": vLLM's key word of a percentile.
std::string percentile_word(double p);

// Builds the result object.
nlohmann::json build_result_json(const RunSettings& settings, const BenchmarkMetrics& metrics,
                                 const std::vector<RequestOutput>& outputs, double duration_s);

// vLLM's "Serving Benchmark Result" text block.
std::string format_report(const RunSettings& settings, const nlohmann::json& result);

// {label}-{rate}qps[-concurrency{N}]-{model basename}-{date}.json, or `result_filename`, inside
// result_dir when given (created).
std::string result_path(const RunSettings& settings, const std::string& result_dir,
                        const std::string& result_filename);

// Writes text to a file (creating parent folders); throws hymoe::Error (kIo).
void write_text_file(const std::string& path, const std::string& text);

// Appends text to a file (created when absent), after a newline when the file does not end in
// one: vLLM's --append-result, one JSON document per line.
void append_text_file(const std::string& path, const std::string& text);

}  // namespace hymoe::bench
