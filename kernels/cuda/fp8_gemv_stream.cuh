// FP8 GEMV for 1..8 tokens that streams its weights like the read probe (Fp8GemvImpl::kStream and
// fp8_gemv_fused). The tile kernel (fp8_gemv_mma.cuh) holds its weight loads in registers (4
// chunks a warp, then the math): few bytes in flight per SM, a second wave of blocks, and DRAM
// idle while each block's last loads return. Here each block owns a ring of kStages
// dynamic shared-memory stages, each one 16 rows x 512 columns (8 KB) of weight, filled by cp.async (2
// 16-byte copies a thread, no registers held), and keeps kStages - 1 stages in flight while
// its 8 warps compute the oldest: warp w takes the stage's 64-column chunk w, reads its fragments
// from shared memory (row pitch 576 bytes: a quarter-warp's 16-byte reads hit distinct banks) and
// runs the tile kernel's gemv_mma_chunk64 and block-scale step. The grid is at most one wave
// (resident blocks), sized so that every block gets the same number of tiles (to one): block b
// takes tiles b, b + gridDim.x, ... of the concatenated parts and its
// ring runs across tile boundaries, so the next tile's first stages are in flight while this
// tile's reduction runs. Chunk c of a tile goes to warp c % 8 in increasing c, summed in the tile
// kernel's order: results are bitwise those of kTensorCores.
// Parts (fp8_gemv_fused): up to kGemvMaxFused weights over the same x, tokens and k; their 16-row
// tiles are numbered one after the other (tile_end: the running total).
// kPdl: the block lets the next kernel launch at once and fills its first stages (weights only)
// before pdl_wait(); activations are read and outputs written after it.
#pragma once

#include "common.cuh"
#include "fp8_gemv_mma.cuh"
#include "hymoe/gpu/fp8_gemv.h"
#include "mma.cuh"
#include "pdl.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kStreamWarps = 8;
inline constexpr int kStreamThreads = kStreamWarps * kWarpSize;
inline constexpr int kStreamRows = 16;       // rows of a tile (the mma's M)
inline constexpr int kStreamSlab = 512;      // weight columns (bytes) of a stage: 8 chunks of 64
inline constexpr int kStreamPitch = kStreamSlab + 64;
// Ring depths: kStreamStagesShallow (36 KB, 5 blocks an SM on the H200) when the tiles fill the
// SMs, and kStreamStagesDeep (90 KB, 2 blocks an SM; with red 94 KB, under the 99 KB a block may
// have on sm_89 and sm_120) when there are too few tiles for that (2048x7168 has 128, fewer than
// the H200's 132 SMs): then each block keeps 9 stages (72 KB) in flight.
inline constexpr int kStreamStagesShallow = 4;
inline constexpr int kStreamStagesDeep = 10;
inline constexpr int kStreamStageBytes = kStreamRows * kStreamPitch;
// 16-byte copies a thread issues per stage.
inline constexpr int kStreamCopies = kStreamRows * kStreamSlab / 16 / kStreamThreads;
static_assert(kStreamCopies * kStreamThreads * 16 == kStreamRows * kStreamSlab);
static_assert(kStreamSlab / 64 == kStreamWarps, "one 64-column chunk per warp and stage");

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

// Dynamic shared memory: kStages * kStreamStageBytes (the ring).
template <bool kPdl, int kStages>
__global__ void __launch_bounds__(kStreamThreads, kStages <= kStreamStagesShallow ? 4 : 2)
    fp8_gemv_stream_kernel(const GemvStreamArgs a) {
  if constexpr (kPdl) pdl_launch_dependents();
  extern __shared__ __align__(16) uint8_t ring_bytes[];
  auto* ring = reinterpret_cast<uint8_t(*)[kStreamStageBytes]>(ring_bytes);
  __shared__ float red[kStreamWarps][16][8];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, c = lane % 4;
  const int k = a.part[0].k, tokens = a.part[0].tokens;
  const int tiles = a.tile_end[a.parts - 1];
  const int slabs = (k + kStreamSlab - 1) / kStreamSlab;
  const int block = static_cast<int>(blockIdx.x), grid = static_cast<int>(gridDim.x);
  const int my_tiles = block < tiles ? (tiles - block + grid - 1) / grid : 0;
  const int items = my_tiles * slabs;  // stages this block consumes, in order

  // Fills ring slot `slot` with item `item`: rows row0.. of its tile, columns slab * 512 ..; bytes
  // outside the matrix are zero-filled (and never read from global memory).
  auto issue = [&](int item, int slot) {
    int row0 = 0;
    const Fp8GemvParams& p = a.part[stream_locate(a, block + (item / slabs) * grid, row0)];
    const int col_base = (item % slabs) * kStreamSlab;
    const auto* w = reinterpret_cast<const uint8_t*>(p.w);
#pragma unroll
    for (int j = 0; j < kStreamCopies; ++j) {
      const int i = threadIdx.x + j * kStreamThreads;
      const int r = i / (kStreamSlab / 16), col = col_base + (i % (kStreamSlab / 16)) * 16;
      const bool valid = row0 + r < p.n && col < k;
      const uint8_t* src = valid ? w + int64_t{row0 + r} * p.ldw + col : w;
      cp_async16(&ring[slot][r * kStreamPitch + (i % (kStreamSlab / 16)) * 16], src, valid);
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < items) issue(s, s);
    cp_async_commit();  // empty groups keep the count uniform
  }
  if constexpr (kPdl) pdl_wait();

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int it = 0; it < items; ++it) {
    cp_async_wait<kStages - 2>();  // item it has landed (this thread's copies)
    __syncthreads();                     // everyone's copies; slot (it - 1) % S is free again
    if (it + kStages - 1 < items) issue(it + kStages - 1, (it + kStages - 1) % kStages);
    cp_async_commit();

    const int slab = it % slabs;
    int row0 = 0;
    const Fp8GemvParams& p = a.part[stream_locate(a, block + (it / slabs) * grid, row0)];
    if (slab == 0) acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    const int col0 = slab * kStreamSlab + warp * 64;  // this warp's chunk (warp-uniform test)
    if (col0 < k) {
      const uint8_t* st = ring[it % kStages] + warp * 64 + c * 16;
      const uint4 wl = *reinterpret_cast<const uint4*>(st + g * kStreamPitch);
      const uint4 wh = *reinterpret_cast<const uint4*>(st + (g + 8) * kStreamPitch);
      uint4 xa = make_uint4(0, 0, 0, 0), xb = make_uint4(0, 0, 0, 0);
      const int col = col0 + c * 16;
      if (g < tokens && col < k) {
        const auto* xg = reinterpret_cast<const uint4*>(reinterpret_cast<const uint16_t*>(p.x) +
                                                        int64_t{g} * p.ldx + col);
        xa = load_dependent<kPdl>(xg);
        xb = load_dependent<kPdl>(xg + 1);
      }
      float part[4];
      gemv_mma_chunk64(wl, wh, xa, xb, part);
      const float s = __ldg(p.w_scales + int64_t{row0 / 128} * p.scale_ld + col0 / 128) * 0x1p20f;
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[r] = fmaf(part[r], s, acc[r]);
    }
    if (slab == slabs - 1) {  // the tile's last stage: sum the warps (the tile kernel's order)
      red[warp][g][2 * c] = acc[0];
      red[warp][g][2 * c + 1] = acc[1];
      red[warp][g + 8][2 * c] = acc[2];
      red[warp][g + 8][2 * c + 1] = acc[3];
      __syncthreads();  // red is rewritten no earlier than after the next iteration's barrier
      if (threadIdx.x < 128) {
        const int r = threadIdx.x / 8, t = threadIdx.x % 8;
        if (row0 + r < p.n && t < tokens) {
          float sum = 0.0f;
#pragma unroll
          for (int wi = 0; wi < kStreamWarps; ++wi) sum += red[wi][r][t];
          reinterpret_cast<uint16_t*>(p.y)[t * p.ldy + row0 + r] = float_to_bf16_bits(sum);
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy outlives the block (the trailing groups are empty)
}

}  // namespace hymoe::gpu::kernels
