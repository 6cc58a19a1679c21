// Picks the next token from a row of logits under SamplingParams. Deterministic: the random
// draw for a step is a pure function of (seed, step), so a GPU sampler can reproduce it.
//
// Order of operations: presence/frequency penalties on the logits of tokens generated so far;
// temperature (0 = greedy argmax, lowest id on ties); top_k; top_p (smallest set whose mass
// reaches top_p); min_p (drop tokens below min_p * p_max); renormalise; inverse-CDF draw.
// Log-probabilities reported are those of the unmodified model distribution (log_softmax of the
// raw logits), as vLLM reports them by default.
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
  float logprob = 0.0f;                         // of `token`, raw distribution
  std::vector<std::pair<int32_t, float>> top;   // top_logprobs alternatives, best first
};


class Sampler {
 public:
  explicit Sampler(int32_t vocab_size);

  // Samples from `logits` (vocab_size values). `generated` are the tokens produced so far (for
  // penalties); `step` is their count (the draw index); `seed` the request's seed (or one the
  // scheduler drew for it). Reuses internal buffers: not thread-safe, one Sampler per thread.
  SampledToken sample(std::span<const float> logits, const SamplingParams& params,
                      std::span<const int32_t> generated, uint64_t seed, uint64_t step);

 private:
  int32_t vocab_;
  std::vector<float> work_;        // modified logits
  std::vector<int32_t> order_;     // candidate ids
  std::vector<int32_t> counts_;    // generated-token counts (penalties)
};

}  // namespace hymoe
