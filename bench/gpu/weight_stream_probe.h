// A probe of how fast the grouped expert GEMM's weight stream can come from DRAM, without the
// GEMM: the same bytes in the same order of tiles, read by plain 16-byte loads. It tells a GEMM
// that is short of the copy rate whether the access pattern or the pipeline is the limit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace hymoe::gpu::bench {

// How a probe CTA walks one tile's bytes (a 128-row panel of an expert's [n][k] FP8 weight).
enum class PanelOrder {
  kBoxes,       // as the GEMM's TMA: per 128-byte K block, 128 rows x 128 bytes (k bytes apart)
  kContiguous,  // the same panel's bytes as 16 KB contiguous pieces, one per K block
};

// experts weights of [n][k] bytes back to back at w (n, k multiples of 128); work item i = (expert i / (n / 128), panel i % (n / 128)), items spread over `blocks`
// persistent CTAs of 256 threads (item b, b + blocks, ...: the grouped GEMM's order with one row
// tile per expert). in_flight (6 or 12) K blocks of loads in flight per CTA (6: 96 KB, the GEMM
// ring's weight bytes; a panel's last group re-reads its last block where k / 128 is not a
// multiple of in_flight, from L2: 56 blocks of 7168 take 4). XOR-folded into out[block].
cudaError_t weight_stream_probe(const void* w, int experts, int n, int k, PanelOrder order, int blocks,
                                uint32_t* out, cudaStream_t stream, int in_flight = 6);

}  // namespace hymoe::gpu::bench
