// Block-scaled FP8 GEMM on Hopper's warpgroup MMA (wgmma, sm_90a): the same operation, layouts
// and promotion as fp8_block_gemm.cuh (mma.sync), at the rate only wgmma reaches on sm_90.
//   Tile: 128 tokens x 128 outputs per block, K in 128-wide blocks (one weight scale per tile and
//   block). Two warpgroups (256 threads), warpgroup w owning rows 64w..64w+63; or, for small row
//   counts, 64 x 128 tiles of one warpgroup, two blocks per SM (WgCfg<1>). Every thread
//   copies its share of each stage with cp.async into a 5-slot ring (4 blocks ahead), 128-byte
//   swizzled (wgmma_layout.h); per K block each warpgroup issues 4 wgmma m64n128k32 (E4M3 x E4M3
//   -> FP32) into a fresh partial accumulator (two of them, alternating) and, while those run,
//   promotes the previous block's: acc += part * a_scale[row] * b_scale (DeepSeek-V3's FP32
//   promotion once per 128-K block), BF16 output.
//   cp.async writes reach wgmma through: cp.async.wait_group (this thread's copies landed),
//   fence.proxy.async (its generic-proxy writes visible to wgmma's async proxy), __syncthreads.
//   A slot is refilled only after every warpgroup waited for the wgmmas that read it (the
//   barrier follows each warpgroup's wait for block kb - 1). Rows past m or n and K past k are
//   zero-filled by cp.async; stores are masked.
#pragma once

#include "common.cuh"
#include "fp8_block_gemm.cuh"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/moe.h"
#include "hymoe/gpu/wgmma_layout.h"
#include "mma.cuh"
#include "wgmma.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kWgN = 128, kWgK = 128;
static_assert(kWgK == wgmma::kSw128RowBytes, "one K block is one 128-byte swizzled row");

// The two shapes: Wgs warpgroups of 64 rows each (2: 128-row tiles, one block per SM; 1: 64-row
// tiles for small row counts, two blocks per SM).
template <int Wgs>
struct WgCfg {
  static constexpr int kWgs = Wgs;
  static constexpr int kM = 64 * Wgs;             // rows per tile
  static constexpr int kThreads = 128 * Wgs;      // the consumer warpgroups, which also load
  static constexpr int kBlocksPerSm = Wgs == 2 ? 1 : 2;
  static constexpr int kStages = Wgs == 2 ? 5 : 4;  // ring slots
  static constexpr int kAhead = kStages - 1;      // blocks in flight ahead of the one computed
  static constexpr int kATileBytes = kM * kWgK;   // 1024-aligned (whole swizzle atoms)
  static constexpr int kStageBytes = kATileBytes + kWgN * kWgK;
  // + one swizzle atom of slack: the ring starts at the first 1024-aligned shared address.
  static constexpr int kSmemBytes = kStages * kStageBytes + wgmma::kSw128AtomBytes;
};

// Copy K block kb of A rows m0.. and B rows n0.. into stage (a 1024-aligned shared address):
// 8 chunks of 16 bytes per row, 8 consecutive threads per row, each chunk at its swizzled place.
template <class Cfg>
__device__ __forceinline__ void wg_load_stage(const Fp8BlockGemmParams& p, uint8_t* stage, int m0,
                                              int n0, int kb, int tid) {
  const auto* a = reinterpret_cast<const uint8_t*>(p.a);
  const auto* b = reinterpret_cast<const uint8_t*>(p.b);
  const int chunk = tid % 8, col = chunk * 16, gk = kb * kWgK + col;
  const bool k_ok = gk < p.k;
#pragma unroll
  for (int i = 0; i < Cfg::kM * 8 / Cfg::kThreads; ++i) {
    const int row = tid / 8 + i * (Cfg::kThreads / 8), gr = m0 + row;
    const bool ok = k_ok && gr < p.m;
    cp_async16(stage + wgmma::sw128_offset(row, col), ok ? a + gr * p.lda + gk : a, ok);
  }
#pragma unroll
  for (int i = 0; i < kWgN * 8 / Cfg::kThreads; ++i) {
    const int row = tid / 8 + i * (Cfg::kThreads / 8), gr = n0 + row;
    const bool ok = k_ok && gr < p.n;
    cp_async16(stage + Cfg::kATileBytes + wgmma::sw128_offset(row, col),
               ok ? b + gr * p.ldb + gk : b, ok);
  }
}

// Issue K block kb's wgmmas into part (4 x k32 steps of both operand tiles of its ring slot).
template <class Cfg>
__device__ __forceinline__ void wg_issue(float (&part)[64], uint32_t ring_addr, int kb, int wg) {
  const uint32_t stage_addr = ring_addr + (kb % Cfg::kStages) * Cfg::kStageBytes;
  const uint32_t a_addr = stage_addr + wg * 64 * wgmma::kSw128RowBytes;  // 8 KB: 1024-aligned
  const uint32_t b_addr = stage_addr + Cfg::kATileBytes;
  wgmma_fence();
#pragma unroll
  for (int j = 0; j < kWgK / 32; ++j)
    wgmma_m64n128k32_e4m3(part, wgmma::sw128_kmajor_desc(a_addr + 32 * j),
                          wgmma::sw128_kmajor_desc(b_addr + 32 * j), j > 0);
  wgmma_commit();
}

// The block scales of a thread's two accumulator rows, r0 = row0 + acc_row(t, 0) and r1 = row0 +
// acc_row(t, 2) of the tile at (m0, n0) (row0: its warpgroup's first row in the tile): block
// kb's are a_scale[kb][m0 + r] * b_scale[n0 / 128][kb], 0 for rows past m (their products are 0
// anyway). Shared by the wgmma kernels (fp8_block_gemm_wgmma_ws.cuh too).
struct WgRowScales {
  const float* a_scale;  // row m0 of A's scales (block kb at + kb * a_ld)
  const float* b_scale;  // the column tile's weight scales
  int64_t a_ld;
  int r0, r1;
  bool r0_ok, r1_ok;
  __device__ __forceinline__ WgRowScales(const Fp8BlockGemmParams& p, int m0, int n0, int row0,
                                         int t)
      : a_scale(p.a_scale + m0),
        b_scale(p.b_scale + static_cast<int64_t>(n0 / kWgN) * p.b_scale_ld),
        a_ld(p.a_scale_ld),
        r0(row0 + wgmma::acc_row(t, 0)),
        r1(row0 + wgmma::acc_row(t, 2)),
        r0_ok(m0 + r0 < p.m),
        r1_ok(m0 + r1 < p.m) {}
  // Block kb's from global memory.
  __device__ __forceinline__ void operator()(int kb, float& s0, float& s1) const {
    const float ws = b_scale[kb];
    const float* sa = a_scale + static_cast<int64_t>(kb) * a_ld;
    s0 = r0_ok ? sa[r0] * ws : 0.0f;
    s1 = r1_ok ? sa[r1] * ws : 0.0f;
  }
  // The same from a copy of one block's scales (sa: the tile's A scales in row order; ws: B's).
  __device__ __forceinline__ void from(const float* sa, float ws, float& s0, float& s1) const {
    s0 = r0_ok ? sa[r0] * ws : 0.0f;
    s1 = r1_ok ? sa[r1] * ws : 0.0f;
  }
};

// acc += part * scale of its row (registers with (i / 2) odd hold the thread's second row);
// N = 32: an m64n64 partial into acc's first 32 registers.
template <int N>
__device__ __forceinline__ void wg_promote(float (&acc)[64], const float (&part)[N], float s0,
                                           float s1) {
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] += part[i] * (((i / 2) % 2) ? s1 : s0);
}

// One Cfg::kM x 128 output tile at (m0, n0); smem: Cfg::kSmemBytes of dynamic shared memory.
// Per K block kb (two partial accumulators, alternating, so that block kb - 1 is promoted while
// the tensor cores run block kb):
//   wait for this thread's copies of kb; fence.proxy.async; __syncthreads (all copies of kb
//   landed; every warpgroup has waited for its wgmmas of kb - 1)
//   issue kb's 4 wgmmas into cur
//   copy block kb + kAhead into the slot of block kb + kAhead - kStages = kb - 1
//   promote prev (block kb - 1, complete) with kb - 1's scales
//   wgmma.wait_group 0 (nothing stays in flight from one step to the next: ptxas then neither
//   serialises the wgmmas nor injects waits, as it did when a wait_group 1 left a group in
//   flight across the loop's back edge).
// A warpgroup's 64 x (N / 2) accumulator tile (rows from row0, columns from n0; t: the thread's
// index in its warpgroup) as masked BF16 stores: register pairs (i, i + 1) are adjacent columns
// of one row, stored as one 32-bit word where the row layout allows. N = 64: 64 x 128 (m64n128),
// 96: 64 x 192 (m64n192). Regs = 32: a 64 x 64 tile (the first 32 registers of an accumulator:
// an m64n64 one).
template <int Regs = 0, int N>
__device__ __forceinline__ void wg_store_tile(const Fp8BlockGemmParams& p, const float (&acc)[N],
                                              int row0, int n0, int t) {
  constexpr int kRegs = Regs > 0 ? Regs : N;
  auto* d = reinterpret_cast<uint16_t*>(p.d);
  const bool pairs = (p.ldd % 2 == 0) && (reinterpret_cast<uintptr_t>(p.d) % 4 == 0);
#pragma unroll
  for (int i = 0; i < kRegs; i += 2) {
    const int row = row0 + wgmma::acc_row(t, i), col = n0 + wgmma::acc_col(t, i);
    if (row >= p.m || col >= p.n) continue;
    uint16_t* out = d + static_cast<int64_t>(row) * p.ldd + col;
    if (pairs && col + 1 < p.n) {
      *reinterpret_cast<uint32_t*>(out) = pack_bf16x2(acc[i], acc[i + 1]);
    } else {
      out[0] = float_to_bf16_bits(acc[i]);
      if (col + 1 < p.n) out[1] = float_to_bf16_bits(acc[i + 1]);
    }
  }
}

template <class Cfg>
__device__ __forceinline__ void fp8_block_gemm_wgmma_tile(const Fp8BlockGemmParams& p, int m0,
                                                          int n0, uint8_t* smem) {
  const int tid = threadIdx.x, wg = warpgroup_index(), t = tid % 128;
  const int kblocks = (p.k + kWgK - 1) / kWgK;
  // The ring at the first 1024-aligned shared address (the swizzle atoms and descriptors need it).
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t pad = (wgmma::kSw128AtomBytes - (smem_base % wgmma::kSw128AtomBytes)) %
                       wgmma::kSw128AtomBytes;
  uint8_t* ring = smem + pad;
  const uint32_t ring_addr = smem_base + pad;

  // Scales of block kb for this thread's two output rows.
  const WgRowScales scales(p, m0, n0, wg * 64, t);

  float acc[64], part0[64], part1[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = part0[i] = part1[i] = 0.0f;

#pragma unroll
  for (int s = 0; s < Cfg::kAhead; ++s) {
    if (s < kblocks) wg_load_stage<Cfg>(p, ring + s * Cfg::kStageBytes, m0, n0, s, tid);
    cp_async_commit();  // (empty groups keep the count uniform)
  }
  // One K block: its wgmmas into cur; under them the next copy and the promotion of the previous
  // block (prev, complete); then the wait for cur, so that no wgmma is in flight across steps.
  auto step = [&](int kb, float (&cur)[64], float (&prev)[64]) {
    cp_async_wait<Cfg::kAhead - 1>();  // this thread's copies of block kb have landed
    fence_proxy_async();
    __syncthreads();
    wg_issue<Cfg>(cur, ring_addr, kb, wg);
    const int next = kb + Cfg::kAhead;
    if (next < kblocks)
      wg_load_stage<Cfg>(p, ring + (next % Cfg::kStages) * Cfg::kStageBytes, m0, n0, next, tid);
    cp_async_commit();
    if (kb > 0) {
      float s0, s1;
      scales(kb - 1, s0, s1);
      wg_promote(acc, prev, s0, s1);
    }
    wgmma_wait<0>();
    wgmma_hold(cur);
  };
  // An odd count starts with one step into part1 (nothing to promote), then pairs of steps.
  int kb = 0;
  if (kblocks % 2 == 1) step(kb++, part1, part0);
  for (; kb < kblocks; kb += 2) {
    step(kb, part0, part1);
    step(kb + 1, part1, part0);
  }
  {
    float s0, s1;
    scales(kblocks - 1, s0, s1);
    wg_promote(acc, part1, s0, s1);
  }
  cp_async_wait<0>();  // (only empty groups remain; leave none in flight at exit)

  wg_store_tile(p, acc, m0 + wg * 64, n0, t);
}

inline constexpr int kWgRasterGroup = 8;  // row tiles per launch-order group (raster_tile)

// Dense: a 1-D grid over the tiles in raster_tile's order.
template <int Wgs>
__global__ void __launch_bounds__(WgCfg<Wgs>::kThreads, WgCfg<Wgs>::kBlocksPerSm)
    fp8_block_gemm_wgmma_kernel(Fp8BlockGemmParams p) {
  using Cfg = WgCfg<Wgs>;
  extern __shared__ __align__(16) uint8_t wg_smem[];
  const int tiles_m = (p.m + Cfg::kM - 1) / Cfg::kM, tiles_n = (p.n + kWgN - 1) / kWgN;
  const wgmma::TileCoord tile =
      wgmma::raster_tile(static_cast<int>(blockIdx.x), tiles_m, tiles_n, kWgRasterGroup);
  fp8_block_gemm_wgmma_tile<Cfg>(p, tile.m * Cfg::kM, tile.n * kWgN, wg_smem);
}

// Grouped: each block runs one row tile of one expert's rows against that expert's weight.
template <int Wgs>
__global__ void __launch_bounds__(WgCfg<Wgs>::kThreads, WgCfg<Wgs>::kBlocksPerSm)
    fp8_grouped_gemm_wgmma_kernel(GroupedGemmParams gp) {
  using Cfg = WgCfg<Wgs>;
  extern __shared__ __align__(16) uint8_t wg_smem[];
  Fp8BlockGemmParams p;
  const int m0 = grouped_tile<Cfg::kM>(gp, p);
  if (m0 < 0) return;
  fp8_block_gemm_wgmma_tile<Cfg>(p, m0, blockIdx.x * kWgN, wg_smem);
}

}  // namespace hymoe::gpu::kernels
