// Picks the next token from a row of logits under SamplingParams. Deterministic: the random
// draw for a step is a pure function of (seed, step), so a GPU sampler can reproduce it.
//
// Order of operations: logit_bias added to its tokens' logits; presence/frequency penalties on
// the logits of tokens generated so far; temperature (0 = greedy argmax, lowest id on ties);
// top_k; top_p (smallest set whose mass reaches top_p); min_p (drop tokens below min_p * p_max);
// renormalise; inverse-CDF draw.
// Log-probabilities reported are log_softmax of the logits with logit_bias added and nothing
// else (no penalties, temperature or truncation): the raw model distribution when there is no
// bias, as vLLM reports by default; with a bias, the biased one, as OpenAI reports it. A
// constraint (SamplingParams::constraint) is applied by the scheduler before this, as logits of
// -inf: log-probabilities are then those of the constrained distribution, and a token of logit
// -inf is never drawn while any other has a finite one.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "hymoe/common/sampling_random.h"  // sampling_uniform(seed, step)
#include "hymoe/engine/sampling_params.h"

namespace hymoe {

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;                         // of `token`, raw + logit_bias distribution
  std::vector<std::pair<int32_t, float>> top;   // top_logprobs alternatives, best first
};


class Sampler {
 public:
  explicit Sampler(int32_t vocab_size);

  // Samples from `logits` (vocab_size values). `generated` are the tokens produced so far (for
  // penalties); `step` is their count (the draw index); `seed` the request's seed (or one the
  // scheduler drew for it). Reuses internal buffers: not thread-safe, one Sampler per thread.
  // params.logit_bias must be sorted by id; ids outside [0, vocab_size) are skipped (the server
  // refuses them before this point).
  SampledToken sample(std::span<const float> logits, const SamplingParams& params,
                      std::span<const int32_t> generated, uint64_t seed, uint64_t step);

 private:
  int32_t vocab_;
  std::vector<float> work_;        // modified logits
  std::vector<int32_t> order_;     // candidate ids
  std::vector<int32_t> counts_;    // generated-token counts (penalties)
};

}  // namespace hymoe
