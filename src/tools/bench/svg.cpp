#include "svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace hymoe::bench::svg {
namespace {

constexpr int kPanelW = 420, kPanelH = 260;
constexpr int kLeft = 60, kRight = 15, kTop = 30, kBottom = 45;

std::string tick_label(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e5 || a < 1e-3) return fmt::format("{:.2g}", v);
  if (a >= 100 || v == std::round(v)) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.3g}", v);
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  void finish(bool from_zero) {
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    if (from_zero) lo = std::min(lo, 0.0);
    if (hi <= lo) hi = lo + 1;
  }
};

// Axes, ticks and labels of one plot area at (x0, y0) of size w x h.
void axes(std::string& out, double x0, double y0, double w, double h, const std::vector<double>& xt,
          const std::vector<double>& yt, const Range& xr, const Range& yr, bool x_ticks) {
  auto px = [&](double v) { return x0 + (v - xr.lo) / (xr.hi - xr.lo) * w; };
  auto py = [&](double v) { return y0 + h - (v - yr.lo) / (yr.hi - yr.lo) * h; };
  out += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='#fff' "
                     "stroke='#888'/>\n", x0, y0, w, h);
  for (double t : yt) {
    out += fmt::format("<line x1='{:.1f}' y1='{:.1f}' x2='{:.1f}' y2='{:.1f}' stroke='#eee'/>"
                       "<text x='{:.1f}' y='{:.1f}' text-anchor='end' font-size='10'>{}</text>\n",
                       x0, py(t), x0 + w, py(t), x0 - 4, py(t) + 3, tick_label(t));
  }
  if (!x_ticks) return;
  for (double t : xt) {
    out += fmt::format("<line x1='{:.1f}' y1='{:.1f}' x2='{:.1f}' y2='{:.1f}' stroke='#eee'/>"
                       "<text x='{:.1f}' y='{:.1f}' text-anchor='middle' font-size='10'>{}</text>\n",
                       px(t), y0, px(t), y0 + h, px(t), y0 + h + 13, tick_label(t));
  }
}

void reference_line(std::string& out, double x0, double w, double y, const std::string& label) {
  out += fmt::format("<line x1='{:.1f}' y1='{:.1f}' x2='{:.1f}' y2='{:.1f}' stroke='#c00' "
                     "stroke-dasharray='5,4'/><text x='{:.1f}' y='{:.1f}' text-anchor='end' "
                     "font-size='10' fill='#c00'>{}</text>\n",
                     x0, y, x0 + w, y, x0 + w - 3, y - 3, escape(label));
}

std::string header(int width, int height, const std::string& title) {
  return fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' "
                     "viewBox='0 0 {0} {1}' font-family='sans-serif'>\n"
                     "<rect width='100%' height='100%' fill='#fafafa'/>\n"
                     "<text x='{2}' y='20' text-anchor='middle' font-size='15' "
                     "font-weight='bold'>{3}</text>\n",
                     width, height, width / 2, escape(title));
}

}  // namespace

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi) {
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::string render_panels(const std::string& title, const std::vector<Panel>& panels,
                          int columns) {
  columns = std::max(1, columns);
  const int rows = static_cast<int>((panels.size() + columns - 1) / columns);
  const int width = columns * kPanelW, height = 30 + std::max(1, rows) * kPanelH;
  std::string out = header(width, height, title);
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const Panel& p = panels[i];
    const double ox = static_cast<double>(i % columns) * kPanelW;
    const double oy = 30 + static_cast<double>(i / columns) * kPanelH;
    const double x0 = ox + kLeft, y0 = oy + kTop;
    const double w = kPanelW - kLeft - kRight, h = kPanelH - kTop - kBottom;
    Range xr, yr;
    for (const auto& s : p.series)
      for (const auto& [x, y] : s.points) xr.add(x), yr.add(y);
    if (p.y_reference) yr.add(*p.y_reference);
    xr.finish(false);
    yr.finish(true);
    const auto xt = nice_ticks(xr.lo, xr.hi), yt = nice_ticks(yr.lo, yr.hi);
    yr.hi = std::max(yr.hi, yt.back());
    auto px = [&](double v) { return x0 + (v - xr.lo) / (xr.hi - xr.lo) * w; };
    auto py = [&](double v) { return y0 + h - (v - yr.lo) / (yr.hi - yr.lo) * h; };
    out += fmt::format("<text x='{:.1f}' y='{:.1f}' text-anchor='middle' font-size='12' "
                       "font-weight='bold'>{}</text>\n", x0 + w / 2, oy + 20, escape(p.title));
    axes(out, x0, y0, w, h, xt, yt, xr, yr, true);
    out += fmt::format("<text x='{:.1f}' y='{:.1f}' text-anchor='middle' font-size='11'>{}</text>\n",
                       x0 + w / 2, y0 + h + 30, escape(p.x_label));
    out += fmt::format("<text transform='translate({:.1f},{:.1f}) rotate(-90)' text-anchor='middle' "
                       "font-size='11'>{}</text>\n", ox + 14, y0 + h / 2, escape(p.y_label));
    if (p.y_reference) reference_line(out, x0, w, py(*p.y_reference), p.reference_label);
    double legend_y = y0 + 12;
    for (const auto& s : p.series) {
      if (s.line) {
        std::string pts;
        for (const auto& [x, y] : s.points)
          if (std::isfinite(x) && std::isfinite(y)) pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
        out += fmt::format("<polyline fill='none' stroke='{}' stroke-width='1.5' points='{}'/>\n",
                           s.color, pts);
      } else {
        for (const auto& [x, y] : s.points)
          if (std::isfinite(x) && std::isfinite(y))
            out += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='{}' fill='{}' "
                               "fill-opacity='0.7'/>\n", px(x), py(y),
                               s.labels.empty() ? "2.2" : "3.5", s.color);
      }
      for (std::size_t k = 0; k < s.labels.size() && k < s.points.size(); ++k) {
        const auto [x, y] = s.points[k];
        if (!std::isfinite(x) || !std::isfinite(y)) continue;
        const bool right_half = px(x) > x0 + w / 2;  // keep the text inside the plot
        out += fmt::format("<text x='{:.1f}' y='{:.1f}' text-anchor='{}' font-size='10' "
                           "fill='{}'>{}</text>\n", px(x) + (right_half ? -5 : 5), py(y) - 5,
                           right_half ? "end" : "start", s.color, escape(s.labels[k]));
      }
      if (!s.name.empty()) {
        out += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='10' height='10' fill='{}'/>"
                           "<text x='{:.1f}' y='{:.1f}' font-size='10'>{}</text>\n",
                           x0 + 6, legend_y - 9, s.color, x0 + 20, legend_y, escape(s.name));
        legend_y += 13;
      }
    }
  }
  out += "</svg>\n";
  return out;
}

std::string render_bars(const std::string& title, const std::string& y_label,
                        const std::vector<std::string>& categories,
                        const std::vector<BarGroup>& groups, std::optional<double> y_reference,
                        const std::string& reference_label) {
  const int width = std::max(kPanelW, 90 * static_cast<int>(categories.size()) + kLeft + 140);
  const int height = kPanelH + 60;
  std::string out = header(width, height, title);
  const double x0 = kLeft, y0 = 40, w = width - kLeft - 140, h = height - 40 - kBottom;
  Range yr;
  for (const auto& g : groups)
    for (double v : g.values) yr.add(v);
  if (y_reference) yr.add(*y_reference);
  yr.finish(true);
  const auto yt = nice_ticks(yr.lo, yr.hi);
  yr.hi = std::max(yr.hi, yt.back());
  auto py = [&](double v) { return y0 + h - (v - yr.lo) / (yr.hi - yr.lo) * h; };
  Range xr;
  xr.add(0);
  xr.add(1);
  axes(out, x0, y0, w, h, {}, yt, xr, yr, false);
  out += fmt::format("<text transform='translate({:.1f},{:.1f}) rotate(-90)' text-anchor='middle' "
                     "font-size='11'>{}</text>\n", 14.0, y0 + h / 2, escape(y_label));
  const double slot = categories.empty() ? w : w / static_cast<double>(categories.size());
  const double bar = groups.empty() ? slot : slot * 0.8 / static_cast<double>(groups.size());
  for (std::size_t c = 0; c < categories.size(); ++c) {
    const double cx = x0 + slot * static_cast<double>(c);
    out += fmt::format("<text x='{:.1f}' y='{:.1f}' text-anchor='middle' font-size='11'>{}</text>\n",
                       cx + slot / 2, y0 + h + 15, escape(categories[c]));
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (c >= groups[g].values.size() || !std::isfinite(groups[g].values[c])) continue;
      const double v = groups[g].values[c];
      const double bx = cx + slot * 0.1 + bar * static_cast<double>(g);
      out += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'/>"
                         "<text x='{:.1f}' y='{:.1f}' text-anchor='middle' font-size='9'>{:.2f}"
                         "</text>\n", bx, std::min(py(v), py(0)), bar * 0.9,
                         std::fabs(py(0) - py(v)), groups[g].color, bx + bar * 0.45, py(v) - 2, v);
    }
  }
  if (y_reference) reference_line(out, x0, w, py(*y_reference), reference_label);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double ly = y0 + 12 + 14 * static_cast<double>(g);
    out += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='10' height='10' fill='{}'/>"
                       "<text x='{:.1f}' y='{:.1f}' font-size='11'>{}</text>\n",
                       x0 + w + 10, ly - 9, groups[g].color, x0 + w + 24, ly,
                       escape(groups[g].name));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace hymoe::bench::svg
