// FP8-activation GEMV fed by the copy engine (Fp8GemvQ8Params::stream; compute capability 9.0 or
// newer). The tile kernel (fp8_gemv_q8.cuh) holds its weight loads in registers: at most ~128 KB
// an SM in flight, a bubble while each round's last loads return, and its blocks fill the SM, so
// in a PDL chain the next GEMV's blocks cannot start streaming until this one's leave. Here a
// producer warp fills a ring of shared-memory stages, each one 16 weight rows x 2048 columns (one
// cp.async.bulk a row), the same columns of the activations (one a token) and the 16 weight
// scales of those columns (cp.async, 4 bytes each), all completing on the stage's full mbarrier;
// it copies the first ring's worth of weights at once, before waiting for the previous kernel
// (pdl_wait), and the activations after. The grid is one block an SM, each block at most half an
// SM's shared memory and registers, so the next PDL launch's block is resident beside it and
// fills its ring while this one computes.
// Block b takes the run of tiles [b T / G, (b + 1) T / G) of the T 16-row tiles (of all parts, in
// order) over a grid of G; a tile is ceil(k / 2048) stages. The 8 consumer warps stage the
// activation scales once (after pdl_wait), then compute the oldest stage: warp w takes its
// 128-column blocks w and w + 8 (of the stage's 16), reads weight and activation fragments from
// the stage (row pitch 2112 bytes, 64 mod 128: a quarter-warp's 16-byte reads of rows g and g + 1
// hit distinct banks), runs q8_block_mma and the scale step into its running sums kb % 16 = w and
// w + 8, and releases the stage on its empty mbarrier (one arrival a warp): no global load in the
// loop. A tile's 16 sums are added in order through shared memory: the tile kernel's operations in
// its order, so results are bitwise those of fp8_gemv_q8's other kernels.
// kPdl: every thread lets the next kernel launch at once.
#pragma once

#include "common.cuh"
#include "fp8_gemv_q8.cuh"
#include "hymoe/gpu/fp8_gemv.h"
#include "mbarrier.cuh"
#include "mma.cuh"
#include "pdl.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kQ8StreamWarps = 8;                                   // consumers
inline constexpr int kQ8StreamThreads = (kQ8StreamWarps + 1) * kWarpSize;  // and the producer warp
inline constexpr int kQ8StreamSlab = 2048;  // columns (bytes) of a stage: 16 blocks of 128
inline constexpr int kQ8StreamPitch = kQ8StreamSlab + 64;
static_assert(kQ8StreamPitch % 128 == 64, "rows g and g + 1 of a quarter-warp's reads in distinct banks");
static_assert(kQ8StreamSlab / 128 == 2 * kQ8StreamWarps, "a warp's two blocks of a stage are its sums w, w + 8");

// A stage: 16 weight rows, then `tokens` activation rows (kQ8StreamPitch apart), then the 16
// weight scales of its columns.
__host__ __device__ constexpr int q8_stream_stage_bytes(int tokens) { return (16 + tokens) * kQ8StreamPitch + 64; }
// Dynamic shared memory: the ring, the tile's 16 sums (16 rows x tokens each), the activation
// scales of every 128-column block ([blocks][8]) and the barriers.
__host__ __device__ constexpr int q8_stream_red_bytes(int tokens) { return 16 * 16 * tokens * 4; }
__host__ __device__ constexpr int q8_stream_smem_bytes(int stages, int tokens, int k) {
  return stages * q8_stream_stage_bytes(tokens) + q8_stream_red_bytes(tokens) + (k + 127) / 128 * 8 * 4 +
         2 * stages * 8;
}

// The part of tile `tile` (tiles of all parts numbered in order) and the tile's first row in it.
__device__ __forceinline__ int q8_locate(const GemvQ8Args& a, int tile, int& row0) {
  int i = 0;
  while (i + 1 < a.parts && tile >= a.tile_end[i]) ++i;
  row0 = (tile - (i ? a.tile_end[i - 1] : 0)) * 16;
  return i;
}

template <bool kPdl>
__global__ void __launch_bounds__(kQ8StreamThreads, 2) fp8_gemv_q8_stream_kernel(const GemvQ8Args a, int stages) {
  if constexpr (kPdl) pdl_launch_dependents();
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int k = a.part[0].k, tokens = a.part[0].tokens;  // shared by the parts
  const int blocks = (k + 127) / 128, slabs = (k + kQ8StreamSlab - 1) / kQ8StreamSlab;
  const int stage_bytes = q8_stream_stage_bytes(tokens);
  float* const red = reinterpret_cast<float*>(smem + stages * stage_bytes);  // [16 sums][16 rows][tokens]
  float* const xscale = red + 16 * 16 * tokens;                                // [blocks][8]
  const uint32_t ring_s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t full_s = static_cast<uint32_t>(__cvta_generic_to_shared(xscale + blocks * 8));
  const uint32_t empty_s = full_s + 8 * stages;
  const int64_t tiles = a.tile_end[a.parts - 1];
  const int t_begin = static_cast<int>(tiles * blockIdx.x / gridDim.x);
  const int t_end = static_cast<int>(tiles * (blockIdx.x + 1) / gridDim.x);
  const int items = (t_end - t_begin) * slabs;  // stages this block consumes, in order
  // A tile of one slab whose rows are adjacent in memory (k <= 2048 and ldw == k in every part)
  // comes as one contiguous copy, its rows k bytes apart in the stage (a 2-way bank conflict when
  // k is a multiple of 128); otherwise one copy a row, kQ8StreamPitch apart.
  bool contiguous = slabs == 1;
  for (int i = 0; i < a.parts; ++i) contiguous = contiguous && a.part[i].ldw == k;
  const int pitch = contiguous ? k : kQ8StreamPitch;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbarrier_init(full_s + 8 * s, 1 + kWarpSize);  // the expect_tx arrival and 32 cp.async arrivals
      mbarrier_init(empty_s + 8 * s, kQ8StreamWarps);
    }
  }
  __syncthreads();

  if (warp == kQ8StreamWarps) {  // the producer: item i into slot i % stages once its last use is released
    // Item it's weights (announcing its activations' bytes too) and weight scales; its activations.
    auto weights = [&](int it) {
      const int slot = it % stages;
      int row0 = 0;
      const Fp8GemvQ8Params& p = a.part[q8_locate(a, t_begin + it / slabs, row0)];
      const int col = (it % slabs) * kQ8StreamSlab;
      const int bytes = min(kQ8StreamSlab, k - col);  // a multiple of 16
      const int rows = min(16, p.n - row0);
      const uint32_t full = full_s + 8 * slot, stage = ring_s + slot * stage_bytes;
      if (lane == 0) mbarrier_arrive_expect_tx(full, static_cast<uint32_t>((rows + tokens) * bytes));
      __syncwarp();  // the bytes are announced before any copy can complete them
      if (contiguous) {
        if (lane == 0)
          bulk_copy_g2s(stage, reinterpret_cast<const uint8_t*>(p.w) + int64_t{row0} * k,
                        static_cast<uint32_t>(rows * bytes), full);
      } else if (lane < rows) {
        const auto* src = reinterpret_cast<const uint8_t*>(p.w) + int64_t{row0 + lane} * p.ldw + col;
        bulk_copy_g2s(stage + lane * kQ8StreamPitch, src, static_cast<uint32_t>(bytes), full);
      }
      if (lane < 16) {
        const int kb = col / 128 + lane;
        const float* src = p.w_scales + int64_t{row0 / 128} * p.scale_ld + (kb < blocks ? kb : 0);
        cp_async4_shared(stage + (16 + tokens) * kQ8StreamPitch + 4 * lane, src, kb < blocks);
      }
      cp_async_arrive_noinc(full);
    };
    auto activations = [&](int it) {
      const int slot = it % stages;
      const Fp8GemvQ8Params& p = a.part[0];
      const int col = (it % slabs) * kQ8StreamSlab;
      const int bytes = min(kQ8StreamSlab, k - col);
      if (lane < tokens) {
        const auto* src = reinterpret_cast<const uint8_t*>(p.x) + int64_t{lane} * p.ldx + col;
        bulk_copy_g2s(ring_s + slot * stage_bytes + (16 + lane) * kQ8StreamPitch, src, static_cast<uint32_t>(bytes),
                      full_s + 8 * slot);
      }
    };
    const int first = min(stages, items);  // the first ring's weights before the previous kernel completes
    for (int it = 0; it < first; ++it) weights(it);
    if constexpr (kPdl) pdl_wait();
    for (int it = 0; it < first; ++it) activations(it);
    for (int it = first; it < items; ++it) {
      mbarrier_wait(empty_s + 8 * (it % stages), (it / stages - 1) & 1);
      weights(it);
      activations(it);
    }
    return;  // a block's copies complete on barriers its consumers wait for: none outlives it
  }

  if constexpr (kPdl) pdl_wait();
  for (int i = static_cast<int>(threadIdx.x); i < blocks * 8; i += kQ8StreamWarps * kWarpSize) {
    const int kb = i / 8, t = i % 8;
    xscale[i] = t < tokens ? load_dependent<kPdl>(a.part[0].x_scales + int64_t{kb} * a.part[0].x_scale_ld + t) : 0.0f;
  }
  asm volatile("bar.sync 1, %0;" ::"n"(kQ8StreamWarps * kWarpSize) : "memory");  // the consumers only
  const int g = lane / 4, c = lane % 4;
  float acc[2][4] = {};
  for (int it = 0; it < items; ++it) {
    const int slot = it % stages, slab = it % slabs, tile = t_begin + it / slabs;
    int row0 = 0;
    const Fp8GemvQ8Params& p = a.part[q8_locate(a, tile, row0)];
    mbarrier_wait(full_s + 8 * slot, (it / stages) & 1);
    const uint8_t* st = smem + slot * stage_bytes + c * 16;
    const float* ws = reinterpret_cast<const float*>(smem + slot * stage_bytes + (16 + tokens) * kQ8StreamPitch);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int local = warp + 8 * i;  // the block within the stage
      const int kb = slab * 16 + local;
      if (kb >= blocks) break;  // warp-uniform; the warp's second block is further right
      // Lanes past k (k is a multiple of 16: a lane's 16 columns are all in or all out) and
      // absent tokens take zeros; rows past n read whatever the stage holds and only feed outputs
      // never written.
      uint4 wl[2], wh[2], xv[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool in = kb * 128 + c * 16 + 64 * h < k;
        const uint8_t* at = st + local * 128 + 64 * h;
        wl[h] = in ? *reinterpret_cast<const uint4*>(at + g * pitch) : make_uint4(0, 0, 0, 0);
        wh[h] = in ? *reinterpret_cast<const uint4*>(at + (g + 8) * pitch) : make_uint4(0, 0, 0, 0);
        xv[h] = in && g < tokens ? *reinterpret_cast<const uint4*>(at + (16 + g) * kQ8StreamPitch)
                                 : make_uint4(0, 0, 0, 0);
      }
      float part[4];
      q8_block_mma(wl, wh, xv, part);
      const float sc0 = 2 * c < tokens ? ws[local] * xscale[kb * 8 + 2 * c] : 0.0f;
      const float sc1 = 2 * c + 1 < tokens ? ws[local] * xscale[kb * 8 + 2 * c + 1] : 0.0f;
      acc[i][0] = fmaf(part[0], sc0, acc[i][0]);
      acc[i][1] = fmaf(part[1], sc1, acc[i][1]);
      acc[i][2] = fmaf(part[2], sc0, acc[i][2]);
      acc[i][3] = fmaf(part[3], sc1, acc[i][3]);
    }
    __syncwarp();  // every lane's reads of the stage are done
    if (lane == 0) mbarrier_arrive(empty_s + 8 * slot);
    if (slab == slabs - 1) {  // the tile's last stage: its 16 sums in order (the tile kernel's)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float* const r = red + (warp + 8 * i) * 16 * tokens;
        if (2 * c < tokens) {
          r[g * tokens + 2 * c] = acc[i][0];
          r[(g + 8) * tokens + 2 * c] = acc[i][2];
        }
        if (2 * c + 1 < tokens) {
          r[g * tokens + 2 * c + 1] = acc[i][1];
          r[(g + 8) * tokens + 2 * c + 1] = acc[i][3];
        }
        acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
      }
      // The consumers only (named barrier 1), before and after the reads of red.
      asm volatile("bar.sync 1, %0;" ::"n"(kQ8StreamWarps * kWarpSize) : "memory");
      if (threadIdx.x < 128) {
        const int r = threadIdx.x / 8, t = threadIdx.x % 8;
        if (row0 + r < p.n && t < tokens) {
          float sum = 0.0f;
#pragma unroll
          for (int j = 0; j < 16; ++j) sum += red[(j * 16 + r) * tokens + t];
          reinterpret_cast<uint16_t*>(p.y)[t * p.ldy + row0 + r] = float_to_bf16_bits(sum);
        }
      }
      asm volatile("bar.sync 1, %0;" ::"n"(kQ8StreamWarps * kWarpSize) : "memory");
    }
  }
}

}  // namespace hymoe::gpu::kernels
