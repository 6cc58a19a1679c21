// How to pick each next token and when to stop: the engine-side form of a request's options.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hymoe/engine/token_constraint.h"

namespace hymoe {

struct SamplingParams {
  // Distribution shaping, applied in this order: logit_bias, penalties, temperature, top_k,
  // top_p, min_p (greedy: logit_bias, penalties, argmax).
  // OpenAI's logit_bias: (token id, bias) pairs sorted by id, ids unique and inside the sampled
  // vocabulary, biases in [-100, 100], added to the raw logits (-100 bans a token in practice,
  // +100 forces it). Empty = none. Validated by the server and by Scheduler::submit.
  std::vector<std::pair<int32_t, float>> logit_bias;
  double temperature = 1.0;  // 0 = greedy (argmax)
  int32_t top_k = 0;         // 0 = off
  double top_p = 1.0;        // 1 = off
  double min_p = 0.0;        // 0 = off; keep tokens with p >= min_p * p_max
  double presence_penalty = 0.0;   // OpenAI semantics, over generated tokens
  double frequency_penalty = 0.0;
  std::optional<uint64_t> seed;    // same seed + same prompt + same params = same output

  // Stopping.
  int32_t max_tokens = 0;                 // 0 = up to the context length
  std::vector<std::string> stop;          // stop strings (not included in the output)
  bool ignore_eos = false;

  // Constrained decoding (e.g. JSON mode): each sequence starts its own state from this; the
  // scheduler masks every step's logits with it, before logit_bias. Null = none. Not with
  // ignore_eos (the constraint decides when the text may end).
  std::shared_ptr<const TokenConstraintFactory> constraint;

  // Log-probabilities of the chosen token and the top alternatives.
  bool logprobs = false;
  int32_t top_logprobs = 0;  // 0..20

  bool greedy() const { return temperature == 0.0 || top_k == 1; }
};

}  // namespace hymoe
