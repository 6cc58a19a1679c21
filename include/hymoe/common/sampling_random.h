// The random draw of token sampling, one definition for the CPU sampler, the GPU kernel and the
// GPU's host-side copy: the uniform in [0, 1) for (seed, step) is a pure function of both, so a
// request samples the same tokens on either device. SplitMix64 of both, 53 random bits.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HYMOE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define HYMOE_HOST_DEVICE inline
#endif

namespace hymoe {

HYMOE_HOST_DEVICE uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

HYMOE_HOST_DEVICE double sampling_uniform(uint64_t seed, uint64_t step) {
  const uint64_t r = splitmix64(splitmix64(seed) ^ (step * 0xD1B54A32D192ED03ull));
  return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

}  // namespace hymoe
