#include "multi_turn.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace hymoe::bench {

MultiTurnResult run_multi_turn(const OpenAiClient& client, const MultiTurnConfig& c, const PromptBuilder& prompts) {
  MultiTurnResult r;
  r.ttft.resize(static_cast<size_t>(c.turns));
  r.prompt_len.assign(static_cast<size_t>(c.turns), 0.0);
  std::vector<int> counted(static_cast<size_t>(c.turns), 0);
  Connection conn;
  const auto start = Clock::now();
  for (int conv = 0; conv < c.conversations; ++conv) {
    std::string history;
    for (int turn = 0; turn < c.turns; ++turn) {
      RequestSpec spec;
      spec.input_len = c.turn_input_len;
      spec.output_len = c.output_len;
      // A fresh stream of words per (conversation, turn): nothing shared across conversations.
      const std::string added = prompts.build(spec, static_cast<size_t>(conv) * 1000003u + static_cast<size_t>(turn));
      RequestInput in;
      in.prompt = history + added;
      in.prompt_len = 0;
      in.output_len = c.output_len;
      RequestOutput out = client.send(in, {}, &conn);
      const size_t t = static_cast<size_t>(turn);
      if (out.success) {
        r.ttft[t].push_back(out.ttft);
        if (out.server_prompt_tokens) {
          r.prompt_len[t] += static_cast<double>(*out.server_prompt_tokens);
          ++counted[t];
        }
        out.prompt_len = static_cast<int>(out.server_prompt_tokens.value_or(0));
      }
      history = in.prompt + out.generated_text;
      r.outputs.push_back(std::move(out));
    }
  }
  r.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (size_t t = 0; t < r.prompt_len.size(); ++t)
    if (counted[t]) r.prompt_len[t] /= counted[t];
  return r;
}

namespace {
double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double maximum(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }
}  // namespace

nlohmann::json multi_turn_json(const MultiTurnConfig& c, const MultiTurnResult& r) {
  nlohmann::json turns = nlohmann::json::array();
  for (size_t t = 0; t < r.ttft.size(); ++t) {
    turns.push_back({{"turn", t + 1},
                     {"mean_prompt_tokens", r.prompt_len[t]},
                     {"completed", r.ttft[t].size()},
                     {"mean_ttft_ms", mean(r.ttft[t]) * 1e3},
                     {"max_ttft_ms", maximum(r.ttft[t]) * 1e3}});
  }
  return {{"conversations", c.conversations}, {"turns", c.turns}, {"turn_input_len", c.turn_input_len},
          {"output_len", c.output_len}, {"per_turn", std::move(turns)}};
}

std::string format_multi_turn(const MultiTurnResult& r) {
  std::string out = "=========== Multi-turn: TTFT per turn ===========\n";
  out += fmt::format("{:>5} {:>14} {:>10} {:>15} {:>14}\n", "turn", "prompt tokens", "completed", "mean TTFT (ms)",
                     "max TTFT (ms)");
  for (size_t t = 0; t < r.ttft.size(); ++t)
    out += fmt::format("{:>5} {:>14.0f} {:>10} {:>15.2f} {:>14.2f}\n", t + 1, r.prompt_len[t], r.ttft[t].size(),
                       mean(r.ttft[t]) * 1e3, maximum(r.ttft[t]) * 1e3);
  return out;
}

}  // namespace hymoe::bench
