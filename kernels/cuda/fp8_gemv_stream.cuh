// FP8 GEMV for 1..8 tokens that streams its weights like the read probe (Fp8GemvImpl::kStream and
// fp8_gemv_fused). The tile kernel (fp8_gemv_mma.cuh) holds its weight loads in registers (4
// chunks a warp, then the math): few bytes in flight per SM, a second wave of blocks, and DRAM
// idle while each block's last loads return. Here the weights go through the copy engine: each
// block owns a ring of kStreamStages shared-memory stages, each one 16 rows x 1024 columns (16 KB)
// of weight, and a producer warp keeps every free stage filled with cp.async.bulk copies (one a
// row, completing on the stage's full mbarrier), so up to 80 KB a block is in flight without a
// register or an instruction of the consumers spent on it. The 8 consumer warps compute the oldest
// stage: warp w takes its 64-column chunks w and w + 8, reads their fragments from shared memory
// (row pitch 1088 bytes: a quarter-warp's 16-byte reads hit distinct banks), runs the tile
// kernel's gemv_mma_chunk64 and block-scale step, and releases the stage on its empty mbarrier
// (one arrival a warp). Activations and block scales of a stage are loaded before the wait for its
// weights.
// The grid is at most stream_blocks_per_sm blocks an SM (default 2), sized so that every block
// gets the same number of tiles (to one): block b takes tiles b, b + gridDim.x, ... of the
// concatenated parts and its ring runs across tile boundaries.
// Measured (H200): 30-51% of copy in single launches with 2 blocks an SM (25-39% with 1),
// faster than the cp.async ring it replaced (22-39%) but slower than the tile kernels; ncu of
// 2048x7168: 0.3 instructions issued a cycle per scheduler, 2.2 warps resident per scheduler, DRAM
// 20% busy: the consumers, not the ring, set the pace (each stage waits on its activation loads;
// loading them stages ahead is the next step, not yet measured).
// Chunk c of a tile goes to warp c % 8 in increasing c, summed in the tile kernel's order (the 8
// warps' sums through shared memory, double-buffered across tiles): results are bitwise those of
// kTensorCores.
// Parts (fp8_gemv_fused): up to kGemvMaxFused weights over the same x, tokens and k; their 16-row
// tiles are numbered one after the other (tile_end: the running total).
// kPdl: every thread lets the next kernel launch at once; the producer never waits for the previous
// kernel (it reads only weights), the consumers pdl_wait() before they read activations or write
// outputs.
#pragma once

#include "common.cuh"
#include "fp8_gemv_mma.cuh"
#include "hymoe/gpu/fp8_gemv.h"
#include "mbarrier.cuh"
#include "mma.cuh"
#include "pdl.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kStreamWarps = 8;                               // consumers
inline constexpr int kStreamThreads = (kStreamWarps + 1) * kWarpSize;  // and the producer warp
inline constexpr int kStreamRows = 16;    // rows of a tile (the mma's M)
inline constexpr int kStreamSlab = 1024;  // weight columns (bytes) of a stage: 16 chunks of 64
inline constexpr int kStreamPitch = kStreamSlab + 64;
inline constexpr int kStreamChunksPerWarp = kStreamSlab / 64 / kStreamWarps;
// 5 stages: 85 KB of ring, 94 KB a block with the reduction buffers and barriers, under the 99 KB
// a block may have on sm_120 (and two blocks an SM on the H200's 227 KB).
inline constexpr int kStreamStages = 5;
inline constexpr int kStreamStageBytes = kStreamRows * kStreamPitch;
inline constexpr int kStreamRingBytes = kStreamStages * kStreamStageBytes;
static_assert(kStreamChunksPerWarp * kStreamWarps * 64 == kStreamSlab);
static_assert(kStreamPitch % 128 == 64, "rows g and g + 1 of a quarter-warp's reads in distinct banks");

struct GemvStreamArgs {
  Fp8GemvParams part[kGemvMaxFused];
  int tile_end[kGemvMaxFused];  // tiles of parts 0..i
  int parts;
};

// The part of global tile `tile` and the tile's first row in it.
__device__ __forceinline__ int stream_locate(const GemvStreamArgs& a, int tile, int& row0) {
  int i = 0;
  while (i + 1 < a.parts && tile >= a.tile_end[i]) ++i;
  row0 = (tile - (i ? a.tile_end[i - 1] : 0)) * kStreamRows;
  return i;
}

// Dynamic shared memory: kStreamRingBytes (the ring).
template <bool kPdl>
__global__ void __launch_bounds__(kStreamThreads) fp8_gemv_stream_kernel(const GemvStreamArgs a) {
  if constexpr (kPdl) pdl_launch_dependents();
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ float red[2][kStreamWarps][16][8];
  __shared__ __align__(8) uint64_t bars[2 * kStreamStages];  // full[s], then empty[s]
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int k = a.part[0].k, tokens = a.part[0].tokens;
  const int tiles = a.tile_end[a.parts - 1];
  const int slabs = (k + kStreamSlab - 1) / kStreamSlab;
  const int block = static_cast<int>(blockIdx.x), grid = static_cast<int>(gridDim.x);
  const int my_tiles = block < tiles ? (tiles - block + grid - 1) / grid : 0;
  const int items = my_tiles * slabs;  // stages this block consumes, in order
  const uint32_t ring_s = static_cast<uint32_t>(__cvta_generic_to_shared(ring));
  const uint32_t full_s = static_cast<uint32_t>(__cvta_generic_to_shared(bars));
  const uint32_t empty_s = full_s + 8 * kStreamStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStreamStages; ++s) {
      mbarrier_init(full_s + 8 * s, 1);
      mbarrier_init(empty_s + 8 * s, kStreamWarps);
    }
  }
  __syncthreads();

  if (warp == kStreamWarps) {  // the producer: item i into slot i % S once its previous use is released
    for (int it = 0; it < items; ++it) {
      const int slot = it % kStreamStages, use = it / kStreamStages;
      if (use > 0) mbarrier_wait(empty_s + 8 * slot, (use - 1) & 1);
      int row0 = 0;
      const Fp8GemvParams& p = a.part[stream_locate(a, block + (it / slabs) * grid, row0)];
      const int col = (it % slabs) * kStreamSlab;
      const int bytes = min(kStreamSlab, k - col);  // a multiple of 16
      const int rows = min(kStreamRows, p.n - row0);
      if (lane == 0) mbarrier_arrive_expect_tx(full_s + 8 * slot, static_cast<uint32_t>(rows * bytes));
      __syncwarp();  // the bytes are announced before any copy can complete them
      if (lane < rows) {
        const auto* src = reinterpret_cast<const uint8_t*>(p.w) + int64_t{row0 + lane} * p.ldw + col;
        bulk_copy_g2s(ring_s + slot * kStreamStageBytes + lane * kStreamPitch, src,
                      static_cast<uint32_t>(bytes), full_s + 8 * slot);
      }
    }
    return;  // a block's copies complete on barriers its consumers wait for: none outlives it
  }

  if constexpr (kPdl) pdl_wait();
  const int g = lane / 4, c = lane % 4;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int it = 0; it < items; ++it) {
    const int slot = it % kStreamStages, slab = it % slabs, tile_i = it / slabs;
    int row0 = 0;
    const Fp8GemvParams& p = a.part[stream_locate(a, block + tile_i * grid, row0)];
    // This stage's activations (token g) and block scales for the warp's chunks, before the wait.
    uint4 xa[kStreamChunksPerWarp], xb[kStreamChunksPerWarp];
    float s[kStreamChunksPerWarp];
#pragma unroll
    for (int j = 0; j < kStreamChunksPerWarp; ++j) {
      const int col0 = slab * kStreamSlab + (warp + j * kStreamWarps) * 64;  // warp-uniform
      const int col = col0 + c * 16;
      xa[j] = xb[j] = make_uint4(0, 0, 0, 0);
      s[j] = 0.0f;
      if (col0 < k) s[j] = __ldg(p.w_scales + int64_t{row0 / 128} * p.scale_ld + col0 / 128) * 0x1p20f;
      if (g < tokens && col < k) {
        const auto* xg = reinterpret_cast<const uint4*>(reinterpret_cast<const uint16_t*>(p.x) +
                                                        int64_t{g} * p.ldx + col);
        xa[j] = load_dependent<kPdl>(xg);
        xb[j] = load_dependent<kPdl>(xg + 1);
      }
    }
    if (slab == 0) acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    mbarrier_wait(full_s + 8 * slot, (it / kStreamStages) & 1);
    const uint8_t* st = ring + slot * kStreamStageBytes + c * 16;
#pragma unroll
    for (int j = 0; j < kStreamChunksPerWarp; ++j) {
      const int chunk = warp + j * kStreamWarps;
      const int col0 = slab * kStreamSlab + chunk * 64;
      if (col0 >= k) break;  // warp-uniform; later chunks of the warp are further right
      // Lanes past k (k is a multiple of 16: a lane's 16 columns are all in or all out) take zero
      // weights; rows past n read whatever the stage holds and only feed outputs never written.
      const bool in = col0 + c * 16 < k;
      const uint4 wl = in ? *reinterpret_cast<const uint4*>(st + chunk * 64 + g * kStreamPitch) : make_uint4(0, 0, 0, 0);
      const uint4 wh = in ? *reinterpret_cast<const uint4*>(st + chunk * 64 + (g + 8) * kStreamPitch) : make_uint4(0, 0, 0, 0);
      float part[4];
      gemv_mma_chunk64(wl, wh, xa[j], xb[j], part);
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[r] = fmaf(part[r], s[j], acc[r]);
    }
    __syncwarp();  // every lane's reads of the stage are done
    if (lane == 0) mbarrier_arrive(empty_s + 8 * slot);
    if (slab == slabs - 1) {  // the tile's last stage: sum the warps (the tile kernel's order)
      float(&r)[kStreamWarps][16][8] = red[tile_i & 1];
      store_gemv_fragment(r, warp, g, c, acc);
      // The consumers only (named barrier 1): red[b] is rewritten two tiles later, after every
      // consumer passed the next tile's barrier, that is after this tile's reads below.
      asm volatile("bar.sync 1, %0;" ::"n"(kStreamWarps * kWarpSize) : "memory");
      store_gemv_tile_sums<kStreamWarps>(r, p.y, p.ldy, row0, p.n, tokens, p.y_f32);
    }
  }
}

}  // namespace hymoe::gpu::kernels
