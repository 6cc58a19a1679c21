// Request arrival times, as vLLM's `bench serve` draws them.
//
// request_rate = inf: every request at t = 0. burstiness = inf: evenly spaced 1/rate apart.
// Otherwise inter-arrival gaps are Gamma(shape = burstiness, scale = 1/(rate * burstiness)),
// mean 1/rate: burstiness 1 is a Poisson process, < 1 burstier, > 1 more regular. Like vLLM, the
// cumulative times are rescaled so the last arrival lands exactly at n / rate, which removes the
// 1-2% run-to-run wobble of the total duration.
#pragma once

#include <cstdint>
#include <vector>

namespace hymoe::bench {

struct ArrivalConfig {
  double request_rate = 0;  // requests/s, > 0; infinity for "all at once"
  double burstiness = 1.0;  // > 0; infinity for a constant gap
  std::uint64_t seed = 0;
};

// Arrival offsets in seconds (non-decreasing, first gap included) for n requests.
// Throws hymoe::Error (kInvalidArgument) for a non-positive rate or burstiness.
std::vector<double> generate_arrivals(int n, const ArrivalConfig& config);

}  // namespace hymoe::bench
