#include "result_json.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "hymoe/common/error.h"

namespace hymoe::bench {
namespace {

using nlohmann::json;

bool selected(const RunSettings& s, std::string_view metric) {
  for (const auto& m : s.percentile_metrics)
    if (m == metric) return true;
  return false;
}

void put_metric(json& r, const RunSettings& s, const std::string& name, const MetricStats& st) {
  if (!selected(s, name)) return;
  r["mean_" + name + "_ms"] = st.mean_ms;
  r["median_" + name + "_ms"] = st.median_ms;
  r["std_" + name + "_ms"] = st.std_ms;
  for (const auto& [p, v] : st.percentiles_ms) r["p" + percentile_word(p) + "_" + name + "_ms"] = v;
}

}  // namespace

std::string py_float(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string percentile_word(double p) {
  if (p == std::floor(p)) return fmt::format("{}", static_cast<long long>(p));
  return py_float(p);
}

json build_result_json(const RunSettings& s, const BenchmarkMetrics& m,
                       const std::vector<RequestOutput>& outputs, double duration_s) {
  json r = json::object();
  r["date"] = s.date;
  r["endpoint_type"] = s.backend;
  r["backend"] = s.backend;
  r["label"] = s.label.empty() ? json(nullptr) : json(s.label);
  r["model_id"] = s.model_id;
  r["tokenizer_id"] = s.tokenizer_id;
  r["num_prompts"] = s.num_prompts;
  for (const auto& [k, v] : s.metadata) r[k] = v;
  r["request_rate"] = std::isinf(s.request_rate) ? json("inf") : json(s.request_rate);
  r["burstiness"] = s.burstiness;
  r["max_concurrency"] = s.max_concurrency ? json(*s.max_concurrency) : json(nullptr);

  r["duration"] = duration_s;
  r["completed"] = m.completed;
  r["failed"] = m.failed;
  r["total_input_tokens"] = m.total_input;
  r["total_output_tokens"] = m.total_output;
  r["request_throughput"] = m.request_throughput;
  r["request_goodput"] = s.goodput.empty() ? json(nullptr) : json(m.request_goodput);
  r["output_throughput"] = m.output_throughput;
  r["total_token_throughput"] = m.total_token_throughput;
  json latencies = json::array(), queue = json::array();
  if (s.save_detailed) {
    json input_lens = json::array(), ttfts = json::array(), itls = json::array(),
         starts = json::array(), texts = json::array(), errors = json::array();
    for (const auto& o : outputs) {
      input_lens.push_back(o.prompt_len);
      ttfts.push_back(o.ttft);
      itls.push_back(o.itl);
      starts.push_back(o.start_time);
      texts.push_back(o.generated_text);
      errors.push_back(o.error);
    }
    r["input_lens"] = input_lens;
    r["output_lens"] = m.actual_output_lens;
    r["ttfts"] = ttfts;
    r["itls"] = itls;
    r["start_times"] = starts;
    r["generated_texts"] = texts;
    r["errors"] = errors;
  }
  // Always present in vLLM's file, detailed or not.
  for (const auto& o : outputs) {
    latencies.push_back(o.latency);
    queue.push_back(o.client_queue_time);
  }
  r["latencies"] = latencies;
  r["queue_times"] = queue;
  // An addition to vLLM's schema: how often each error happened.
  json counts = json::object();
  for (const auto& o : outputs)
    if (!o.success) counts[o.error] = counts.value(o.error, 0) + 1;
  r["error_counts"] = counts;
  r["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  r["max_concurrent_requests"] = m.max_concurrent_requests;
  r["rtfx"] = 0.0;
  put_metric(r, s, "ttft", m.ttft);
  put_metric(r, s, "tpot", m.tpot);
  put_metric(r, s, "itl", m.itl);
  put_metric(r, s, "e2el", m.e2el);
  if (s.max_concurrency) {
    std::vector<double> q, e2e_q;
    for (const auto& o : outputs) {
      if (!o.success) continue;
      q.push_back(o.client_queue_time);
      e2e_q.push_back(o.latency + o.client_queue_time);
    }
    put_metric(r, s, "client_queue_time", summarize(q, s.percentiles));
    if (!std::isinf(s.request_rate))
      put_metric(r, s, "e2el_including_client_queue", summarize(e2e_q, s.percentiles));
  }
  return r;
}

std::string format_report(const RunSettings& s, const json& r) {
  std::string out;
  auto line = [&](std::string_view name, const json& v, bool decimals) {
    if (v.is_null()) return;
    if (decimals) out += fmt::format("{:<40} {:<10.2f}\n", name, v.get<double>());
    else out += fmt::format("{:<40} {:<10}\n", name, v.dump());
  };
  out += fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  line("Successful requests:", r["completed"], false);
  line("Failed requests:", r["failed"], false);
  if (s.max_concurrency) line("Maximum request concurrency:", *s.max_concurrency, false);
  if (!std::isinf(s.request_rate)) line("Request rate configured (RPS):", s.request_rate, true);
  line("Benchmark duration (s):", r["duration"], true);
  line("Total input tokens:", r["total_input_tokens"], false);
  line("Total generated tokens:", r["total_output_tokens"], false);
  line("Request throughput (req/s):", r["request_throughput"], true);
  if (!s.goodput.empty()) line("Request goodput (req/s):", r["request_goodput"], true);
  line("Output token throughput (tok/s):", r["output_throughput"], true);
  line("Peak output token throughput (tok/s):", r["max_output_tokens_per_s"], true);
  line("Peak concurrent requests:", r["max_concurrent_requests"], true);
  line("Total token throughput (tok/s):", r["total_token_throughput"], true);
  struct Block {
    const char* key;
    const char* name;
    const char* header;
  };
  static constexpr Block kBlocks[] = {
      {"ttft", "TTFT", "Time to First Token"},
      {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
      {"itl", "ITL", "Inter-token Latency"},
      {"e2el", "E2EL", "End-to-end Latency"},
      {"client_queue_time", "Client Queue Time", "Client-side Queueing"},
      {"e2el_including_client_queue", "E2EL incl. Client Queue",
       "Queue-inclusive End-to-end Latency"},
  };
  for (const auto& b : kBlocks) {
    const std::string mean_key = fmt::format("mean_{}_ms", b.key);
    if (!r.contains(mean_key)) continue;
    out += fmt::format("{:-^50}\n", b.header);
    line(fmt::format("Mean {} (ms):", b.name), r[mean_key], true);
    line(fmt::format("Median {} (ms):", b.name), r[fmt::format("median_{}_ms", b.key)], true);
    for (double p : s.percentiles) {
      const std::string w = percentile_word(p);
      line(fmt::format("P{} {} (ms):", w, b.name), r[fmt::format("p{}_{}_ms", w, b.key)], true);
    }
  }
  out += std::string(50, '=') + "\n";
  return out;
}

std::string result_path(const RunSettings& s, const std::string& result_dir,
                        const std::string& result_filename) {
  std::string name = result_filename;
  if (name.empty()) {
    std::string base_model = s.model_id;
    if (const auto slash = base_model.rfind('/'); slash != std::string::npos)
      base_model = base_model.substr(slash + 1);
    const std::string conc =
        s.max_concurrency ? fmt::format("-concurrency{}", *s.max_concurrency) : "";
    name = fmt::format("{}-{}qps{}-{}-{}.json", s.label.empty() ? s.backend : s.label,
                       py_float(s.request_rate), conc, base_model, s.date);
  }
  if (result_dir.empty()) return name;
  return (std::filesystem::path(result_dir) / name).string();
}

void write_text_file(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  HYMOE_CHECK(!ec, kIo, "cannot create folder {}: {}", p.parent_path().string(), ec.message());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  HYMOE_CHECK(out.good(), kIo, "cannot write {}", path);
  out << text;
  out.close();
  HYMOE_CHECK(!out.fail(), kIo, "error writing {}", path);
}

void append_text_file(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  HYMOE_CHECK(!ec, kIo, "cannot create folder {}: {}", p.parent_path().string(), ec.message());
  bool need_newline = false;
  if (std::ifstream in(p, std::ios::binary | std::ios::ate); in.good() && in.tellg() > 0) {
    in.seekg(-1, std::ios::end);
    need_newline = in.get() != '\n';
  }
  std::ofstream out(p, std::ios::binary | std::ios::app);
  HYMOE_CHECK(out.good(), kIo, "cannot append to {}", path);
  if (need_newline) out << '\n';
  out << text;
  out.close();
  HYMOE_CHECK(!out.fail(), kIo, "error writing {}", path);
}

}  // namespace hymoe::bench
