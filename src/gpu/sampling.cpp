// Entry point of GPU sampling and the host copy of the draw.
#include "hymoe/gpu/sampling.h"

#include "hymoe/gpu/cuda_check.h"
#include "kernel_launch.h"

namespace hymoe::gpu {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

double sampling_uniform_host(uint64_t seed, uint64_t step) {
  const uint64_t r = splitmix64(splitmix64(seed) ^ (step * 0xD1B54A32D192ED03ull));
  return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);
}

void sample_tokens(const SamplingParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.rows >= 0 && p.vocab >= 1 && p.ld >= p.vocab, kInvalidArgument,
              "sample_tokens: rows {} vocab {} ld {}", p.rows, p.vocab, p.ld);
  if (p.rows == 0) return;
  HYMOE_CHECK(p.logits && p.options && p.tokens, kInvalidArgument, "sample_tokens: null pointer");
  HYMOE_CUDA_CHECK(launch::sample_tokens(p, stream));
}

}  // namespace hymoe::gpu
