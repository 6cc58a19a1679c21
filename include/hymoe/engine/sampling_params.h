// How to pick each next token and when to stop: the engine-side form of a request's options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hymoe {

struct SamplingParams {
  // Distribution shaping, applied in this order: penalties, temperature, top_k, top_p, min_p.
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

  // Log-probabilities of the chosen token and the top alternatives.
  bool logprobs = false;
  int32_t top_logprobs = 0;  // 0..20

  bool greedy() const { return temperature == 0.0 || top_k == 1; }
};

}  // namespace hymoe
