// Minimal SVG charts, no dependencies: panels of scatter/line series on linear axes with
// "nice" ticks, and grouped bar charts. Output is a standalone SVG document (UTF-8 text).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hymoe::bench::svg {

struct Series {
  std::string name;
  std::string color;                               // CSS color
  std::vector<std::pair<double, double>> points;   // (x, y); non-finite points are skipped
  bool line = false;                               // polyline (true) or dots (false)
  std::vector<std::string> labels;                 // empty, or one per point: text beside it
};

struct Panel {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::optional<double> y_reference;  // dashed horizontal line (an SLO or a ratio threshold)
  std::string reference_label;
};

// A grid of panels (`columns` wide), each 420x260 px, under one title.
std::string render_panels(const std::string& title, const std::vector<Panel>& panels,
                          int columns);

struct BarGroup {
  std::string name;             // legend entry
  std::string color;
  std::vector<double> values;   // one per category; NaN: no bar
};

// Grouped bars: categories along x, one bar per group in each.
std::string render_bars(const std::string& title, const std::string& y_label,
                        const std::vector<std::string>& categories,
                        const std::vector<BarGroup>& groups, std::optional<double> y_reference,
                        const std::string& reference_label);

// Up to ~6 round tick values covering [lo, hi] (exposed for tests).
std::vector<double> nice_ticks(double lo, double hi);

// Escapes &, <, >, " for SVG text.
std::string escape(const std::string& text);

}  // namespace hymoe::bench::svg
