// Mixed prefill/decode scenarios: 1P, 1D, 1P+1D, 2D, 1P+2D (any "aP+bD").
//
// P is a long prefill (prefill_len prompt tokens, prefill_output_len generated), D a decode
// stream (decode_input_len prompt tokens, decode_output_len generated). A scenario first starts
// its D streams, waits until each has its first token (it is then decoding) plus settle_s, then
// starts its P requests together. Each request's TTFT and TPOT are set against its solo baseline
// (the 1P and 1D scenarios, run first when not listed): the interference ratio. For D requests
// running beside a prefill, TPOT is also measured inside the prefill window [first P start,
// last P first token], since that is where a prefill slows decoding; the gap that ends the
// window is included so a full stall is counted, not hidden.
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
};

// Mean of D's inter-token gaps that end inside (w0, w1], plus the first gap ending after w1;
// nullopt when D has no gap ending after w0.
std::optional<double> tpot_in_window(const RequestOutput& d, double w0, double w1);

// Runs every scenario in order and fills in the ratios against the 1P/1D baselines.
std::vector<ScenarioResult> run_scenarios(const OpenAiClient& client,
                                          const std::vector<ScenarioSpec>& specs,
                                          const ScenarioConfig& config,
                                          const PromptBuilder& prompts);

// Per-scenario JSON (requests with ratios); metrics in vLLM's schema are added by the caller.
nlohmann::json scenario_json(const ScenarioResult& r);

// A text table of the scenarios.
std::string format_scenarios(const std::vector<ScenarioResult>& results);

}  // namespace hymoe::bench
