// Token sampling on the GPU with the CPU sampler's semantics (include/hymoe/engine/sampler.h):
// NaN logits count as -inf; temperature 0 (or top_k 1) is greedy argmax, lowest id on ties;
// otherwise candidates = the top_k largest logits (ties to the lower id), p = exp((l - max) / T);
// top_p keeps the smallest most-likely prefix holding top_p of the candidates' mass; min_p drops
// p < min_p * p_max; then an inverse-CDF draw in token-id order with u = sampling_uniform(seed,
// step) (SplitMix64, 53 bits), the same draw as the CPU sampler's.
// Ties at the top_k and top_p cuts are kept in id order, as the CPU sampler keeps them.
// Difference: probabilities are FP32 (the CPU uses FP64 sums; the top_p mass is summed in exact
// fixed point). Penalties are applied to the logits beforehand.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace hymoe::gpu {

// Largest vocabulary sample_tokens takes (the top_p mass histogram's exactness bound).
inline constexpr int kSamplingMaxVocab = 1 << 18;

// One row's options (plain values: copied to the device as an array of these).
struct SamplingRow {
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
  uint64_t step = 0;         // the draw index (tokens generated so far)
};

struct SamplingParams {
  const float* logits = nullptr;       // [rows, vocab], row r at logits + r * ld
  const SamplingRow* options = nullptr;  // [rows] on the device
  int32_t* tokens = nullptr;           // [rows] chosen ids
  int rows = 0;
  int vocab = 0;
  int64_t ld = 0;
};

// The CPU sampler's uniform draw, host side (for tests and callers that need the same number).
double sampling_uniform_host(uint64_t seed, uint64_t step);

void sample_tokens(const SamplingParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
