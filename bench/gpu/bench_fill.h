// Device-side random fills for the benchmarks (gigabytes of inputs; generating them on the host
// would dominate the run). Counter-based hash, so every call with a new seed gives new data.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace hymoe::gpu::bench {

// FP8 E4M3 codes of every finite value (0x7F/0xFF NaN codes remapped).
cudaError_t fill_fp8(void* dst, size_t count, uint64_t seed, cudaStream_t stream);
// BF16 values uniform in [-1, 1).
cudaError_t fill_bf16(void* dst, size_t count, uint64_t seed, cudaStream_t stream);
// F32 values uniform in [lo, hi).
cudaError_t fill_f32(float* dst, size_t count, float lo, float hi, uint64_t seed,
                     cudaStream_t stream);
// int32 values uniform in [0, bound).
cudaError_t fill_i32(int32_t* dst, size_t count, int32_t bound, uint64_t seed, cudaStream_t stream);

}  // namespace hymoe::gpu::bench

namespace hymoe::gpu::bench {

// The read-only ceiling of a kernel that streams `bytes` (a multiple of 16, 16-byte aligned)
// once: 16-byte streaming loads over a grid of `blocks` x 256 threads, XOR-folded into out[block]
// so nothing is optimised away. Timed like the kernel it bounds, it gives the bandwidth a
// launch of that size can reach (launch, ramp-up and tail included). pdl (sm_90 and newer; the
// caller checks): a programmatic dependent launch that reads first and waits for the previous
// kernel only before its write, the ceiling of a chain of PDL launches of that size.
cudaError_t read_probe(const void* src, size_t bytes, uint32_t* out, int blocks,
                       cudaStream_t stream, bool pdl = false);

// The same bytes read in the q8 GEMV's pattern, without its math: one block of 4 warps a 16-row
// tile of an [n][k] FP8 matrix (k a multiple of 128), warp w taking the 128-column blocks w, w +
// 4, ... four a round into registers (lane (g, c): 16 bytes at columns 16c and 64 + 16c of rows
// g and g + 8), each round waited for before the next. Tells whether the GEMV's access pattern
// and grid, rather than its arithmetic, hold it below read_probe. out: n / 16 words.
cudaError_t read_probe_gemv_tiles(const void* w, int n, int k, uint32_t* out, cudaStream_t stream);

}  // namespace hymoe::gpu::bench
