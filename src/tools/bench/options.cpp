#include "options.h"

#include <CLI/CLI.hpp>

namespace hymoe::bench {

std::optional<Options> parse_options(int argc, char** argv, int* exit_code) {
  Options o;
  CLI::App app{"hymoe-bench: replay traces, synthetic workloads and mixed prefill/decode "
               "scenarios against an OpenAI-compatible server (vLLM bench serve metrics)"};
  app.get_formatter()->column_width(34);
  std::optional<double> request_rate;
  std::optional<int> input_len, output_len;
  bool self_timed = false, no_self_timed = false;

  auto* ep = "Endpoint";
  app.add_option("--backend", o.backend, "openai (/v1/completions) or openai-chat")
      ->check(CLI::IsMember({"openai", "openai-chat", "vllm"}))->group(ep);
  app.add_option("--base-url", o.base_url, "Server base URL, e.g. http://127.0.0.1:8000")->group(ep);
  app.add_option("--host", o.host, "Host when no --base-url")->group(ep);
  app.add_option("--port", o.port, "Port when no --base-url")->group(ep);
  app.add_option("--endpoint", o.endpoint,
                 "API path (default /v1/completions, /v1/chat/completions for openai-chat)")
      ->group(ep);
  app.add_option("--model", o.model, "Model name (default: first of /v1/models)")->group(ep);
  app.add_option("--served-model-name", o.served_model_name, "Model name sent in requests")
      ->group(ep);
  app.add_option("--header", o.headers, "KEY=VALUE headers sent with each request")->group(ep);
  app.add_option("--ready-check-timeout-sec", o.ready_check_timeout_sec,
                 "Wait up to this long for /health or /v1/models to answer 200 (0: no wait)")
      ->check(CLI::NonNegativeNumber)->group(ep);
  app.add_flag("--count-empty-chunks", o.count_empty_chunks,
               "Time every chunk with choices, even empty ones, as vLLM does (default: only "
               "chunks with text)")->group(ep);
  app.add_option("--request-timeout", o.request_timeout_s, "Seconds before a request is failed")
      ->check(CLI::PositiveNumber)->group(ep);
  app.add_option("--connect-timeout", o.connect_timeout_s, "TCP connect timeout (s)")
      ->check(CLI::PositiveNumber)->group(ep);

  auto* wl = "Workload";
  app.add_option("--trace", o.trace, "Mooncake-format JSONL trace to replay")->group(wl);
  app.add_option("--scenario", o.scenario,
                 "Mixed scenarios, e.g. 1P,1D,1P+1D,2D,1P+2D or all")->group(wl);
  app.add_option("--multi-turn", o.multi_turn,
                 "Conversations (--num-prompts of them, one at a time) of this many turns, each turn "
                 "re-sending the conversation plus --random-input-len new tokens; TTFT per turn")
      ->check(CLI::NonNegativeNumber)->group(wl);
  app.add_option("--num-prompts", o.num_prompts, "Number of random prompts")
      ->check(CLI::PositiveNumber)->group(wl);
  app.add_option("--random-input-len", o.random_input_len, "Random prompt tokens")
      ->check(CLI::PositiveNumber)->group(wl);
  app.add_option("--random-output-len", o.random_output_len, "Random output tokens")
      ->check(CLI::PositiveNumber)->group(wl);
  app.add_option("--input-len", input_len, "Alias of --random-input-len")->group(wl);
  app.add_option("--output-len", output_len, "Alias of --random-output-len")->group(wl);
  app.add_option("--random-range-ratio", o.random_range_ratio,
                 "Lengths uniform in [len*(1-r), len*(1+r)]")->check(CLI::Range(0.0, 0.999))
      ->group(wl);
  app.add_option("--seed", o.seed, "Random seed (lengths, arrivals, prompts)")->group(wl);
  app.add_option("--request-rate", request_rate,
                 "Requests/s (default inf: all at once); Poisson or gamma arrivals")->group(wl);
  app.add_option("--burstiness", o.burstiness,
                 "Gamma shape of arrivals: 1 Poisson, <1 burstier, >1 more regular, inf even")
      ->group(wl);
  app.add_option("--max-concurrency", o.max_concurrency, "Most requests in flight at once")
      ->check(CLI::PositiveNumber)->group(wl);
  app.add_flag("--self-timed", self_timed, "Traces: send at the trace timestamps (default)")
      ->group(wl);
  app.add_flag("--no-self-timed", no_self_timed,
               "Traces: ignore timestamps, use --request-rate/--burstiness")->group(wl);
  app.add_option("--trace-time-scale", o.trace_time_scale,
                 "Multiply trace timestamps by this (0.5 = replay twice as fast)")
      ->check(CLI::PositiveNumber)->group(wl);
  app.add_option("--block-size", o.block_size, "Tokens per hash_ids block (Mooncake: 512)")
      ->check(CLI::PositiveNumber)->group(wl);
  app.add_option("--tokenize", o.tokenize,
                 "Exact prompt lengths: auto (server /tokenize, else --tokenizer files), server, "
                 "files, off")->check(CLI::IsMember({"auto", "server", "files", "off"}))->group(wl);
  app.add_option("--tokenizer", o.tokenizer,
                 "Model folder with tokenizer.json / tiktoken.model (for servers without "
                 "/tokenize)")->group(wl);
  app.add_option("--num-warmups", o.num_warmups, "Warm-up requests before the run")
      ->check(CLI::NonNegativeNumber)->group(wl);

  auto* sc = "Scenarios";
  app.add_option("--prefill-len", o.prefill_len, "P: prompt tokens")->check(CLI::PositiveNumber)
      ->group(sc);
  app.add_option("--prefill-output-len", o.prefill_output_len, "P: output tokens")
      ->check(CLI::PositiveNumber)->group(sc);
  app.add_option("--decode-input-len", o.decode_input_len, "D: prompt tokens")
      ->check(CLI::PositiveNumber)->group(sc);
  app.add_option("--decode-output-len", o.decode_output_len, "D: output tokens")
      ->check(CLI::PositiveNumber)->group(sc);
  app.add_option("--scenario-settle-ms", o.scenario_settle_ms,
                 "Wait after the D streams decode before P starts")
      ->check(CLI::NonNegativeNumber)->group(sc);

  auto* sp = "Sampling";
  app.add_flag("--ignore-eos", o.ignore_eos, "Send ignore_eos: true (generate max_tokens)")
      ->group(sp);
  app.add_option("--temperature", o.temperature, "Sampling temperature")->group(sp);
  app.add_option("--top-p", o.top_p, "Top-p")->group(sp);
  app.add_option("--top-k", o.top_k, "Top-k")->group(sp);
  app.add_option("--min-p", o.min_p, "Min-p")->group(sp);
  app.add_option("--extra-body", o.extra_body, "JSON object merged into every request body")
      ->group(sp);

  auto* rp = "Report";
  app.add_option("--goodput", o.goodput, "SLOs in ms: ttft:MS tpot:MS e2el:MS")->group(rp);
  app.add_option("--percentile-metrics", o.percentile_metrics,
                 "Metrics to report: ttft,tpot,itl,e2el (default ttft,tpot,itl)")->group(rp);
  app.add_option("--metric-percentiles", o.metric_percentiles,
                 "Comma-separated percentiles, e.g. 50,90,99")->group(rp);
  app.add_flag("--save-result", o.save_result, "Write the result JSON (and SVG charts)")
      ->group(rp);
  app.add_flag("--save-detailed", o.save_detailed,
               "Include per-request arrays (ttfts, itls, errors, ...)")->group(rp);
  app.add_flag("--append-result", o.append_result,
               "Append the result as one JSON line to an existing file")->group(rp);
  app.add_option("--result-dir", o.result_dir, "Folder for the result files")->group(rp);
  app.add_option("--result-filename", o.result_filename, "Name of the result JSON")->group(rp);
  app.add_option("--label", o.label, "Label (file name prefix; default: backend)")->group(rp);
  app.add_option("--metadata", o.metadata, "KEY=VALUE pairs stored in the result")->group(rp);
  app.add_flag("--disable-tqdm", o.disable_tqdm, "No live progress line")->group(rp);
  app.add_flag("--no-charts", o.no_charts, "Do not write SVG charts beside the JSON")->group(rp);
  app.add_option("--log-level", o.log_level, "trace|debug|info|warn|error|off")->group(rp);

  auto* tc = "Trade-off chart (reads saved results, sends nothing)";
  app.add_option("--tradeoff-chart", o.tradeoff_chart,
                 "Write one SVG of prefill TTFT against decode TPOT / solo, one point per "
                 "--tradeoff-result (from its 1P+1D and 1P+2D scenarios), and exit")->group(tc);
  app.add_option("--tradeoff-result", o.tradeoff_results,
                 "LABEL=FILE: a --scenario result JSON of one server setting (repeat per setting; "
                 "FILE alone: label = file stem)")->group(tc);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return std::nullopt;
  }
  if (request_rate) o.request_rate = *request_rate;
  if (input_len) o.random_input_len = *input_len;
  if (output_len) o.random_output_len = *output_len;
  if (self_timed && no_self_timed) {
    std::fprintf(stderr, "--self-timed and --no-self-timed exclude each other\n");
    *exit_code = 2;
    return std::nullopt;
  }
  if (self_timed) o.self_timed = true;
  if (no_self_timed) o.self_timed = false;
  if (o.backend == "vllm") o.backend = "openai";
  if (o.multi_turn > 0 && (!o.trace.empty() || !o.scenario.empty())) {
    std::fprintf(stderr, "--multi-turn excludes --trace and --scenario\n");
    *exit_code = 2;
    return std::nullopt;
  }
  if (o.tradeoff_chart.empty() != o.tradeoff_results.empty()) {
    std::fprintf(stderr, "--tradeoff-chart OUT.svg and --tradeoff-result LABEL=FILE go together\n");
    *exit_code = 2;
    return std::nullopt;
  }
  if (!o.tradeoff_chart.empty() &&
      (!o.trace.empty() || !o.scenario.empty() || o.multi_turn > 0)) {
    std::fprintf(stderr, "--tradeoff-chart reads saved results: it excludes --trace, --scenario "
                         "and --multi-turn\n");
    *exit_code = 2;
    return std::nullopt;
  }
  if (!o.trace.empty() && !o.scenario.empty()) {
    std::fprintf(stderr, "--trace and --scenario exclude each other\n");
    *exit_code = 2;
    return std::nullopt;
  }
  *exit_code = 0;
  return o;
}

}  // namespace hymoe::bench
