// Grouped expert GEMM kWgmmaTmaGroupedTx: a kernel written from the start to DeepGEMM's plan (its
// SM90 block-scaled FP8 GEMM ran 1.23-1.38x ScMW's TFLOP/s on the same routing), instead of one
// more variant of the warp-specialised kernel (fp8_block_gemm_wgmma_ws.cuh), whose ablations
// toward that plan each moved little (docs/experiments.md, grouped expert FP8 GEMM). Same
// operation and layouts as the other grouped kernels: permuted FP8 rows with the grouped
// activation-scale layout (fp8_quant.h), each expert's FP8 weight [n][k] with its 128 x 128 block
// scales, BF16 output rows.
//   Tiles: 128 x 128 of one expert (row tile y over every expert's rows, experts in order, as
//     the other grouped kernels; column tile x), K blocks of 128.
//   Clusters of two CTAs on row tiles 2p and 2p + 1 of one column tile (wgmma::tx_pair, pair
//     rows in groups of 4 for L2); persistent over the pairs. When both row tiles belong to one
//     expert they need the same weight tile: each CTA loads one 64-row half of it, multicast
//     into both CTAs' slot, halving the weight bytes each SM reads from L2 (ncu had DeepGEMM's
//     kernel and ScMW at 86-93% of L2 throughput). Otherwise (a pair across two
//     experts, or rank 1 past the last row tile: it then repeats rank 0's tile unstored) each
//     loads both halves of its own. Every consumer warp releases a slot on both CTAs' empty
//     barriers either way, so the two rings move in step and a multicast never lands in a slot
//     the peer still reads.
//   One transaction barrier per slot: one producer thread announces the slot's bytes and issues
//     the TMA copies of A's box (128 permuted rows from the expert's first row + m0; rows past
//     the expert's end belong to the next expert or are zero past the last row), of the tile's
//     A scales of the block and of B. No scale warp. The scales of block kb of expert e start at
//     kb * m_e floats, and a TMA box must start 16-byte aligned (an unaligned start traps), so
//     the box holds kM + 4 floats from the aligned element at or before row m0's and the
//     consumers read from there (+9-14% over loading them from global memory in the consumers).
//   Two consumer warpgroups (rows 0..63 / 64..127 of the tile): per K block the slot's
//     descriptors (32-bit low words: the slot index times the slot's size in 16-byte units), the
//     full wait, the thread's two row scales from the slot, 4 m64n128k32 wgmmas into part, the
//     wait for them, one arrival per warp on both CTAs' empty barriers, then acc += part *
//     a_scale(row) * b_scale (the other consumer's wgmmas run meanwhile). The weight scale comes
//     from global memory a K block ahead (staging each tile's in shared memory instead was no
//     faster).
//   Output: through 16 KB of shared memory per consumer, whole 256-byte row segments per warp
//     store (ws_store_tile_smem), masked to the expert's rows and to n.
// Measured (H200, docs/experiments.md): with the warpgroup index by shuffle (descriptors in
// uniform registers) 40-43 / 57-61 / 66-68% of the per-tensor FP8 ceiling at 4K / 16K / 64K
// tokens, ScMW 45-46 / 61-65 / 65-69% in the same run, DeepGEMM 55 / 81 / 84%; opt-in.
#pragma once

#include <cuda.h>  // CUtensorMap (the type only: no driver call here)

#include "fp8_block_gemm_wgmma_ws.cuh"
#include "hymoe/gpu/fp8_quant.h"

namespace hymoe::gpu::kernels {

struct TxCfg {
  static constexpr int kM = 128, kN = 128;
  static constexpr int kStages = 5;
  static constexpr int kThreads = 384;  // producer warpgroup + two consumers
  static constexpr int kABytes = kM * kWgK, kBBytes = kN * kWgK;
  static constexpr int kStageBytes = kABytes + kBBytes;  // 32 KB: slots stay 1024-aligned
  static constexpr int kBHalfBytes = kBBytes / 2;        // one CTA's multicast half of B
  static constexpr int kRingBytes = kStages * kStageBytes;
  static constexpr int kOutBytes = 2 * wgmma::kOutStageBytes;
  // A scales of a slot: a box of kM + 4 floats from the 16-byte aligned element at
  // or before the tile's first row (a TMA box must start 16-byte aligned), in 640 bytes (TMA
  // destinations 128-byte aligned).
  static constexpr int kScaleBox = kM + 4;
  static constexpr int kScaleSlotBytes = 640;
  static constexpr int kScaleBytes = kStages * kScaleSlotBytes;
  static constexpr int kBarBytes = 2 * kStages * 8;
  // [slack to the first 1024-aligned address][ring][scale slots][output staging][barriers]
  static constexpr int kSmemBytes =
      wgmma::kSw128AtomBytes + kRingBytes + kScaleBytes + kOutBytes + kBarBytes;
  static constexpr uint32_t kTxBytes = kStageBytes + 4 * kScaleBox;  // per full phase
  static constexpr int kEmptyArrivals = 16;  // the consumer warps of both CTAs
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static_assert(kSmemBytes <= 227 * 1024, "Hopper's largest dynamic shared memory per block");
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= kThreads * (65536 / kThreads / 8 * 8),
                "the register budgets fit the CTA's launch allocation");
};

// This CTA's tile of each pair of its cluster (pair ids cluster_index(), + clusters(), ...).
struct TxTiles {
  const GroupedGemmParams* gp;
  int row_tiles, tiles_n, count;
  int rank;
  wgmma::GroupedCursor cursor{};
  int expert = 0, m0 = 0, n0 = 0;
  bool multicast = false;  // both tiles of the pair in one expert: B shared
  bool store = false;      // false: rank 1 past the last row tile, repeating rank 0's tile
  __device__ __forceinline__ void at(int id) {
    const wgmma::TxPair p = wgmma::tx_pair(id, row_tiles, tiles_n);
    const int y0 = 2 * p.pair_row;
    store = y0 + rank < row_tiles;
    const int y = store ? y0 + rank : y0;
    wgmma::grouped_seek(cursor, y, gp->offsets, gp->experts, TxCfg::kM);
    expert = cursor.expert;
    m0 = (y - cursor.first) * TxCfg::kM;
    n0 = p.x * TxCfg::kN;
    // (Both CTAs find the same: rows y0 and y0 + 1 inside the cursor's expert.)
    multicast = y0 + 1 < row_tiles && y0 >= cursor.first &&
                y0 + 1 < cursor.first + wgmma::grouped_tiles(gp->offsets, cursor.expert, TxCfg::kM);
  }
};

// The producer (one thread): every K block of every tile of this CTA into the ring: A's box, the
// tile's A scales of the block (a box of kScaleBox floats from the 16-byte aligned element at or
// before its first row) and B's two halves (multicast: this CTA's half into both CTAs' slot).
__device__ __forceinline__ void tx_produce(const GroupedGemmParams& gp, TxTiles tiles,
                                           uint32_t ring, uint32_t scale_slots, uint32_t bars,
                                           const CUtensorMap* map_a, const CUtensorMap* map_s,
                                           const CUtensorMap* maps_b) {
  const int kblocks = (gp.k + kWgK - 1) / kWgK;
  wgmma::RingPos pos{0, 0};
  const CUtensorMap* acquired = nullptr;
  for (int id = cluster_index(); id < tiles.count; id += clusters()) {
    tiles.at(id);
    const CUtensorMap* map_b = maps_b + tiles.expert;
    if (map_b != acquired) {
      tensormap_acquire(map_b);
      acquired = map_b;
    }
    const int off = gp.offsets[tiles.expert], a_row = off + tiles.m0;
    const int rows = gp.offsets[tiles.expert + 1] - off;
    // Block kb's A scales of the tile's rows: [kb][m_e] of the expert's block, from row m0.
    int s_col = static_cast<int>(grouped_scale_offset(kblocks, off, tiles.expert)) + tiles.m0;
    for (int kb = 0; kb < kblocks; ++kb, s_col += rows) {
      mbarrier_wait(bars + (TxCfg::kStages + pos.stage) * 8, wgmma::empty_wait_parity(pos));
      const uint32_t full = bars + pos.stage * 8;
      const uint32_t slot = ring + pos.stage * TxCfg::kStageBytes;
      const uint32_t b_slot = slot + TxCfg::kABytes;
      mbarrier_arrive_expect_tx(full, TxCfg::kTxBytes);
      tma_load_2d(slot, map_a, full, kb * kWgK, a_row);
      tma_load_2d(scale_slots + pos.stage * TxCfg::kScaleSlotBytes, map_s, full, s_col & ~3, 0);
      if (tiles.multicast) {
        tma_load_2d_multicast(b_slot + tiles.rank * TxCfg::kBHalfBytes, map_b, full, kb * kWgK,
                              tiles.n0 + 64 * tiles.rank, 0x3);
      } else {
        tma_load_2d(b_slot, map_b, full, kb * kWgK, tiles.n0);
        tma_load_2d(b_slot + TxCfg::kBHalfBytes, map_b, full, kb * kWgK, tiles.n0 + 64);
      }
      pos = wgmma::ring_next(pos, TxCfg::kStages);
    }
  }
}

// Consumer warpgroup cw (rows 64cw..64cw+63 of each tile), thread t = 0..127 of it.
__device__ __forceinline__ void tx_consume(const GroupedGemmParams& gp, TxTiles tiles,
                                           uint32_t ring, const float* scale_slots, uint32_t bars,
                                           uint8_t* out_stage, int cw, int t) {
  const int kblocks = (gp.k + kWgK - 1) / kWgK;
  // Descriptors: the high word is the same for every operand tile (stride, swizzle); the low
  // word is the start address (>> 4) of slot 0's A rows 64cw.. / B rows 0.., plus per slot
  // kStageBytes >> 4, plus 2 per k32 step (32 bytes).
  const uint64_t a_desc0 = wgmma::sw128_kmajor_desc(ring + cw * 64 * wgmma::kSw128RowBytes);
  const uint64_t b_desc0 = wgmma::sw128_kmajor_desc(ring + TxCfg::kABytes);
  const uint32_t desc_hi = static_cast<uint32_t>(a_desc0 >> 32);
  const uint32_t a_lo0 = static_cast<uint32_t>(a_desc0), b_lo0 = static_cast<uint32_t>(b_desc0);
  const int r0 = cw * 64 + wgmma::acc_row(t, 0), r1 = cw * 64 + wgmma::acc_row(t, 2);
  const bool lane0 = t % 32 == 0;
  const uint32_t peer = static_cast<uint32_t>(tiles.rank) ^ 1u;
  wgmma::RingPos pos{0, 0};
  float acc[64], part[64];
  for (int id = cluster_index(); id < tiles.count; id += clusters()) {
    tiles.at(id);
    Fp8BlockGemmParams q;
    grouped_expert_params(gp, tiles.expert, q);
    // The weight scale a K block ahead (one address for every thread: one cached load).
    const float* b_scale = q.b_scale + static_cast<int64_t>(tiles.n0 / kWgN) * q.b_scale_ld;
    float b_next = __ldg(b_scale);
    const float* b_ahead = b_scale + 1;
    // Where the tile's row 0 lies in the slot's scale box: the box starts at the aligned element
    // at or before it (the expert's block is 16-byte aligned, m0 a multiple of 128).
    int shift = 0;
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    for (int kb = 0; kb < kblocks; ++kb, shift = (shift + q.m) & 3) {
      const float b = b_next;
      if (kb + 1 < kblocks) b_next = __ldg(b_ahead++);
      const uint32_t slot_lo = static_cast<uint32_t>(pos.stage) * (TxCfg::kStageBytes >> 4);
      const uint32_t a_lo = a_lo0 + slot_lo, b_lo = b_lo0 + slot_lo;
      mbarrier_wait(bars + pos.stage * 8, wgmma::full_wait_parity(pos));
      // (Rows past the expert's end read what follows in the layout: never stored.)
      const float* sc = scale_slots + pos.stage * (TxCfg::kScaleSlotBytes / 4) + shift;
      const float a0 = sc[r0], a1 = sc[r1];
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < kWgK / 32; ++j)
        wgmma_m64n128k32_e4m3(part, (static_cast<uint64_t>(desc_hi) << 32) | (a_lo + 2 * j),
                              (static_cast<uint64_t>(desc_hi) << 32) | (b_lo + 2 * j), j > 0);
      wgmma_commit();
      const float s0 = a0 * b, s1 = a1 * b;
      wgmma_wait<0>();
      wgmma_hold(part);
      __syncwarp();  // every lane's scale reads precede the release
      if (lane0) {
        const uint32_t empty = bars + (TxCfg::kStages + pos.stage) * 8;
        mbarrier_arrive(empty);
        mbarrier_arrive_peer(empty, peer);
      }
      pos = wgmma::ring_next(pos, TxCfg::kStages);
      wg_promote(acc, part, s0, s1);
    }
    if (tiles.store) ws_store_tile_smem<TxCfg>(q, acc, out_stage, tiles.m0, tiles.n0, cw, t);
  }
}

// Launched in clusters of two over an even grid. map_a: all permuted rows [rows][k] with 128 x
// 128-byte boxes (128-byte swizzle); maps_b[e]: expert e's weight [n][k] with 64 x 128-byte
// boxes (one multicast half), in global memory (the host copies them before the launch).
// row_tiles: the 128-row tiles of all experts.
__global__ void __launch_bounds__(TxCfg::kThreads, 1)
    fp8_grouped_gemm_tx_kernel(const __grid_constant__ GroupedGemmParams gp, int row_tiles,
                               const __grid_constant__ CUtensorMap map_a,
                               const __grid_constant__ CUtensorMap map_s,
                               const CUtensorMap* maps_b) {
  extern __shared__ __align__(16) uint8_t tx_smem[];
  const int tid = threadIdx.x, wg = warpgroup_index(), t = tid % 128;
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(tx_smem));
  const uint32_t pad = (wgmma::kSw128AtomBytes - smem_base % wgmma::kSw128AtomBytes) %
                       wgmma::kSw128AtomBytes;
  const uint32_t ring = smem_base + pad;
  const uint32_t scale_slots = ring + TxCfg::kRingBytes;
  uint8_t* out_base = tx_smem + pad + TxCfg::kRingBytes + TxCfg::kScaleBytes;
  // full[s] at bars + 8s, empty[s] at bars + 8 (kStages + s).
  const uint32_t bars = scale_slots + TxCfg::kScaleBytes + TxCfg::kOutBytes;
  if (tid == 0) {
    for (int s = 0; s < TxCfg::kStages; ++s) {
      mbarrier_init(bars + s * 8, 1);
      mbarrier_init(bars + (TxCfg::kStages + s) * 8, TxCfg::kEmptyArrivals);
    }
  }
  cluster_sync();  // the peer's barriers exist before this CTA's first multicast or remote arrival
  const int tiles_n = (gp.n + TxCfg::kN - 1) / TxCfg::kN;
  const TxTiles tiles{&gp, row_tiles, tiles_n, wgmma::tx_pair_count(row_tiles, tiles_n),
                      static_cast<int>(cluster_rank())};
  if (wg == 0) {
    setmaxnreg_dec<TxCfg::kProducerRegs>();
    if (t == 0) tx_produce(gp, tiles, ring, scale_slots, bars, &map_a, &map_s, maps_b);
  } else {
    setmaxnreg_inc<TxCfg::kConsumerRegs>();
    const auto* scales = reinterpret_cast<const float*>(tx_smem + pad + TxCfg::kRingBytes);
    tx_consume(gp, tiles, ring, scales, bars, out_base + (wg - 1) * wgmma::kOutStageBytes, wg - 1,
               t);
  }
  // No CTA leaves while its peer may still multicast into it or arrive on its barriers.
  cluster_sync();
}

}  // namespace hymoe::gpu::kernels
