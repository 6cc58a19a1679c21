// Mixed prefill/decode scenarios: 1P, 1D, 1P+1D, 2D, 1P+2D (any "aP+bD").
//
// P is a long prefill (prefill_len prompt tokens, prefill_output_len generated), D a decode
// stream (decode_input_len prompt tokens, decode_output_len generated). A scenario first starts
// its D streams, waits until each has its first token (it is then decoding) plus settle_s, then
// starts its P requests together. Each request's TTFT and TPOT are set against its solo baseline
// (the 1P and 1D scenarios, run first when not listed): the interference ratio. For D requests
// running beside a prefill, TPOT is also measured inside the prefill window [first P start,
// last P first token], since that is where a prefill slows decoding; the gap that ends the
// window is included so a full stall is counted, not hidden. A mixed scenario (aP+bD, a+b > 1)
// also sets its wall time (first request start to last request end) against running the same
// requests one after the other: a x the 1P solo E2E latency + b x the 1D solo E2E latency.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client.h"
#include "prompts.h"

namespace hymoe::bench {

struct ScenarioSpec {
  std::string name;  // "1P+2D"
  int prefills = 0;
  int decodes = 0;
};

// Parses "1P,1D,1P+1D" (or "all" = 1P,1D,1P+1D,2D,1P+2D) into specs; throws hymoe::Error
// (kInvalidArgument) for a bad name. Solo baselines 1P/1D are put first when needed.
std::vector<ScenarioSpec> parse_scenarios(const std::string& list);

struct ScenarioConfig {
  int prefill_len = 8192;
  int prefill_output_len = 1;
  int decode_input_len = 128;
  int decode_output_len = 256;
  double settle_s = 0.5;
  double first_token_wait_s = 600;  // give up waiting for the D streams after this
};

// One request of a scenario with its comparison against the solo baseline.
struct ScenarioRequest {
  char role = 'D';  // 'P' or 'D'
  int index = 0;    // within its role
  RequestOutput output;
  double tpot_s = 0;
  std::optional<double> tpot_in_prefill_s;  // D beside a P: TPOT inside the prefill window
  std::optional<double> ttft_ratio;         // ttft / solo ttft
  std::optional<double> tpot_ratio;         // (tpot_in_prefill or tpot) / solo tpot
};

struct ScenarioResult {
  ScenarioSpec spec;
  double duration_s = 0;
  std::vector<ScenarioRequest> requests;
  std::optional<double> prefill_ttft_ratio;  // worst P ttft ratio
  std::optional<double> decode_tpot_ratio;   // worst D tpot ratio
  std::optional<double> wall_s;              // first start to last end; only if every request ok
  std::optional<double> sequential_s;        // mixed: a x solo P e2e + b x solo D e2e
  std::optional<double> wall_over_sequential;  // wall_s / sequential_s (< 1: overlap pays)
};

// The baselines every scenario is compared with: the first successful 1P and 1D runs.
struct SoloBaselines {
  std::optional<double> p_ttft_s, p_e2e_s;            // 1P
  std::optional<double> d_ttft_s, d_tpot_s, d_e2e_s;  // 1D
};

// Fills a finished scenario's figures from its requests' outputs (role, index and output set;
// times relative to one clock): each request's TPOT and, for D beside a P, its TPOT in the
// prefill window; the ratios against `solo`; the wall time and, for a mixed scenario, the
// sequential sum and its ratio. A successful 1P or 1D sets its half of `solo` when still unset,
// before the ratios, so a solo run's ratio is 1. Pure: no clock, no I/O.
void score_scenario(ScenarioResult& res, SoloBaselines& solo);

// Mean of D's inter-token gaps that end inside (w0, w1], plus the first gap ending after w1;
// nullopt when D has no gap ending after w0.
std::optional<double> tpot_in_window(const RequestOutput& d, double w0, double w1);

// Runs every scenario in order and scores each against the 1P/1D baselines (score_scenario).
std::vector<ScenarioResult> run_scenarios(const OpenAiClient& client,
                                          const std::vector<ScenarioSpec>& specs,
                                          const ScenarioConfig& config,
                                          const PromptBuilder& prompts);

// Per-scenario JSON (requests with ratios); metrics in vLLM's schema are added by the caller.
nlohmann::json scenario_json(const ScenarioResult& r);

// A text table of the scenarios' requests, then the mixed scenarios' wall time against the
// sequential sum of their solo latencies.
std::string format_scenarios(const std::vector<ScenarioResult>& results);

}  // namespace hymoe::bench
