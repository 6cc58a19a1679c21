// Multi-turn conversations: each of `conversations` chats runs `turns` turns one after another,
// every turn re-sending the whole conversation so far (its earlier prompts and the model's
// answers, as text) plus `turn_input_len` new tokens of words, asking `output_len` tokens.
// Conversations run one at a time (concurrency 1), so each turn's TTFT is its prefill alone:
// with a prefix cache it covers only what the earlier turns have not computed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client.h"
#include "prompts.h"

namespace hymoe::bench {

struct MultiTurnConfig {
  int conversations = 1;
  int turns = 4;
  int turn_input_len = 256;  // new tokens each turn
  int output_len = 32;
};

struct MultiTurnResult {
  std::vector<RequestOutput> outputs;       // conversation-major, turn-minor
  std::vector<std::vector<double>> ttft;    // [turn][conversation], successful requests only
  std::vector<double> prompt_len;           // [turn] mean server-reported prompt tokens
  double duration_s = 0;
};

MultiTurnResult run_multi_turn(const OpenAiClient& client, const MultiTurnConfig& config, const PromptBuilder& prompts);

// Per turn: mean prompt tokens, mean and max TTFT.
nlohmann::json multi_turn_json(const MultiTurnConfig& config, const MultiTurnResult& r);
std::string format_multi_turn(const MultiTurnResult& r);

}  // namespace hymoe::bench
