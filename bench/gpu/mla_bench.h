// hymoe-bench-gpu's MLA attention sections: decode (the split-K kernels and their merge, at
// contexts of 1K-64K and batches 1-8, uniform and mixed lengths) and prefill (hymoe's kernels and
// cuDNN's fused attention, whole prompts and a chunk after a cached prefix).
#pragma once

#include <initializer_list>
#include <string>

#include "bench_harness.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/mla_decode.h"

namespace hymoe::gpu::bench {

// Contexts of 1K, 8K and 64K tokens at batch 1, 2, 4 and 8, then three batches of mixed lengths
// (one long sequence beside seven or 39 of 1K); cases whose longest sequence is below min_len, or
// whose label ("ctx=... batch=...") does not hold only_case, left out (one shape under ncu).
// steady: only the captured-graph rows of the ping-pong (one wave, planned, segmented), the pair
// kernel (one wave) and kAuto, each in the power-limited steady state (Bench::steady_ms), rows
// tagged ",steady".
void bench_mla_decode(Bench& bench, const Ceilings& c, const DeviceInfo& info, int min_len,
                      std::initializer_list<MlaDecodeImpl> impls,
                      const std::string& only_case = "", bool steady = false);

// Causal MLA prefill attention (naive form) at 128 heads; kv_b's [tokens, heads, 256] layout.
// hymoe's kernels and cuDNN's fused attention (where cuDNN loads), whole prompts and a chunk of
// 4096 new tokens after a cached prefix (chunked prefill). cuDNN with K in place also in the
// power-limited steady state, against `steady`'s BF16 ceiling (timed the same way).
void bench_mla_prefill(Bench& bench, const Ceilings& c, const Ceilings& steady, int max_tokens);

}  // namespace hymoe::gpu::bench
