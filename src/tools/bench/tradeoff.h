// The pacing trade-off chart (issue 43): one point per server setting (SLP pacing on/off, TPOT
// objectives), each read from the result JSON that `hymoe-bench --scenario ... --save-result`
// wrote against a server run with that setting. x is the prefill's TTFT beside decodes, y the
// decode TPOT inside the prefill window over solo TPOT: a setting that protects decoding more
// moves up-left to down-right. scripts/bench-pd --pacing LIST --out DIR draws it at the end.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hymoe::bench {

// One setting's result file, named on the command line as LABEL=FILE (or FILE: label = stem).
struct TradeoffInput {
  std::string label;
  std::string path;
};

// Parses "LABEL=FILE" or "FILE"; throws hymoe::Error (kInvalidArgument) for an empty label or path.
TradeoffInput parse_tradeoff_input(const std::string& arg);

// A mixed scenario's two figures.
struct TradeoffFigures {
  double prefill_ttft_ms = 0;  // worst successful P's TTFT
  double decode_tpot_ratio = 0;  // worst D's TPOT inside the prefill window / solo TPOT
};

// One setting's figures, all from one result file.
struct TradeoffPoint {
  std::string label;
  std::optional<double> solo_ttft_ms;     // 1P
  std::optional<double> solo_tpot_ms;     // 1D
  std::optional<TradeoffFigures> one_d;   // 1P+1D
  std::optional<TradeoffFigures> two_d;   // 1P+2D
  std::optional<int> prefill_len;         // scenario_config.prefill_len
};

// Reads one result file; throws hymoe::Error naming the file when it cannot be read
// (kNotFound), is not one JSON object, or has neither a 1P+1D nor a 1P+2D scenario with a
// successful prefill and a decode TPOT ratio (kCorruptData).
TradeoffPoint read_tradeoff_point(const TradeoffInput& in);

// The SVG: series 1P+1D and 1P+2D (a curve through each setting's point, sorted by TTFT, every
// point labelled), the mean solo TTFT as a vertical line, solo TPOT (y = 1) and the 1.15 goal.
std::string tradeoff_chart(const std::string& title, const std::vector<TradeoffPoint>& points);

// Reads every input, draws the chart and writes it to out_path; returns how many settings.
// Throws hymoe::Error (see read_tradeoff_point; kIo when the SVG cannot be written).
int write_tradeoff_chart(const std::string& out_path, const std::vector<TradeoffInput>& inputs);

}  // namespace hymoe::bench
