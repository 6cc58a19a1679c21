#include "charts.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "result_json.h"
#include "svg.h"

namespace hymoe::bench {
namespace {

constexpr const char* kBlue = "#1f77b4";
constexpr const char* kOrange = "#ff7f0e";
constexpr const char* kRed = "#d62728";
constexpr const char* kGreen = "#2ca02c";
constexpr const char* kPurple = "#9467bd";

svg::Series cdf_series(std::vector<double> values_s, const char* name, const char* color) {
  std::sort(values_s.begin(), values_s.end());
  svg::Series s{name, color, {}, true, {}};
  const double n = static_cast<double>(values_s.size());
  for (std::size_t i = 0; i < values_s.size(); ++i) {
    s.points.emplace_back(values_s[i] * 1000, static_cast<double>(i) / n);
    s.points.emplace_back(values_s[i] * 1000, static_cast<double>(i + 1) / n);
  }
  return s;
}

}  // namespace

std::string timeline_chart(const std::string& title, const std::vector<RequestOutput>& outputs,
                           const GoodputSlo& slo) {
  svg::Panel ttft{"TTFT per request", "request start (s)", "TTFT (ms)", {}, slo.ttft_ms, "SLO"};
  svg::Panel tpot{"TPOT per request", "request start (s)", "TPOT (ms)", {}, slo.tpot_ms, "SLO"};
  svg::Series ok_ttft{"", kBlue, {}, false, {}}, ok_tpot{"", kOrange, {}, false, {}};
  svg::Series failed{"failed", kRed, {}, false, {}};
  for (const auto& o : outputs) {
    if (!o.success) {
      failed.points.emplace_back(o.start_time, 0.0);
      continue;
    }
    ok_ttft.points.emplace_back(o.start_time, o.ttft * 1000);
    if (o.output_tokens > 1) ok_tpot.points.emplace_back(o.start_time, request_tpot(o) * 1000);
  }
  ttft.series = {ok_ttft};
  tpot.series = {ok_tpot};
  if (!failed.points.empty()) {
    ttft.series.push_back(failed);
    tpot.series.push_back(failed);
  }
  return svg::render_panels(title, {ttft, tpot}, 2);
}

std::string cdf_chart(const std::string& title, const std::vector<RequestOutput>& outputs,
                      const GoodputSlo& slo) {
  std::vector<double> ttft, tpot, itl, e2el;
  for (const auto& o : outputs) {
    if (!o.success) continue;
    ttft.push_back(o.ttft);
    if (o.output_tokens > 1) tpot.push_back(request_tpot(o));
    itl.insert(itl.end(), o.itl.begin(), o.itl.end());
    e2el.push_back(o.latency);
  }
  std::vector<svg::Panel> panels = {
      {"TTFT", "ms", "fraction of requests", {cdf_series(ttft, "", kBlue)}, {}, ""},
      {"TPOT", "ms", "fraction of requests", {cdf_series(tpot, "", kOrange)}, {}, ""},
      {"ITL", "ms", "fraction of gaps", {cdf_series(itl, "", kGreen)}, {}, ""},
      {"E2E latency", "ms", "fraction of requests", {cdf_series(e2el, "", kPurple)}, {}, ""},
  };
  // SLOs as vertical lines are drawn as two-point series.
  auto vline = [](svg::Panel& p, std::optional<double> ms) {
    if (ms) p.series.push_back({"SLO", kRed, {{*ms, 0.0}, {*ms, 1.0}}, true, {}});
  };
  vline(panels[0], slo.ttft_ms);
  vline(panels[1], slo.tpot_ms);
  vline(panels[3], slo.e2el_ms);
  return svg::render_panels(title, panels, 2);
}

std::string interference_chart(const std::string& title,
                               const std::vector<ScenarioResult>& results) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::string> names;
  svg::BarGroup p{"prefill TTFT / solo", kBlue, {}}, d{"decode TPOT / solo", kOrange, {}};
  for (const auto& r : results) {
    names.push_back(r.spec.name);
    p.values.push_back(r.prefill_ttft_ratio.value_or(nan));
    d.values.push_back(r.decode_tpot_ratio.value_or(nan));
  }
  return svg::render_bars(title, "slowdown vs solo (x)", names, {p, d}, 1.15, "1.15 (goal)");
}

std::vector<std::string> write_charts(const std::string& json_path, const std::string& title,
                                      const std::vector<RequestOutput>& outputs,
                                      const GoodputSlo& slo,
                                      const std::vector<ScenarioResult>* scenarios) {
  std::string stem = json_path;
  if (stem.size() > 5 && stem.ends_with(".json")) stem.resize(stem.size() - 5);
  std::vector<std::string> written;
  auto put = [&](const std::string& suffix, const std::string& text) {
    write_text_file(stem + suffix, text);
    written.push_back(stem + suffix);
  };
  put(".timeline.svg", timeline_chart(title + ": TTFT and TPOT per request", outputs, slo));
  put(".cdf.svg", cdf_chart(title + ": latency CDFs", outputs, slo));
  if (scenarios && !scenarios->empty())
    put(".interference.svg", interference_chart(title + ": interference", *scenarios));
  return written;
}

}  // namespace hymoe::bench
