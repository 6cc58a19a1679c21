// Entry point of GPU sampling and the host copy of the draw.
#include "hymoe/gpu/sampling.h"

#include "hymoe/common/sampling_random.h"
#include "hymoe/gpu/cuda_check.h"
#include "kernel_launch.h"

namespace hymoe::gpu {
double sampling_uniform_host(uint64_t seed, uint64_t step) { return hymoe::sampling_uniform(seed, step); }

void sample_tokens(const SamplingParams& p, cudaStream_t stream) {
  HYMOE_CHECK(p.rows >= 0 && p.vocab >= 1 && p.ld >= p.vocab, kInvalidArgument,
              "sample_tokens: rows {} vocab {} ld {}", p.rows, p.vocab, p.ld);
  HYMOE_CHECK(p.vocab <= kSamplingMaxVocab, kInvalidArgument,
              "sample_tokens: vocab {} is above the GPU sampler's {}", p.vocab, kSamplingMaxVocab);
  if (p.rows == 0) return;
  HYMOE_CHECK(p.logits && p.options && p.tokens, kInvalidArgument, "sample_tokens: null pointer");
  HYMOE_CUDA_CHECK(launch::sample_tokens(p, stream));
}

}  // namespace hymoe::gpu
