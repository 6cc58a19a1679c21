#include "scenarios.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "hymoe/common/error.h"
#include "metrics.h"

namespace hymoe::bench {
namespace {

ScenarioSpec parse_one(const std::string& name) {
  ScenarioSpec s{name, 0, 0};
  std::size_t pos = 0;
  bool any = false;
  while (pos < name.size()) {
    std::size_t end = name.find('+', pos);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(pos, end - pos);
    pos = end + 1;
    HYMOE_CHECK(part.size() >= 2 && (part.back() == 'P' || part.back() == 'D'), kInvalidArgument,
                "--scenario: \"{}\" is not like 1P, 2D or 1P+2D", name);
    int n = 0;
    for (std::size_t i = 0; i + 1 < part.size(); ++i) {
      HYMOE_CHECK(part[i] >= '0' && part[i] <= '9' && n < 1000, kInvalidArgument,
                  "--scenario: \"{}\" is not like 1P, 2D or 1P+2D", name);
      n = n * 10 + (part[i] - '0');
    }
    HYMOE_CHECK(n > 0, kInvalidArgument, "--scenario: a count in \"{}\" is zero", name);
    (part.back() == 'P' ? s.prefills : s.decodes) += n;
    any = true;
  }
  HYMOE_CHECK(any, kInvalidArgument, "--scenario: empty scenario name");
  return s;
}

}  // namespace

std::vector<ScenarioSpec> parse_scenarios(const std::string& list) {
  std::vector<ScenarioSpec> specs;
  std::size_t pos = 0;
  const std::string text = list == "all" ? "1P,1D,1P+1D,2D,1P+2D" : list;
  while (pos <= text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string name = text.substr(pos, end - pos);
    pos = end + 1;
    std::erase(name, ' ');
    if (name.empty()) continue;
    auto s = parse_one(name);
    s.name = (s.prefills ? fmt::format("{}P", s.prefills) : "") +
             (s.prefills && s.decodes ? "+" : "") +
             (s.decodes ? fmt::format("{}D", s.decodes) : "");
    specs.push_back(s);
  }
  HYMOE_CHECK(!specs.empty(), kInvalidArgument, "--scenario: no scenario given");
  auto has = [&](const char* n) {
    return std::any_of(specs.begin(), specs.end(), [&](const auto& s) { return s.name == n; });
  };
  const bool any_p = std::any_of(specs.begin(), specs.end(), [](auto& s) { return s.prefills; });
  const bool any_d = std::any_of(specs.begin(), specs.end(), [](auto& s) { return s.decodes; });
  if (any_d && !has("1D")) specs.insert(specs.begin(), ScenarioSpec{"1D", 0, 1});
  if (any_p && !has("1P")) specs.insert(specs.begin(), ScenarioSpec{"1P", 1, 0});
  return specs;
}

std::optional<double> tpot_in_window(const RequestOutput& d, double w0, double w1) {
  double sum = 0;
  int n = 0;
  for (std::size_t i = 1; i < d.token_times.size(); ++i) {
    const double end = d.token_times[i];
    if (end <= w0) continue;
    sum += end - d.token_times[i - 1];
    ++n;
    if (end > w1) break;  // the gap that closes the window
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

void score_scenario(ScenarioResult& res, SoloBaselines& solo) {
  if (res.requests.empty()) return;
  // The prefill window: first P start to the last P first token.
  std::optional<double> w0, w1;
  for (const auto& r : res.requests) {
    if (r.role != 'P' || !r.output.success) continue;
    w0 = std::min(w0.value_or(r.output.start_time), r.output.start_time);
    w1 = std::max(w1.value_or(0.0), r.output.start_time + r.output.ttft);
  }
  for (auto& r : res.requests) {
    if (!r.output.success) continue;
    r.tpot_s = request_tpot(r.output);
    if (r.role == 'D' && w0) r.tpot_in_prefill_s = tpot_in_window(r.output, *w0, *w1);
  }
  // Baselines come from the solo runs (1P, 1D), the first time they succeed.
  const bool ok = std::all_of(res.requests.begin(), res.requests.end(),
                              [](const ScenarioRequest& r) { return r.output.success; });
  const RequestOutput& first = res.requests[0].output;
  if (res.spec.prefills == 1 && res.spec.decodes == 0 && ok && !solo.p_ttft_s) {
    solo.p_ttft_s = first.ttft;
    solo.p_e2e_s = first.latency;
  }
  if (res.spec.prefills == 0 && res.spec.decodes == 1 && ok && !solo.d_tpot_s) {
    solo.d_ttft_s = first.ttft;
    solo.d_tpot_s = res.requests[0].tpot_s;
    solo.d_e2e_s = first.latency;
  }
  for (auto& r : res.requests) {
    if (!r.output.success) continue;
    const auto solo_ttft = r.role == 'P' ? solo.p_ttft_s : solo.d_ttft_s;
    if (solo_ttft && *solo_ttft > 0) r.ttft_ratio = r.output.ttft / *solo_ttft;
    if (r.role == 'D' && solo.d_tpot_s && *solo.d_tpot_s > 0)
      r.tpot_ratio = r.tpot_in_prefill_s.value_or(r.tpot_s) / *solo.d_tpot_s;
    if (r.role == 'P' && r.ttft_ratio)
      res.prefill_ttft_ratio = std::max(res.prefill_ttft_ratio.value_or(0.0), *r.ttft_ratio);
    if (r.role == 'D' && r.tpot_ratio)
      res.decode_tpot_ratio = std::max(res.decode_tpot_ratio.value_or(0.0), *r.tpot_ratio);
  }
  // Total latency against the same requests one after the other. A failed request has no end,
  // so the wall time needs every request.
  if (ok) {
    double start = first.start_time, end = first.start_time + first.latency;
    for (const auto& r : res.requests) {
      start = std::min(start, r.output.start_time);
      end = std::max(end, r.output.start_time + r.output.latency);
    }
    res.wall_s = end - start;
  }
  const int a = res.spec.prefills, b = res.spec.decodes;
  if (a + b > 1 && (a == 0 || solo.p_e2e_s) && (b == 0 || solo.d_e2e_s)) {
    res.sequential_s = a * solo.p_e2e_s.value_or(0.0) + b * solo.d_e2e_s.value_or(0.0);
    if (res.wall_s && *res.sequential_s > 0)
      res.wall_over_sequential = *res.wall_s / *res.sequential_s;
  }
}

std::vector<ScenarioResult> run_scenarios(const OpenAiClient& base,
                                          const std::vector<ScenarioSpec>& specs,
                                          const ScenarioConfig& cfg,
                                          const PromptBuilder& prompts) {
  std::vector<ScenarioResult> results;
  SoloBaselines solo;
  std::size_t prompt_index = 0;  // every request gets fresh prompt text (no prefix reuse)

  for (const auto& spec : specs) {
    const auto t0 = Clock::now();
    const OpenAiClient client(base.config(), t0);
    ScenarioResult res;
    res.spec = spec;
    res.requests.resize(static_cast<std::size_t>(spec.prefills + spec.decodes));

    std::vector<RequestInput> inputs;
    for (int i = 0; i < spec.decodes; ++i) {
      RequestSpec rs;
      rs.input_len = cfg.decode_input_len;
      rs.output_len = cfg.decode_output_len;
      inputs.push_back({prompts.build(rs, prompt_index++), rs.input_len, rs.output_len});
    }
    for (int i = 0; i < spec.prefills; ++i) {
      RequestSpec rs;
      rs.input_len = cfg.prefill_len;
      rs.output_len = cfg.prefill_output_len;
      inputs.push_back({prompts.build(rs, prompt_index++), rs.input_len, rs.output_len});
    }

    std::mutex mu;
    std::condition_variable cv;
    int decodes_ready = 0;  // D streams with a first token, or finished
    std::vector<std::thread> threads;
    for (int i = 0; i < spec.decodes; ++i) {
      threads.emplace_back([&, i] {
        auto signal = [&] {
          std::lock_guard lock(mu);
          ++decodes_ready;
          cv.notify_all();
        };
        bool signalled = false;
        auto out = client.send(inputs[static_cast<std::size_t>(i)], [&] {
          signalled = true;
          signal();
        });
        if (!signalled) signal();
        auto& r = res.requests[static_cast<std::size_t>(i)];
        r.role = 'D';
        r.index = i;
        r.output = std::move(out);
      });
    }
    {
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::duration<double>(cfg.first_token_wait_s),
                  [&] { return decodes_ready == spec.decodes; });
    }
    if (spec.decodes > 0 && spec.prefills > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(cfg.settle_s));
    for (int i = 0; i < spec.prefills; ++i) {
      threads.emplace_back([&, i] {
        const auto k = static_cast<std::size_t>(spec.decodes + i);
        auto out = client.send(inputs[k]);
        auto& r = res.requests[k];
        r.role = 'P';
        r.index = i;
        r.output = std::move(out);
      });
    }
    for (auto& t : threads) t.join();
    res.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();

    score_scenario(res, solo);
    results.push_back(std::move(res));
  }
  return results;
}

nlohmann::json scenario_json(const ScenarioResult& r) {
  using nlohmann::json;
  auto opt_ms = [](std::optional<double> v) { return v ? json(*v * 1000) : json(nullptr); };
  auto opt = [](std::optional<double> v) { return v ? json(*v) : json(nullptr); };
  json reqs = json::array();
  for (const auto& q : r.requests) {
    reqs.push_back({{"role", std::string(1, q.role)},
                    {"index", q.index},
                    {"success", q.output.success},
                    {"error", q.output.error},
                    {"input_len", q.output.prompt_len},
                    {"output_tokens", q.output.output_tokens},
                    {"start_time", q.output.start_time},
                    {"ttft_ms", q.output.ttft * 1000},
                    {"tpot_ms", q.tpot_s * 1000},
                    {"tpot_in_prefill_ms", opt_ms(q.tpot_in_prefill_s)},
                    {"e2el_ms", q.output.latency * 1000},
                    {"ttft_ratio", opt(q.ttft_ratio)},
                    {"tpot_ratio", opt(q.tpot_ratio)}});
  }
  return {{"name", r.spec.name},
          {"prefills", r.spec.prefills},
          {"decodes", r.spec.decodes},
          {"duration", r.duration_s},
          {"prefill_ttft_ratio", opt(r.prefill_ttft_ratio)},
          {"decode_tpot_ratio", opt(r.decode_tpot_ratio)},
          {"wall_ms", opt_ms(r.wall_s)},
          {"sequential_ms", opt_ms(r.sequential_s)},
          {"wall_over_sequential", opt(r.wall_over_sequential)},
          {"requests", reqs}};
}

std::string format_scenarios(const std::vector<ScenarioResult>& results) {
  std::string out = fmt::format("{:=^78}\n", " Mixed prefill/decode scenarios ");
  out += fmt::format("{:<8} {:<4} {:>10} {:>10} {:>12} {:>9} {:>9}  {}\n", "scenario", "req",
                     "TTFT ms", "TPOT ms", "TPOT@P ms", "TTFT x", "TPOT x", "status");
  auto num = [](std::optional<double> v, double scale, const char* f) {
    return v ? fmt::format(fmt::runtime(f), *v * scale) : std::string("-");
  };
  for (const auto& r : results) {
    for (const auto& q : r.requests) {
      const auto& o = q.output;
      out += fmt::format("{:<8} {:<4} {:>10} {:>10} {:>12} {:>9} {:>9}  {}\n", r.spec.name,
                         fmt::format("{}{}", q.role, q.index),
                         o.success ? fmt::format("{:.1f}", o.ttft * 1000) : "-",
                         o.success && o.output_tokens > 1 ? fmt::format("{:.2f}", q.tpot_s * 1000)
                                                          : "-",
                         num(q.tpot_in_prefill_s, 1000, "{:.2f}"), num(q.ttft_ratio, 1, "{:.3f}"),
                         num(q.tpot_ratio, 1, "{:.3f}"), o.success ? "ok" : o.error);
    }
  }
  // Mixed scenarios: wall time against the same requests one after the other.
  bool header = false;
  for (const auto& r : results) {
    if (r.spec.prefills + r.spec.decodes <= 1) continue;
    if (!header) {
      out += fmt::format("{:-^78}\n", " Total latency against one after the other ");
      out += fmt::format("{:<8} {:>12} {:>22} {:>12}\n", "scenario", "wall ms",
                         "sequential (solo) ms", "wall / seq");
      header = true;
    }
    out += fmt::format("{:<8} {:>12} {:>22} {:>12}\n", r.spec.name, num(r.wall_s, 1000, "{:.1f}"),
                       num(r.sequential_s, 1000, "{:.1f}"),
                       num(r.wall_over_sequential, 1, "{:.3f}"));
  }
  out += std::string(78, '=') + "\n";
  return out;
}

}  // namespace hymoe::bench
