// hymoe-bench: see docs/bench.md. Builds the workload (trace, random or scenarios), runs it
// against the server, prints vLLM's result block and writes the JSON and SVG charts.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <ctime>

#include "arrivals.h"
#include "charts.h"
#include "client.h"
#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "metrics.h"
#include "options.h"
#include "prompts.h"
#include "result_json.h"
#include "runner.h"
#include "multi_turn.h"
#include "scenarios.h"
#include "tokenizer_counter.h"
#include "trace.h"
#include "tradeoff.h"

namespace hymoe::bench {
namespace {

std::vector<std::pair<std::string, std::string>> key_values(const std::vector<std::string>& items,
                                                            const char* flag) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    HYMOE_CHECK(eq != std::string::npos && eq > 0, kInvalidArgument,
                "{}: \"{}\" is not KEY=VALUE", flag, item);
    out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return out;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    auto end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    std::erase(item, ' ');
    if (!item.empty()) out.push_back(item);
    pos = end + 1;
  }
  return out;
}

std::string now_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

EndpointConfig endpoint_config(const Options& o) {
  EndpointConfig c;
  c.base_url = o.base_url.empty() ? fmt::format("http://{}:{}", o.host, o.port) : o.base_url;
  while (!c.base_url.empty() && c.base_url.back() == '/') c.base_url.pop_back();
  c.api = o.backend == "openai-chat" ? Api::kChat : Api::kCompletions;
  c.endpoint = !o.endpoint.empty()      ? o.endpoint
               : c.api == Api::kChat    ? "/v1/chat/completions"
                                        : "/v1/completions";
  c.headers = key_values(o.headers, "--header");
  c.timeout_s = o.request_timeout_s;
  c.connect_timeout_s = o.connect_timeout_s;
  c.ignore_eos = o.ignore_eos;
  c.count_empty_chunks = o.count_empty_chunks;
  nlohmann::json extra = nlohmann::json::object();
  if (o.temperature) extra["temperature"] = *o.temperature;
  if (o.top_p) extra["top_p"] = *o.top_p;
  if (o.top_k) extra["top_k"] = *o.top_k;
  if (o.min_p) extra["min_p"] = *o.min_p;
  if (!o.extra_body.empty()) {
    const auto j = nlohmann::json::parse(o.extra_body, nullptr, false);
    HYMOE_CHECK(!j.is_discarded() && j.is_object(), kInvalidArgument,
                "--extra-body must be a JSON object, got {}", o.extra_body);
    for (const auto& [k, v] : j.items()) extra[k] = v;
  }
  c.extra_body = extra;
  return c;
}

// The requests of a trace or random workload, with their arrival times.
std::vector<Job> build_jobs(const Options& o, const PromptBuilder& prompts, RunSettings& st) {
  std::vector<RequestSpec> specs;
  bool timed = false;
  if (!o.trace.empty()) {
    specs = load_trace(o.trace);
    timed = o.self_timed.value_or(true);
    if (timed) sort_by_arrival(specs);
  } else {
    HYMOE_CHECK(!o.self_timed, kInvalidArgument, "--self-timed applies to --trace only");
    specs = random_requests({o.num_prompts, o.random_input_len, o.random_output_len,
                             o.random_range_ratio, o.seed});
  }
  std::vector<double> arrivals;
  if (timed) {
    const double first = specs.front().arrival_s.value_or(0.0);
    for (const auto& s : specs)
      arrivals.push_back(std::max(0.0, (s.arrival_s.value_or(first) - first)) * o.trace_time_scale);
  } else {
    arrivals = generate_arrivals(static_cast<int>(specs.size()),
                                 {o.request_rate, o.burstiness, o.seed});
  }
  st.num_prompts = static_cast<int>(specs.size());
  std::vector<Job> jobs;
  int inexact = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    bool exact = false;
    RequestInput in{prompts.build(specs[i], i, &exact), specs[i].input_len, specs[i].output_len};
    if (!exact && !specs[i].prompt) ++inexact;
    jobs.push_back({std::move(in), arrivals[i]});
  }
  if (prompts.mode() == "tokenize" && inexact > 0)
    fmt::print(stderr, "warning: {} prompts could not be made exactly their token length\n",
               inexact);
  return jobs;
}

// vLLM's metrics of the outputs, with the first 10 failures listed on stdout as vLLM does.
nlohmann::json metrics_json(const RunSettings& st, const std::vector<RequestOutput>& outputs,
                            double duration) {
  const auto metrics = calculate_metrics(outputs, duration, st.percentiles, st.goodput);
  int shown = 0;
  for (const auto& out : outputs) {
    if (out.success || shown >= 10) continue;
    if (shown == 0) fmt::print("Failed requests during benchmark run detected (capping to 10):\n");
    fmt::print("Error {}: {}\n", shown++, out.error);
  }
  return build_result_json(st, metrics, outputs, duration);
}

// --tradeoff-chart: one SVG from saved scenario results; no server involved.
int draw_tradeoff_chart(const Options& o) {
  std::vector<TradeoffInput> inputs;
  for (const auto& arg : o.tradeoff_results) inputs.push_back(parse_tradeoff_input(arg));
  const int n = write_tradeoff_chart(o.tradeoff_chart, inputs);
  fmt::print("Trade-off chart ({} settings) written to {}\n", n, o.tradeoff_chart);
  return 0;
}

int run(const Options& o) {
  log::set_level(o.log_level);
  if (!o.tradeoff_chart.empty()) return draw_tradeoff_chart(o);
  const EndpointConfig base_cfg = endpoint_config(o);
  RunSettings st;
  st.date = now_stamp();
  st.backend = o.backend;
  st.label = o.label;
  st.request_rate = o.request_rate;
  st.burstiness = o.burstiness;
  st.max_concurrency = o.max_concurrency;
  st.metadata = key_values(o.metadata, "--metadata");
  st.percentile_metrics = split_list(o.percentile_metrics.empty() ? "ttft,tpot,itl"
                                                                  : o.percentile_metrics);
  for (const auto& m : st.percentile_metrics)
    HYMOE_CHECK(m == "ttft" || m == "tpot" || m == "itl" || m == "e2el" ||
                    m == "client_queue_time" || m == "e2el_including_client_queue",
                kInvalidArgument, "--percentile-metrics: unknown metric \"{}\"", m);
  st.percentiles.clear();
  for (const auto& p : split_list(o.metric_percentiles)) {
    char* end = nullptr;
    const double v = std::strtod(p.c_str(), &end);
    HYMOE_CHECK(end && *end == '\0' && v >= 0 && v <= 100, kInvalidArgument,
                "--metric-percentiles: \"{}\" is not a percentile in [0, 100]", p);
    st.percentiles.push_back(v);
  }
  st.goodput = parse_goodput(o.goodput);
  st.save_detailed = o.save_detailed;

  EndpointConfig cfg = base_cfg;
  if (o.ready_check_timeout_sec > 0) {
    fmt::print("Waiting up to {} s for {} to be ready...\n", o.ready_check_timeout_sec,
               cfg.base_url);
    HYMOE_CHECK(OpenAiClient(cfg, Clock::now()).wait_ready(o.ready_check_timeout_sec),
                kUnavailable, "{} was not ready within {} s", cfg.base_url,
                o.ready_check_timeout_sec);
  }
  std::string model = o.model;
  if (model.empty()) {
    std::string err;
    const OpenAiClient probe(cfg, Clock::now());
    auto first = probe.first_model(&err);
    HYMOE_CHECK(first.has_value(), kUnavailable,
                "no --model given and the server's model list is not available ({})", err);
    model = *first;
    fmt::print("Model not specified, using the server's first model: {}\n", model);
  }
  st.model_id = model;
  cfg.model = o.served_model_name.empty() ? model : o.served_model_name;
  const OpenAiClient client(cfg, Clock::now());

  // Exact prompt lengths: the server's /tokenize, else the model's tokenizer files.
  TokenCounter counter;
  std::string counter_id = "estimate:1-word-1-token";
  if (o.tokenize == "auto" || o.tokenize == "server") {
    if (client.count_tokens(" hello").has_value()) {
      counter = [&client](const std::string& text) { return client.count_tokens(text); };
      counter_id = "server:/tokenize";
    } else {
      HYMOE_CHECK(o.tokenize != "server", kUnavailable,
                  "--tokenize server: {}/tokenize does not answer", cfg.base_url);
    }
  }
  if (!counter && !o.tokenizer.empty() && o.tokenize != "off") {
    counter = load_tokenizer_counter(o.tokenizer);
    counter_id = "files:" + o.tokenizer;
  }
  HYMOE_CHECK(counter || o.tokenize != "files", kInvalidArgument,
              "--tokenize files needs --tokenizer DIR");
  const PromptBuilder prompts(counter, o.seed, o.block_size);
  st.tokenizer_id = prompts.mode() == "tokenize" ? counter_id : "estimate:1-word-1-token";
  if (prompts.mode() != "tokenize" && o.tokenize != "off")
    fmt::print(stderr, "warning: no /tokenize on the server and no --tokenizer: prompt lengths "
                       "are estimates (one word per token)\n");

  std::vector<RequestOutput> outputs;
  double duration = 0;
  std::vector<ScenarioResult> scenario_results;
  nlohmann::json multi_turn;
  if (o.multi_turn > 0) {
    const MultiTurnConfig mc{o.num_prompts, o.multi_turn, o.random_input_len, o.random_output_len};
    auto r = run_multi_turn(client, mc, prompts);
    duration = r.duration_s;
    fmt::print("{}", format_multi_turn(r));
    multi_turn = multi_turn_json(mc, r);
    outputs = std::move(r.outputs);
    st.num_prompts = static_cast<int>(outputs.size());
    st.request_rate = std::numeric_limits<double>::infinity();
  } else if (!o.scenario.empty()) {
    const auto specs = parse_scenarios(o.scenario);
    ScenarioConfig sc{o.prefill_len, o.prefill_output_len, o.decode_input_len,
                      o.decode_output_len, o.scenario_settle_ms / 1000.0, o.request_timeout_s};
    scenario_results = run_scenarios(client, specs, sc, prompts);
    for (const auto& r : scenario_results) {
      duration += r.duration_s;
      for (const auto& q : r.requests) {
        RequestOutput shifted = q.output;  // concatenate the scenarios on one time axis
        const double offset = duration - r.duration_s;
        shifted.start_time += offset;
        for (auto& t : shifted.token_times) t += offset;
        outputs.push_back(std::move(shifted));
      }
    }
    st.num_prompts = static_cast<int>(outputs.size());
    st.request_rate = std::numeric_limits<double>::infinity();
    fmt::print("{}", format_scenarios(scenario_results));
  } else {
    auto jobs = build_jobs(o, prompts, st);
    for (int i = 0; i < o.num_warmups && !jobs.empty(); ++i) {
      const auto w = client.send(jobs.front().input);
      if (!w.success) fmt::print(stderr, "warm-up request failed: {}\n", w.error);
    }
    fmt::print("Traffic request rate: {}\nBurstiness factor: {} ({})\nMaximum request "
               "concurrency: {}\n",
               !o.trace.empty() && o.self_timed.value_or(true) ? "trace timestamps"
                                                               : py_float(o.request_rate),
               py_float(o.burstiness), o.burstiness == 1.0 ? "Poisson process" : "Gamma distribution",
               o.max_concurrency ? std::to_string(*o.max_concurrency) : "None");
    auto run = run_jobs(client, jobs, {o.max_concurrency, !o.disable_tqdm});
    outputs = std::move(run.outputs);
    duration = run.duration_s;
  }

  auto result = metrics_json(st, outputs, duration);
  if (!scenario_results.empty()) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : scenario_results) {
      auto j = scenario_json(r);
      std::vector<RequestOutput> outs;
      for (const auto& q : r.requests) outs.push_back(q.output);
      RunSettings one = st;
      one.save_detailed = false;
      one.num_prompts = static_cast<int>(outs.size());
      j["metrics"] = build_result_json(
          one, calculate_metrics(outs, r.duration_s, st.percentiles, st.goodput), outs,
          r.duration_s);
      arr.push_back(std::move(j));
    }
    result["scenario_config"] = {{"prefill_len", o.prefill_len},
                                 {"prefill_output_len", o.prefill_output_len},
                                 {"decode_input_len", o.decode_input_len},
                                 {"decode_output_len", o.decode_output_len},
                                 {"settle_ms", o.scenario_settle_ms}};
    result["scenarios"] = std::move(arr);
  }
  if (!multi_turn.is_null()) result["multi_turn"] = std::move(multi_turn);
  fmt::print("{}", format_report(st, result));

  if (o.save_result || o.append_result) {
    const std::string path = result_path(st, o.result_dir, o.result_filename);
    if (o.append_result)
      append_text_file(path, result.dump() + "\n");
    else
      write_text_file(path, result.dump() + "\n");
    fmt::print("Result written to {}\n", path);
    if (!o.no_charts) {
      const std::string title = st.label.empty() ? st.backend + " " + model : st.label;
      for (const auto& p : write_charts(path, title, outputs, st.goodput,
                                        scenario_results.empty() ? nullptr : &scenario_results))
        fmt::print("Chart written to {}\n", p);
    }
  }
  const int completed = result["completed"].get<int>();
  return completed == 0 && !outputs.empty() ? 1 : 0;
}

}  // namespace
}  // namespace hymoe::bench

int main(int argc, char** argv) {
  int code = 0;
  auto options = hymoe::bench::parse_options(argc, argv, &code);
  if (!options) return code;
  try {
    return hymoe::bench::run(*options);
  } catch (const hymoe::Error& e) {
    std::fprintf(stderr, "hymoe-bench: %s\n", e.message().c_str());
    return e.kind() == hymoe::ErrorKind::kInvalidArgument ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hymoe-bench: %s\n", e.what());
    return 1;
  }
}
