// hymoe-bench's command line: flag names follow vLLM's `bench serve` wherever it has one.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace hymoe::bench {

struct Options {
  // Endpoint
  std::string backend = "openai";  // openai (completions) | openai-chat
  std::string base_url;            // overrides host/port
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint;            // default by backend
  std::string model;               // default: first of /v1/models
  std::string served_model_name;
  std::vector<std::string> headers;   // KEY=VALUE
  double request_timeout_s = 3600;
  double connect_timeout_s = 10;
  // Workload
  std::string trace;               // Mooncake JSONL file
  std::string scenario;            // "1P,1D,1P+1D,2D,1P+2D" or "all"
  int multi_turn = 0;              // > 0: num_prompts conversations of this many turns (multi_turn.h)
  int num_prompts = 1000;
  int random_input_len = 1024;
  int random_output_len = 128;
  double random_range_ratio = 0.0;
  std::uint64_t seed = 0;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  std::optional<int> max_concurrency;
  std::optional<bool> self_timed;  // traces: use their timestamps (default true)
  double trace_time_scale = 1.0;   // multiply trace timestamps (0.5 = twice as fast)
  int block_size = 512;            // tokens per hash_id block
  std::string tokenize = "auto";   // auto | server | files | off
  std::string tokenizer;           // model directory with tokenizer files
  int num_warmups = 0;
  // Scenarios
  int prefill_len = 8192;
  int prefill_output_len = 1;
  int decode_input_len = 128;
  int decode_output_len = 256;
  double scenario_settle_ms = 500;
  // Sampling
  bool ignore_eos = false;
  bool count_empty_chunks = false;  // vLLM's chunk timing
  std::optional<double> temperature, top_p, min_p;
  std::optional<int> top_k;
  std::string extra_body;          // JSON object
  // Report
  std::vector<std::string> goodput;
  std::string percentile_metrics;  // default "ttft,tpot,itl"
  std::string metric_percentiles = "99";
  bool save_result = false;
  bool save_detailed = false;
  bool append_result = false;
  double ready_check_timeout_sec = 0;  // wait for the server first (0: no check)
  std::string result_dir;
  std::string result_filename;
  std::string label;
  std::vector<std::string> metadata;  // KEY=VALUE
  bool disable_tqdm = false;
  bool no_charts = false;
  std::string log_level = "warn";
  // Trade-off chart from saved scenario results (tradeoff.h): nothing is sent to a server.
  std::string tradeoff_chart;                 // SVG to write
  std::vector<std::string> tradeoff_results;  // LABEL=FILE (or FILE), one per server setting
};

// Parses argv. Returns nullopt after printing help or a usage error; *exit_code then holds the
// status to exit with (0 for --help, 2 for an error).
std::optional<Options> parse_options(int argc, char** argv, int* exit_code);

}  // namespace hymoe::bench
