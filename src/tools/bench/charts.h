// The SVG charts written beside a result JSON: per-request TTFT and TPOT over time, latency
// CDFs (TTFT, TPOT, ITL, E2EL), and the interference ratios of the mixed scenarios.
#pragma once

#include <string>
#include <vector>

#include "metrics.h"
#include "scenarios.h"

namespace hymoe::bench {

// TTFT and TPOT (ms) of every request against its start time (s); failed requests as red marks
// on the time axis. SLO lines where goodput SLOs are set.
std::string timeline_chart(const std::string& title, const std::vector<RequestOutput>& outputs,
                           const GoodputSlo& slo);

// Empirical CDFs of TTFT, TPOT, ITL and E2E latency (ms) over the successful requests.
std::string cdf_chart(const std::string& title, const std::vector<RequestOutput>& outputs,
                      const GoodputSlo& slo);

// Per scenario: worst P TTFT ratio and worst D TPOT ratio against solo, with the 1.15 line.
std::string interference_chart(const std::string& title,
                               const std::vector<ScenarioResult>& results);

// Writes the charts for `json_path` as <stem>.timeline.svg, <stem>.cdf.svg (and, with scenarios,
// <stem>.interference.svg); returns the paths written. Throws hymoe::Error (kIo).
std::vector<std::string> write_charts(const std::string& json_path, const std::string& title,
                                      const std::vector<RequestOutput>& outputs,
                                      const GoodputSlo& slo,
                                      const std::vector<ScenarioResult>* scenarios);

}  // namespace hymoe::bench
