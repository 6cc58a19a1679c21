// Synthetic request records for the bench's scoring tests: fresh random times from a seeded
// generator (test_seed.h's seed, replayable), a stream sent at `start` with its first token after
// `ttft` and tokens - 1 random gaps.
#pragma once

#include <random>

#include "metrics.h"

namespace hymoe::bench::test {

class SyntheticRequests {
 public:
  void seed(uint32_t s) { rng_.seed(s); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<>(lo, hi)(rng_); }

  RequestOutput stream(double start, double ttft, int tokens, double gap_lo, double gap_hi) {
    RequestOutput o;
    o.success = true;
    o.start_time = start;
    o.ttft = ttft;
    o.output_tokens = tokens;
    double t = start + ttft;
    o.token_times.push_back(t);
    for (int i = 1; i < tokens; ++i) {
      const double gap = uniform(gap_lo, gap_hi);
      o.itl.push_back(gap);
      t += gap;
      o.token_times.push_back(t);
    }
    o.latency = t - start;
    return o;
  }

 private:
  std::mt19937 rng_;
};

}  // namespace hymoe::bench::test
