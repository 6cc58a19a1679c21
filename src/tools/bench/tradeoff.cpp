#include "tradeoff.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "result_json.h"
#include "svg.h"

namespace hymoe::bench {
namespace {

using nlohmann::json;

constexpr const char* kBlue = "#1f77b4";
constexpr const char* kOrange = "#ff7f0e";
constexpr const char* kGray = "#777";

// A number field of an object, nullopt when absent, null or not a number (never throws).
std::optional<double> number(const json& o, const char* key) {
  if (!o.is_object()) return std::nullopt;
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// The largest `key` over a scenario's successful requests of `role` ("P" or "D").
std::optional<double> worst(const json& scenario, const char* role, const char* key) {
  std::optional<double> out;
  const auto reqs = scenario.find("requests");
  if (reqs == scenario.end() || !reqs->is_array()) return out;
  for (const auto& q : *reqs) {
    if (!q.is_object() || q.value("role", json()) != role || q.value("success", json()) != true)
      continue;
    if (const auto v = number(q, key)) out = std::max(out.value_or(*v), *v);
  }
  return out;
}

}  // namespace

TradeoffInput parse_tradeoff_input(const std::string& arg) {
  TradeoffInput in;
  const auto eq = arg.find('=');
  if (eq == std::string::npos) {
    in.path = arg;
    in.label = std::filesystem::path(arg).stem().string();
  } else {
    in.label = arg.substr(0, eq);
    in.path = arg.substr(eq + 1);
  }
  HYMOE_CHECK(!in.label.empty() && !in.path.empty(), kInvalidArgument,
              "--tradeoff-result: \"{}\" is not LABEL=FILE or FILE", arg);
  return in;
}

TradeoffPoint read_tradeoff_point(const TradeoffInput& in) {
  std::ifstream file(in.path, std::ios::binary);
  HYMOE_CHECK(file.good(), kNotFound, "trade-off chart: cannot read {} (setting {})", in.path,
              in.label);
  std::stringstream text;
  text << file.rdbuf();
  const json j = json::parse(text.str(), nullptr, false);
  HYMOE_CHECK(!j.is_discarded() && j.is_object(), kCorruptData,
              "trade-off chart: {} is not one JSON object (a hymoe-bench result saved with "
              "--save-result, not --append-result)", in.path);
  const auto scenarios = j.find("scenarios");
  HYMOE_CHECK(scenarios != j.end() && scenarios->is_array(), kCorruptData,
              "trade-off chart: {} has no \"scenarios\" (not a hymoe-bench --scenario result)",
              in.path);
  TradeoffPoint p;
  p.label = in.label;
  if (const auto len = number(j.value("scenario_config", json()), "prefill_len"))
    p.prefill_len = static_cast<int>(*len);
  for (const auto& s : *scenarios) {
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string()) continue;
    const std::string name = s["name"].get<std::string>();
    if (name == "1P" && !p.solo_ttft_ms) p.solo_ttft_ms = worst(s, "P", "ttft_ms");
    if (name == "1D" && !p.solo_tpot_ms) p.solo_tpot_ms = worst(s, "D", "tpot_ms");
    if (name != "1P+1D" && name != "1P+2D") continue;
    const auto ttft = worst(s, "P", "ttft_ms");
    const auto ratio = number(s, "decode_tpot_ratio");
    if (!ttft || !ratio) continue;
    (name == "1P+1D" ? p.one_d : p.two_d) = TradeoffFigures{*ttft, *ratio};
  }
  HYMOE_CHECK(p.one_d || p.two_d, kCorruptData,
              "trade-off chart: {} has neither a 1P+1D nor a 1P+2D scenario with a successful "
              "prefill and a decode TPOT ratio (run hymoe-bench --scenario 1P+1D against a "
              "server that answers)", in.path);
  return p;
}

std::string tradeoff_chart(const std::string& title, const std::vector<TradeoffPoint>& points) {
  svg::Panel panel{"one point per setting", "prefill TTFT beside decodes (ms)",
                   "decode TPOT in prefill window / solo", {}, 1.15, "1.15 (goal)"};
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double x_lo = kInf, x_hi = -kInf, y_hi = 1.15;
  auto add_series = [&](std::optional<TradeoffFigures> TradeoffPoint::* which, const char* name,
                        const char* color) {
    svg::Series curve{"", color, {}, true, {}}, dots{name, color, {}, false, {}};
    std::vector<const TradeoffPoint*> have;
    for (const auto& p : points)
      if (p.*which) have.push_back(&p);
    std::stable_sort(have.begin(), have.end(), [&](const TradeoffPoint* a, const TradeoffPoint* b) {
      return (a->*which)->prefill_ttft_ms < (b->*which)->prefill_ttft_ms;
    });
    for (const TradeoffPoint* p : have) {
      const auto& f = *(p->*which);
      curve.points.emplace_back(f.prefill_ttft_ms, f.decode_tpot_ratio);
      dots.points.emplace_back(f.prefill_ttft_ms, f.decode_tpot_ratio);
      dots.labels.push_back(p->label);
      x_lo = std::min(x_lo, f.prefill_ttft_ms);
      x_hi = std::max(x_hi, f.prefill_ttft_ms);
      y_hi = std::max(y_hi, f.decode_tpot_ratio);
    }
    if (curve.points.size() > 1) panel.series.push_back(std::move(curve));
    if (!dots.points.empty()) panel.series.push_back(std::move(dots));
  };
  add_series(&TradeoffPoint::one_d, "1P+1D", kBlue);
  add_series(&TradeoffPoint::two_d, "1P+2D", kOrange);

  // References: solo TTFT (the mean over the settings' own 1P runs) and solo TPOT (y = 1).
  double solo_sum = 0;
  int solo_n = 0;
  for (const auto& p : points)
    if (p.solo_ttft_ms) {
      solo_sum += *p.solo_ttft_ms;
      ++solo_n;
    }
  if (solo_n > 0) {
    const double solo = solo_sum / solo_n;
    x_lo = std::min(x_lo, solo);
    x_hi = std::max(x_hi, solo);
    panel.series.push_back({"solo TTFT (1P)", kGray, {{solo, 0.0}, {solo, y_hi}}, true, {}});
  }
  if (x_lo <= x_hi)
    panel.series.push_back({"solo TPOT (1D) = 1", kGray, {{x_lo, 1.0}, {x_hi, 1.0}}, true, {}});
  return svg::render_panels(title, {panel}, 1);
}

int write_tradeoff_chart(const std::string& out_path, const std::vector<TradeoffInput>& inputs) {
  HYMOE_CHECK(!inputs.empty(), kInvalidArgument,
              "--tradeoff-chart needs one --tradeoff-result LABEL=FILE per setting");
  std::vector<TradeoffPoint> points;
  for (const auto& in : inputs) points.push_back(read_tradeoff_point(in));
  std::string title = "Prefill TTFT against decode TPOT by setting";
  const auto len = points.front().prefill_len;
  if (len && std::all_of(points.begin(), points.end(),
                         [&](const TradeoffPoint& p) { return p.prefill_len == len; }))
    title += fmt::format(" ({}-token prefill)", *len);
  write_text_file(out_path, tradeoff_chart(title, points));
  return static_cast<int>(points.size());
}

}  // namespace hymoe::bench
