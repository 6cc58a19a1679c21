// Warp-specialised, persistent variant of the wgmma block-scaled FP8 GEMM (fp8_block_gemm_wgmma.cuh:
// the same operation, tile shape, shared-memory layout, descriptors and promotion). That kernel
// has every warp load, wait and compute in turn (one __syncthreads per K block); here the roles are
// split, Hopper's usual design:
//   warpgroup 0, the producer (setmaxnreg down to 40 registers): cp.async of each K block's A and
//     B tiles (128 rows x 128 bytes each, 128-byte swizzle) into a 6-slot ring; after each slot's
//     copies, cp.async.mbarrier.arrive.noinc on the slot's full barrier (128 arrivals: one per
//     producer thread, each when that thread's copies landed). Before refilling a slot it waits
//     on the slot's empty barrier.
//   warpgroups 1 and 2, the consumers (setmaxnreg up to 232): rows 0..63 / 64..127 of the tile.
//     Per K block: read this block's scales (global loads, their latency under the wait), wait on
//     the full barrier, fence.proxy.async (the cp.async writes are generic-proxy writes, wgmma
//     reads through the async proxy), 4 wgmma m64n128k32 into a fresh partial accumulator,
//     wgmma.wait_group 0, one arrival per warp on the slot's empty barrier (8 per phase), then
//     acc += part * a_scale[row] * b_scale. While one consumer promotes, the other's wgmmas run.
//   Persistent: grid = min(tiles, SMs x blocks per SM); block b runs tiles b, b + grid, ... (dense: raster_tile's
//   L2-friendly order; grouped: row tile y = id / tiles_n of all experts, column x = id % tiles_n),
//   the ring carrying on from one tile to the next, so the producer loads the next tile while the
//   consumers store the last one. Both roles walk the same tiles and K blocks, one slot per K
//   block (wgmma_layout.h: RingPos, the parity each side waits for, GroupedCursor).
// WsCfg<1> (kWgmmaWs64): one consumer warpgroup, 64-row tiles, a 4-slot ring of 24 KB slots, two
// blocks per SM (the other block's consumer plays the second consumer's part), promotion under
// the next block's wgmmas.
// Rows past m or n and K past k are zero-filled by cp.async (grouped: rows past an expert's end
// belong to the next expert, p.m stops them); stores are masked.
// Opt-in switches of the grouped TMA kernel (kWgmmaWsTmaGroupedSc / X / ScX / ScXH):
// WsCfg::kSmemScales (block scales through the ring, ws_produce_scales), WsGroupedTiles'
// ExpertMajor (wgmma::grouped_expert_major's tile order), WsCfg::kSplit64 (<= 64-row tiles as
// two 64 x 64 column halves).
// The cross-step schedule (kWgmmaWsTmaGroupedC / ScC / ScXC, dense kWgmmaWsTmaC): WsCfg::kCross,
// one wgmma group kept in flight across each K step (ws_consume's cross_loop), because ncu at 4K
// tokens showed each consumer draining its wgmmas every block (wait_group 0) and then stalling on
// scale loads, promotion and the next full wait before issuing again.
// A multicast (kWgmmaWsTmaGroupedScCM, WsCfg::kPair): ScC in clusters of two
// CTAs on adjacent column tiles of one row tile (WsPairedTmaTiles). Each CTA loads half of the A
// box (64 rows) and multicasts it into both CTAs' slot; B stays per CTA. Every K block then reads
// 8 KB of A from L2 per CTA instead of 16 (ncu of ScC: L2 throughput 89%, the kernel's limit at
// 4K tokens). A slot is refilled only when the consumers of both CTAs released it: each consumer
// warp arrives on its own and on the peer's empty barrier (kEmptyArrivals = 16; the peer arrival
// at CTA scope: with .release.cluster every arrival waited on a MEMBAR and ScCM ran 0.7x of ScC).
// Equal to ScC at 4K tokens, 1-3 points above at 16K-64K: the A traffic it halves was not ScC's
// limit.
// 128 x 192 tiles (kWgmmaWsTmaGroupedScMW, WsCfg::kN = 192; GroupedFp8Gemm's kAuto): ScCM's
// clusters with m64n192 wgmmas (17% fewer ring bytes per FLOP: the ring's fill limits ScCM), a
// 5-slot ring of 40 KB slots, one scale warp, and one partial accumulator (acc and part take 192
// of the 232 registers): ws_consume_wide waits for each K block's wgmmas before promoting them. A tile
// spans two weight-scale blocks (the second from column 128 or 64). Pairs run over the tiles in
// row-major order (wgmma::pair_tile), so an odd column-tile count (11 for gate / up's 2048
// columns) costs at most one tile past n per launch, not one per row tile. Its output leaves
// through shared memory in 128-byte row segments (ws_store_wide_smem).
#pragma once

#include <cuda.h>  // CUtensorMap (the type only: no driver call here)

#include <type_traits>

#include "fp8_block_gemm_wgmma.cuh"

namespace hymoe::gpu::kernels {

// Consumers warpgroups of 64 rows each: 2 (128-row tiles, one block per SM) or 1 (64-row tiles
// for short row counts and small experts, two blocks per SM).
template <int Consumers, bool Tma = false, bool SmemStore = false, bool SmemScales = false,
          bool Split64 = false, bool Cross = false, bool Pair = false, int TileN = 128,
          int ScaleWarps = 3>
struct WsCfg {
  static constexpr int kConsumers = Consumers;
  static constexpr bool kTma = Tma;                         // TMA loads instead of cp.async
  // Each K block's block scales in the ring beside its tiles (the producer's warps 1..3 copy
  // them in turn, ws_produce_scales), read by the consumers from shared memory instead of
  // global loads in their loop (kWgmmaWsTmaGroupedSc / ScX).
  static constexpr bool kSmemScales = SmemScales;
  static_assert(!SmemScales || Tma, "the scale copies ride on the TMA producer's barriers");
  // A tile of at most 64 rows (an expert's remainder) split by columns instead of rows: both
  // consumers take rows 0..63, consumer cw columns 64cw..64cw+63 (m64n64 wgmmas: half a full
  // tile's tensor work) (kWgmmaWsTmaGroupedScXH).
  static constexpr bool kSplit64 = Split64;
  static_assert(!Split64 || (Consumers == 2 && !SmemStore), "two consumers, register stores");
  // The cross-step schedule (ws_consume's cross-step loop, kWgmmaWsTmaGroupedC / ScC / ScXC): each
  // consumer keeps one wgmma group in flight across the K step, block kb + 1's wgmmas issued
  // before the wait for kb (wgmma.wait_group 1), kb promoted under them, kb's slot released
  // only after that wait (one step later than the other schedules).
  static constexpr bool kCross = Cross;
  // kWgmmaWsTmaGroupedScCM: clusters of two CTAs sharing each K block's A tile.
  static constexpr bool kPair = Pair;
  static_assert(!Pair || (Tma && Consumers == 2 && SmemStore == (TileN == 192) && !Split64),
                "A multicast: two consumers, TMA loads, full tiles, staged stores on 192 columns");
  static_assert(!Cross || (Consumers == 2 && !SmemStore && !Split64),
                "two consumers, register stores, full tiles: three 64-register accumulators");
  // The output tile through shared memory (16 KB per consumer, wgmma::out_stage_offset; kN =
  // 192: 8 KB per consumer in three passes, wgmma::out_pass_offset, always on) and coalesced
  // 16-byte stores, instead of 4-byte stores straight from the fragments.
  static constexpr bool kSmemStore = SmemStore;
  static constexpr int kM = 64 * kConsumers;                // rows per tile
  // Columns per tile: 128, or 192 (kWgmmaWsTmaGroupedScMW: m64n192 wgmmas, 17% fewer ring bytes
  // per FLOP; a tile then spans two weight-scale blocks, the split at column 128 or 64).
  static constexpr int kN = TileN;
  static_assert(TileN == 128 || (TileN == 192 && Pair && !Cross),
                "192-column tiles: the A-multicast kernel, one partial accumulator (96 + 96 registers)");
  static constexpr int kThreads = 128 * (kConsumers + 1);   // + the producer warpgroup
  static constexpr int kBlocksPerSm = Consumers == 2 ? 1 : 2;
  static constexpr int kConsumerWarps = 4 * kConsumers;
  // Arrivals per empty-barrier phase: each consumer warp's (kPair: of both CTAs).
  static constexpr int kEmptyArrivals = (Pair ? 2 : 1) * kConsumerWarps;
  static constexpr int kProducerThreads = 128;              // the producer warpgroup
  // Arrivals per full-barrier phase: every producer thread's cp.async.mbarrier.arrive, or the
  // one arrive.expect_tx of the TMA thread (the bytes then complete the phase), plus (kSmemScales)
  // the cp.async.mbarrier.arrive of each lane of the scale warp that copies that block.
  static constexpr int kScaleWarpThreads = 32;
  static constexpr int kStages = TileN == 192 ? 5 : Consumers == 2 ? 6 : 4;
  // The producer warpgroup's warps 1..kScaleWarps (ws_produce_scales): slot s is warp
  // s % kScaleWarps's (WsPairCfg: three for ScCM, one for ScMW).
  static constexpr int kScaleWarps = ScaleWarps;
  static constexpr int kFullArrivals =
      Tma ? 1 + (SmemScales ? kScaleWarpThreads : 0) : kProducerThreads;
  // Launch budget 65536 / (kThreads * kBlocksPerSm) (168 / 128); the producer gives its surplus
  // to the consumers.
  static constexpr int kProducerRegs = 40, kConsumerRegs = Consumers == 2 ? 232 : 216;
  static constexpr int kATileBytes = kM * kWgK;             // 1024-aligned (whole swizzle atoms)
  static constexpr int kStageBytes = kATileBytes + kN * kWgK;
  static constexpr int kRingBytes = kStages * kStageBytes;
  // + one swizzle atom of slack (the ring starts at the first 1024-aligned shared address), then
  // the full and empty barriers (8 bytes each) after the ring, then (kSmemStore) the consumers'
  // output staging (16-byte aligned: 2 * kStages * 8 is a multiple of 16), then (kSmemScales)
  // one scale slot per ring slot: the tile's kM A scales of the K block (row order), then B's
  // scale (kN = 192: the scales of the tile's two weight-scale blocks), padded to 16 bytes.
  static constexpr int kBarBytes = 2 * kStages * 8;
  // (kN = 192: three 64-column passes through 8 KB each, ws_store_wide_smem.)
  static constexpr int kOutStageBytesEach = TileN == 192 ? wgmma::kOutPassBytes : wgmma::kOutStageBytes;
  static constexpr int kOutBytes = SmemStore ? kConsumers * kOutStageBytesEach : 0;
  static constexpr int kScaleSlotFloats = kM + 4;
  static constexpr int kScaleSlotBytes = kScaleSlotFloats * 4;
  static constexpr int kScaleBytes = SmemScales ? kStages * kScaleSlotBytes : 0;
  static constexpr int kSmemBytes =
      kRingBytes + wgmma::kSw128AtomBytes + kBarBytes + kOutBytes + kScaleBytes;
  static_assert(kM % kScaleWarpThreads == 0, "the scale warp copies whole rows of 32 scales");
  static_assert(kScaleWarps >= 1 && kScaleWarps <= kProducerThreads / 32 - 1,
                "ws_run: producer warps but the TMA thread's");
  static_assert(kBarBytes % 16 == 0, "the output staging is 16-byte aligned");
  static_assert(kSmemBytes <= 227 * 1024, "Hopper's largest dynamic shared memory per block");
  // setmaxnreg moves registers between the warpgroups of one CTA: the budgets must fit what the
  // CTA was launched with (its per-thread count, 65536 / (kThreads x kBlocksPerSm) rounded down
  // to a multiple of 8, times kThreads), or the consumers' increase waits forever.
  static constexpr int kLaunchRegs = 65536 / (kThreads * kBlocksPerSm) / 8 * 8;  // 168 / 128
  static_assert(kProducerThreads * kProducerRegs + 128 * kConsumers * kConsumerRegs <=
                    kThreads * kLaunchRegs,
                "the register budgets fit the CTA's launch allocation");
  static_assert((kSmemBytes + 1024) * kBlocksPerSm <= 228 * 1024,
                "the rings fit Hopper's shared memory (1 KB reserved per block)");
};

// Dense tiles: raster_tile's order.
template <class Cfg>
struct WsDenseTiles {
  int tiles_m, tiles_n;
  __device__ __forceinline__ int count() const { return tiles_m * tiles_n; }
  __device__ __forceinline__ int first() const { return blockIdx.x; }  // ids first, first + step..
  __device__ __forceinline__ int step() const { return gridDim.x; }
  __device__ __forceinline__ bool at(const Fp8BlockGemmParams& p, int id, Fp8BlockGemmParams& q,
                                     int& m0, int& n0) {
    const wgmma::TileCoord t = wgmma::raster_tile(id, tiles_m, tiles_n, kWgRasterGroup);
    q = p;
    m0 = t.m * Cfg::kM;
    n0 = t.n * Cfg::kN;
    return true;
  }
  // TMA (ws_produce_tma): the tile's first row in A's map, B's map (the kernel parameter).
  static constexpr bool kMapsInGlobal = false;
  __device__ __forceinline__ int a_row(int m0) const { return m0; }
  __device__ __forceinline__ const CUtensorMap* b_map(const CUtensorMap* map_b) const {
    return map_b;
  }
};

// Grouped tiles: row tile y of every expert's rows (experts in order), column tile x; each thread
// keeps its own cursor (ids increase, so the scan over the experts happens once per block).
// ExpertMajor (kWgmmaWsTmaGroupedX / ScX): wgmma::grouped_expert_major's order instead (an
// expert's row tiles of one column tile consecutive: they share the weight tile through L2).
template <class Cfg, bool ExpertMajor = false>
struct WsGroupedTiles {
  const GroupedGemmParams* gp;
  int row_tiles, tiles_n;
  wgmma::GroupedCursor cursor;
  __device__ __forceinline__ int count() const { return row_tiles * tiles_n; }
  __device__ __forceinline__ int first() const { return blockIdx.x; }
  __device__ __forceinline__ int step() const { return gridDim.x; }
  __device__ __forceinline__ bool at(const Fp8BlockGemmParams&, int id, Fp8BlockGemmParams& q,
                                     int& m0, int& n0) {
    if constexpr (ExpertMajor) {
      const wgmma::GroupedTile g = wgmma::grouped_expert_major(cursor, id, gp->offsets,
                                                               gp->experts, Cfg::kM, tiles_n);
      if (g.expert >= gp->experts) return false;  // (the host counts tiles exactly)
      grouped_expert_params(*gp, g.expert, q);
      m0 = g.m_tile * Cfg::kM;
      n0 = g.n_tile * Cfg::kN;
      return true;
    }
    const int y = id / tiles_n, x = id % tiles_n;
    wgmma::grouped_advance(cursor, y, gp->offsets, gp->experts, Cfg::kM);
    if (cursor.expert >= gp->experts) return false;  // (the host counts tiles exactly)
    grouped_expert_params(*gp, cursor.expert, q);
    m0 = (y - cursor.first) * Cfg::kM;
    n0 = x * Cfg::kN;
    return true;
  }
};

// Grouped tiles with TMA loads (kWgmmaWsTmaGrouped): A's map spans the permuted rows of all
// experts, so a tile's box starts at the expert's first row + m0 (its rows past the expert's end
// are the next expert's, or zero past the last row: the consumers give them a zero scale and
// mask them at the store; a wgmma row reads only its own A row, so they touch nothing else).
// B: the expert's own map, maps[expert] in global memory (written by a host copy before the
// launch: the producer acquires it when its expert changes).
template <class Cfg, bool ExpertMajor = false>
struct WsGroupedTmaTiles : WsGroupedTiles<Cfg, ExpertMajor> {
  const CUtensorMap* maps;
  int row0 = 0;  // first permuted row of the current tile's expert
  __device__ __forceinline__ bool at(const Fp8BlockGemmParams& p, int id, Fp8BlockGemmParams& q,
                                     int& m0, int& n0) {
    if (!WsGroupedTiles<Cfg, ExpertMajor>::at(p, id, q, m0, n0)) return false;
    row0 = this->gp->offsets[this->cursor.expert];
    return true;
  }
  static constexpr bool kMapsInGlobal = true;
  __device__ __forceinline__ int a_row(int m0) const { return row0 + m0; }
  __device__ __forceinline__ const CUtensorMap* b_map(const CUtensorMap*) const {
    return maps + this->cursor.expert;
  }
};

// kPair (kWgmmaWsTmaGroupedScCM / ScMW): the tiles of a cluster of two CTAs, wgmma::pair_tile's
// pairs (clusters take pair ids cluster_index(), + clusters(), ...; row tile y of all experts as
// WsGroupedTiles' y). Every tile has the same K blocks, so both CTAs of a cluster walk their
// rings in step. A pair on one row tile multicasts A (each CTA loads half of the box into both
// CTAs' slots); a pair over two row tiles (an odd tiles_n) loads each CTA's whole A box on its
// own. Rank 1 of an odd tile count's last pair is a tile past n (n0 >= n): its B box and scale
// are zero, its store masked, and it still loads its half of A for rank 0.
template <class Cfg>
struct WsPairedTmaTiles {
  const GroupedGemmParams* gp;
  int row_tiles, tiles_n;
  wgmma::GroupedCursor cursor;
  const CUtensorMap* maps;
  int rank = 0;
  int row0 = 0;           // first permuted row of the current tile's expert
  bool multicast = true;  // the current pair's tiles share their row tile
  __device__ __forceinline__ int count() const { return wgmma::pair_count(row_tiles, tiles_n); }
  __device__ __forceinline__ int first() const { return cluster_index(); }
  __device__ __forceinline__ int step() const { return clusters(); }
  __device__ __forceinline__ bool at(const Fp8BlockGemmParams&, int id, Fp8BlockGemmParams& q,
                                     int& m0, int& n0) {
    const wgmma::PairTile tile = wgmma::pair_tile(id, rank, row_tiles, tiles_n);
    const int y = tile.y, x = tile.x;
    multicast = tile.multicast;
    wgmma::grouped_advance(cursor, y, gp->offsets, gp->experts, Cfg::kM);
    if (cursor.expert >= gp->experts) return false;  // (the host counts tiles exactly)
    grouped_expert_params(*gp, cursor.expert, q);
    m0 = (y - cursor.first) * Cfg::kM;
    n0 = x * Cfg::kN;
    row0 = gp->offsets[cursor.expert];
    return true;
  }
  static constexpr bool kMapsInGlobal = true;
  __device__ __forceinline__ int a_row(int m0) const { return row0 + m0; }
  __device__ __forceinline__ const CUtensorMap* b_map(const CUtensorMap*) const {
    return maps + cursor.expert;
  }
};

// One producer thread's share of a tile's copies: chunk t % 8 (16 bytes) of rows t / 8 + 16 i
// of A (i < Cfg::kM / 16) and of B (i < 8). Those rows share the swizzle phase (row % 8), so
// their destinations are sw128_offset(t / 8, chunk) + 2048 i. A loop, not unrolled: the producer
// has 40 registers and spare issue slots.
template <class Cfg>
struct WsLoader {
  static constexpr int kRowsPerPass = Cfg::kProducerThreads / 8;  // 16
  static constexpr int kAPasses = Cfg::kM / kRowsPerPass;         // 8 or 4
  static constexpr int kBPasses = kWgN / kRowsPerPass;            // 8
  static_assert(kAPasses <= kBPasses, "the loop runs B's passes");
  static_assert(Cfg::kN == kWgN, "cp.async loads: 128-column tiles");
  const uint8_t* a;  // row m0 + t / 8 of A, byte chunk * 16
  const uint8_t* b;  // row n0 + t / 8 of B, byte chunk * 16
  int64_t a_step, b_step;  // 16 rows
  int a_rows, b_rows;      // how many of this thread's passes have their row inside m / n
  int k_left;              // k - chunk * 16: K block kb is inside k iff kb * 128 < k_left
  uint32_t dst;            // sw128_offset(t / 8, chunk * 16)

  __device__ __forceinline__ WsLoader(const Fp8BlockGemmParams& q, int m0, int n0, int t) {
    const int row = t / 8, col = (t % 8) * 16;
    a = reinterpret_cast<const uint8_t*>(q.a) + (m0 + row) * q.lda + col;
    b = reinterpret_cast<const uint8_t*>(q.b) + (n0 + row) * q.ldb + col;
    a_step = kRowsPerPass * q.lda;
    b_step = kRowsPerPass * q.ldb;
    a_rows = (q.m - m0 - row + kRowsPerPass - 1) / kRowsPerPass;  // (<= 0: none)
    b_rows = (q.n - n0 - row + kRowsPerPass - 1) / kRowsPerPass;
    k_left = q.k - col;
    dst = wgmma::sw128_offset(row, col);
  }
  // K block kb into the stage at shared address stage_addr (zero-filled past m, n, k).
  __device__ __forceinline__ void load(uint32_t stage_addr, int kb) const {
    const bool k_ok = kb * kWgK < k_left;
    const int64_t off = static_cast<int64_t>(kb) * kWgK;
    const uint8_t* pa = a + off;
    const uint8_t* pb = b + off;
    uint32_t sa = stage_addr + dst, sb = stage_addr + Cfg::kATileBytes + dst;
#pragma unroll 1
    for (int i = 0; i < kBPasses; ++i) {
      if (kAPasses == kBPasses || i < kAPasses) {  // (past A's tile: B's region, not A's)
        const bool a_ok = k_ok && i < a_rows;
        cp_async16_shared(sa, a_ok ? pa : a, a_ok);
      }
      const bool b_ok = k_ok && i < b_rows;
      cp_async16_shared(sb, b_ok ? pb : b, b_ok);
      pa += a_step;
      pb += b_step;
      sa += kRowsPerPass * wgmma::kSw128RowBytes;
      sb += kRowsPerPass * wgmma::kSw128RowBytes;
    }
  }
};

// The producer warpgroup (t = 0..127): every K block of every tile of this block into the ring.
template <class Cfg, class Tiles>
__device__ __forceinline__ void ws_produce(const Fp8BlockGemmParams& p, Tiles tiles,
                                           uint32_t ring_addr, uint32_t bars, int t) {
  wgmma::RingPos pos{0, 0};
  Fp8BlockGemmParams q;
  for (int id = tiles.first(); id < tiles.count(); id += tiles.step()) {
    int m0, n0;
    if (!tiles.at(p, id, q, m0, n0)) break;
    const WsLoader<Cfg> loader(q, m0, n0, t);
    const int kblocks = (q.k + kWgK - 1) / kWgK;
    for (int kb = 0; kb < kblocks; ++kb) {
      mbarrier_wait(bars + (Cfg::kStages + pos.stage) * 8, wgmma::empty_wait_parity(pos));
      loader.load(ring_addr + pos.stage * Cfg::kStageBytes, kb);
      cp_async_arrive_noinc(bars + pos.stage * 8);
      pos = wgmma::ring_next(pos, Cfg::kStages);
    }
  }
  cp_async_wait_all();  // (leave no copy in flight at exit)
}

// The TMA producer (one thread of the producer warpgroup): per K block, the slot's bytes announced
// on its full barrier, then A's box (kM rows) and B's (128 rows) at (kb * 128, m0 / n0). Then it
// waits until the consumers released every slot, so no copy is in flight when it exits.
// kPair: the TMA thread of CTA `rank` (0 or 1) of a cluster; its empty barrier completes when both
// CTAs' consumers released the slot, the full barrier's bytes are both halves of A and its B; it
// loads A rows a_row + 64 rank .. + 63 (map_a's boxes are 64 rows) multicast into that half of
// both CTAs' slot (tiles.multicast; else both halves of its own tile's A into its own slot),
// then its own B box.
template <class Cfg, class Tiles>
__device__ __forceinline__ void ws_produce_tma(const Fp8BlockGemmParams& p, Tiles tiles,
                                               uint32_t ring_addr, uint32_t bars,
                                               const CUtensorMap* map_a, const CUtensorMap* map_b,
                                               [[maybe_unused]] uint32_t rank = 0) {
  wgmma::RingPos pos{0, 0};
  Fp8BlockGemmParams q;
  [[maybe_unused]] const CUtensorMap* acquired = nullptr;  // (maps in global memory)
  for (int id = tiles.first(); id < tiles.count(); id += tiles.step()) {
    int m0, n0;
    if (!tiles.at(p, id, q, m0, n0)) break;
    const int kblocks = (q.k + kWgK - 1) / kWgK;
    const int a_row = tiles.a_row(m0);
    const CUtensorMap* tile_map_b = tiles.b_map(map_b);
    if constexpr (Tiles::kMapsInGlobal) {
      if (tile_map_b != acquired) {
        tensormap_acquire(tile_map_b);
        acquired = tile_map_b;
      }
    }
    for (int kb = 0; kb < kblocks; ++kb) {
      mbarrier_wait(bars + (Cfg::kStages + pos.stage) * 8, wgmma::empty_wait_parity(pos));
      const uint32_t full = bars + pos.stage * 8;
      const uint32_t stage_addr = ring_addr + pos.stage * Cfg::kStageBytes;
      mbarrier_arrive_expect_tx(full, Cfg::kStageBytes);
      if constexpr (Cfg::kPair) {
        constexpr uint32_t kHalfA = 64 * wgmma::kSw128RowBytes;  // whole swizzle atoms
        if (tiles.multicast) {
          tma_load_2d_multicast(stage_addr + rank * kHalfA, map_a, full, kb * kWgK,
                                a_row + 64 * static_cast<int>(rank), 0x3);
        } else {  // (a pair over two row tiles: both halves of this CTA's own A box)
          tma_load_2d(stage_addr, map_a, full, kb * kWgK, a_row);
          tma_load_2d(stage_addr + kHalfA, map_a, full, kb * kWgK, a_row + 64);
        }
      } else {
        tma_load_2d(stage_addr, map_a, full, kb * kWgK, a_row);
      }
      tma_load_2d(stage_addr + Cfg::kATileBytes, tile_map_b, full, kb * kWgK, n0);
      pos = wgmma::ring_next(pos, Cfg::kStages);
    }
  }
  for (int s = 0; s < Cfg::kStages; ++s) {
    mbarrier_wait(bars + (Cfg::kStages + pos.stage) * 8, wgmma::empty_wait_parity(pos));
    pos = wgmma::ring_next(pos, Cfg::kStages);
  }
}

// kSmemScales: the producer's warps 1..kScaleWarps (scale warp w, lane l = 0..31) copy the block
// scales of the K blocks of ring slots s with s % kScaleWarps == w (each slot always the same
// warp's, so a warp's waits on a slot's empty barrier never pass over one of its phases, which a
// parity wait could not tell apart) into the scale slot of the ring slot the TMA thread fills:
// the A scales of tile rows l + 32 i (a_scale[kb][m0 + row]: 128 contiguous bytes per i,
// zero-filled past the expert's rows, which keeps their products 0 as the consumers' check
// did), and (lane 0) B's scale of
// the column tile (kN = 192: lane 1 the second weight-scale block's); then each lane's cp.async
// arrival on the slot's full barrier (kFullArrivals counts one warp's). Each waits on the same
// empty barriers as the TMA thread for its own blocks, so its arrivals always belong to the phase
// the TMA thread is filling. One warp alone managed one K block per ~744 clocks (a ring trace:
// each block's arrival waits out its copies' latency), short of what ScCM's ring needs: there
// three share the slots (+3-6%). ScMW's K block is 1.5x the work, and one warp ran 4-7% faster
// than three.
template <class Cfg, class Tiles>
__device__ __forceinline__ void ws_produce_scales(const Fp8BlockGemmParams& p, Tiles tiles,
                                                  uint32_t scale_addr, uint32_t bars, int warp,
                                                  int lane) {
  wgmma::RingPos pos{0, 0};
  Fp8BlockGemmParams q;
  for (int id = tiles.first(); id < tiles.count(); id += tiles.step()) {
    int m0, n0;
    if (!tiles.at(p, id, q, m0, n0)) break;
    const int kblocks = (q.k + kWgK - 1) / kWgK;
    const float* a_scale = q.a_scale + m0 + lane;
    // The tile's weight-scale blocks: n0 / 128 and (kN = 192) the next one, where it exists
    // (its scale 0 past n: those columns are zero-filled and never stored).
    const int nb = n0 / kWgN;
    const float* b_scale = q.b_scale + static_cast<int64_t>(nb) * q.b_scale_ld;
    [[maybe_unused]] const bool b_hi_ok = (nb + 1) * kWgN < q.n;
    const int rows_left = q.m - m0 - lane;  // row lane + 32 i is the expert's iff 32 i < rows_left
    for (int kb = 0; kb < kblocks; ++kb) {
      if (pos.stage % Cfg::kScaleWarps != warp) {  // (another warp's slot)
        pos = wgmma::ring_next(pos, Cfg::kStages);
        continue;
      }
      mbarrier_wait(bars + (Cfg::kStages + pos.stage) * 8, wgmma::empty_wait_parity(pos));
      const uint32_t slot = scale_addr + pos.stage * Cfg::kScaleSlotBytes;
      const float* sa = a_scale + static_cast<int64_t>(kb) * q.a_scale_ld;
#pragma unroll
      for (int i = 0; i < Cfg::kM / Cfg::kScaleWarpThreads; ++i) {
        const bool ok = Cfg::kScaleWarpThreads * i < rows_left;
        cp_async4_shared(slot + 4 * (lane + Cfg::kScaleWarpThreads * i),
                         ok ? sa + Cfg::kScaleWarpThreads * i : q.a_scale, ok);
      }
      // (kPair: a tile past n, rank 1 of an odd tile count's last pair, gets scale 0.)
      if (lane == 0) cp_async4_shared(slot + 4 * Cfg::kM, n0 < q.n ? b_scale + kb : q.b_scale, n0 < q.n);
      if constexpr (Cfg::kN != kWgN) {
        if (lane == 1)
          cp_async4_shared(slot + 4 * (Cfg::kM + 1), b_hi_ok ? b_scale + q.b_scale_ld + kb : q.b_scale,
                           b_hi_ok);
      }
      cp_async_arrive_noinc(bars + pos.stage * 8);
      pos = wgmma::ring_next(pos, Cfg::kStages);
    }
  }
  cp_async_wait_all();  // (leave no copy in flight at exit)
}

// A consumer's view of the ring for one tile: waits for a slot, issues its 4 wgmmas, releases it.
template <class Cfg>
struct WsSlots {
  uint32_t ring_addr, bars;
  int cw;
  bool lane0;
  uint32_t peer = 0;  // kPair: the other CTA's rank, whose empty barriers count this one's releases too
  wgmma::RingPos pos{0, 0};
  // Waits until the slot of the next K block is full, then issues its wgmmas into part (closing
  // the group; the caller waits for it). N = 32 (kSplit64's half tiles): A rows 0..63 and B rows
  // 64cw..64cw+63 (8 KB apart: whole swizzle atoms) with m64n64 wgmmas; N = 96 (kN = 192): the
  // whole B tile with m64n192 wgmmas.
  template <int N>
  __device__ __forceinline__ void issue(float (&part)[N]) {
    constexpr bool Half = N == 32;
    static_assert(N == 32 || N == 2 * Cfg::kN / 4, "m64n64, or the tile's whole width");
    mbarrier_wait(bars + pos.stage * 8, wgmma::full_wait_parity(pos));
    // cp.async writes through the generic proxy, wgmma reads through the async proxy (TMA writes
    // through it too: no fence then).
    if constexpr (!Cfg::kTma) fence_proxy_async();
    // Offsets from the ring (1024-aligned: whole swizzle atoms); the descriptors advance the
    // ring's (loop-invariant) by them.
    const uint32_t stage_off = pos.stage * Cfg::kStageBytes;
    const uint32_t a_off = stage_off + (Half ? 0 : cw * 64 * wgmma::kSw128RowBytes);
    const uint32_t b_off =
        stage_off + Cfg::kATileBytes + (Half ? cw * 64 * wgmma::kSw128RowBytes : 0);
    const uint64_t ring_desc = wgmma::sw128_kmajor_desc(ring_addr);
    const uint64_t a_desc = wgmma::sw128_desc_advance(ring_desc, a_off);
    const uint64_t b_desc = wgmma::sw128_desc_advance(ring_desc, b_off);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < kWgK / 32; ++j) {
      if constexpr (Half) {
        wgmma_m64n64k32_e4m3(part, wgmma::sw128_desc_advance(a_desc, 32 * j),
                             wgmma::sw128_desc_advance(b_desc, 32 * j), j > 0);
      } else if constexpr (N == 96) {
        wgmma_m64n192k32_e4m3(part, wgmma::sw128_desc_advance(a_desc, 32 * j),
                              wgmma::sw128_desc_advance(b_desc, 32 * j), j > 0);
      } else {
        wgmma_m64n128k32_e4m3(part, wgmma::sw128_desc_advance(a_desc, 32 * j),
                              wgmma::sw128_desc_advance(b_desc, 32 * j), j > 0);
      }
    }
    wgmma_commit();
  }
  // After wgmma_wait for the slot's wgmmas: one arrival per warp on its empty barrier.
  // (kSmemScales: __syncwarp first, so every lane's reads of the scale slot precede the arrival.)
  __device__ __forceinline__ void release() {
    if constexpr (Cfg::kSmemScales) __syncwarp();
    if (lane0) {
      mbarrier_arrive(bars + (Cfg::kStages + pos.stage) * 8);
      if constexpr (Cfg::kPair) mbarrier_arrive_peer(bars + (Cfg::kStages + pos.stage) * 8, peer);
    }
    pos = wgmma::ring_next(pos, Cfg::kStages);
  }
  // kCross: slots issued but not yet released lie from tail (the oldest) to pos (the next to
  // issue): at most two per consumer (so a ring of two or more slots cannot deadlock:
  // tests/gpu/wgmma_pipeline_test.cpp's ring model, lag 2). issue_ahead: issue(part) on pos,
  // then pos moves on; returns the stage it used (its scale slot). release_oldest: after the
  // wgmma_wait that covers the oldest slot's group, one arrival per warp on its empty barrier,
  // then tail moves on.
  __device__ __forceinline__ int issue_ahead(float (&part)[64]) {
    const int stage = pos.stage;
    issue(part);
    pos = wgmma::ring_next(pos, Cfg::kStages);
    return stage;
  }
  __device__ __forceinline__ void release_oldest() {
    if constexpr (Cfg::kSmemScales) __syncwarp();
    if (lane0) {
      mbarrier_arrive(bars + (Cfg::kStages + tail.stage) * 8);
      if constexpr (Cfg::kPair) mbarrier_arrive_peer(bars + (Cfg::kStages + tail.stage) * 8, peer);
    }
    tail = wgmma::ring_next(tail, Cfg::kStages);
  }
  wgmma::RingPos tail{0, 0};
};

// bar.sync on named barrier 1 + cw (0 is __syncthreads) for consumer warpgroup cw's 128
// threads (immediate ids: ptxas then reserves 3 barriers, not all 16).
__device__ __forceinline__ void consumer_barrier(int cw) {
  if (cw == 0) {
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  } else {
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
  }
}

// Eight BF16 (v) to out, the output row's column col: one 16-byte store where vec (ldd and d
// allow it) and all eight lie before n, else 2-byte stores of those before n. The 16-byte store
// in PTX: from a uint4 assignment ptxas emitted four 4-byte STG.E (the grouped kernels' SASS; ncu
// counted 66% of the Tx kernel's global sectors as excess).
__device__ __forceinline__ void store_bf16x8(uint16_t* out, const uint4& v, int col, int n,
                                             bool vec) {
  if (vec && col + 8 <= n) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(out), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
    return;
  }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};  // (constant indices: v stays in registers)
#pragma unroll
  for (int x = 0; x < 8; ++x)
    if (col + x < n) out[x] = static_cast<uint16_t>(x % 2 ? w[x / 2] >> 16 : w[x / 2]);
}

// kSmemStore: consumer cw's 64 x 128 tile (rows m0 + 64cw.., columns n0..) through its staging
// (stage: 16 KB of shared memory) to D: the fragments as BF16 pairs, then each thread 16-byte
// chunk t % 16 of rows t / 16 + 8j (a warp writes two whole 256-byte row segments). Masked past
// m and n; 16-byte stores where ldd and d allow (the grouped GEMM checks both), else 2-byte.
template <class Cfg>
__device__ __forceinline__ void ws_store_tile_smem(const Fp8BlockGemmParams& q,
                                                   const float (&acc)[64], uint8_t* stage,
                                                   int m0, int n0, int cw, int t) {
  consumer_barrier(cw);  // every thread's reads of the previous tile's staging are done
#pragma unroll
  for (int i = 0; i < 64; i += 2)
    *reinterpret_cast<uint32_t*>(stage + wgmma::out_stage_offset(
                                             wgmma::acc_row(t, i), 2 * wgmma::acc_col(t, i))) =
        pack_bf16x2(acc[i], acc[i + 1]);
  consumer_barrier(cw);
  auto* d = reinterpret_cast<uint16_t*>(q.d);
  const bool vec = q.ldd % 8 == 0 && reinterpret_cast<uintptr_t>(q.d) % 16 == 0;
  const int c = t % 16, col = n0 + c * 8;
  if (col >= q.n) return;
#pragma unroll 1
  for (int j = 0; j < 8; ++j) {
    const int r = t / 16 + 8 * j, row = m0 + cw * 64 + r;
    if (row >= q.m) break;  // (r grows with j)
    const uint4 v = *reinterpret_cast<const uint4*>(stage + wgmma::out_stage_offset(r, c * 16));
    store_bf16x8(d + static_cast<int64_t>(row) * q.ldd + col, v, col, q.n, vec);
  }
}

// A consumer warpgroup cw (0 or 1: tile rows 64cw..64cw+63), thread t = 0..127 of it.
// Promotion schedule (Pipelined, a template switch until measured):
//   false  per K block: wait, 4 wgmmas into part, wgmma.wait_group 0, release the slot,
//          acc += part * scale (the other consumer's wgmmas run meanwhile);
//   true   two partial accumulators, alternating (kWgmma's schedule): block kb's wgmmas issued,
//          then block kb - 1 promoted under them, then the wait for kb and the release of its
//          slot: each consumer keeps its own promotion off the tensor pipe's critical path.
//   Neither leaves a wgmma in flight across a loop's back edge (ptxas then neither serialises
//   the wgmmas nor injects waits).
//   Cfg::kCross (cross_loop): block kb + 1's wgmmas issued before the wait for kb, wait_group 1,
//   kb's slot released, kb promoted under kb + 1's wgmmas: one group in flight across the back
//   edge, always part0's (the loop unrolled by two), with global or (kSmemScales) slot scales.
//   ptxas (CUDA 13.0, sm_90a): no C7511 serialisation warning, no spills.
// kSmemScales: a block's scales come from its scale slot (read after the full wait, before the
// release) instead of global loads ahead of the wait.
// kSplit64: a tile with at most 64 rows left runs as two 64 x 64 halves (rows 0..63, columns
// 64cw..: the K loop on one 32-register partial of its own, promoted after each block's wait,
// into acc's first 32 registers; with a second partial, or sharing part0's registers, ptxas
// spilled or serialised the wgmmas).
template <class Cfg, bool Pipelined, class Tiles>
__device__ __forceinline__ void ws_consume(const Fp8BlockGemmParams& p, Tiles tiles,
                                           uint32_t ring_addr, uint32_t bars, int cw, int t,
                                           [[maybe_unused]] uint8_t* out_stage,
                                           [[maybe_unused]] const float* scale_ring) {
  WsSlots<Cfg> slots{ring_addr, bars, cw, t % 32 == 0};
  if constexpr (Cfg::kPair) slots.peer = cluster_rank() ^ 1u;
  Fp8BlockGemmParams q;
  float acc[64], part0[64];
  [[maybe_unused]] float part1[Pipelined || Cfg::kCross ? 64 : 1];
  for (int id = tiles.first(); id < tiles.count(); id += tiles.step()) {
    int m0, n0;
    if (!tiles.at(p, id, q, m0, n0)) break;
    const int kblocks = (q.k + kWgK - 1) / kWgK;
    const bool half = Cfg::kSplit64 && q.m - m0 <= 64;
    // Scales of block kb for this thread's two rows (0 past m: those products are 0 anyway).
    const WgRowScales scales(q, m0, n0, half ? 0 : cw * 64, t);
    // kSmemScales: the same from the scale slot of the slot just waited for (zero past m too).
    [[maybe_unused]] auto slot_scales = [&](float& s0, float& s1) {
      const float* sc = scale_ring + slots.pos.stage * Cfg::kScaleSlotFloats;
      scales.from(sc, sc[Cfg::kM], s0, s1);
    };
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    // The K loop into partial accumulators pa, pb (float[64]: full tiles; float[32]: kSplit64's
    // half tiles, arrays of their own so that ptxas keeps each wgmma shape's registers apart),
    // pipelined_c: std::bool_constant<Pipelined> (half tiles: std::false_type, one partial).
    auto k_loop = [&](auto pipelined_c, auto& pa, [[maybe_unused]] auto& pb) {
      if constexpr (!decltype(pipelined_c)::value) {
        for (int kb = 0; kb < kblocks; ++kb) {
          float s0, s1;
          if constexpr (!Cfg::kSmemScales)
            scales(kb, s0, s1);  // (global loads: their latency under the wait and the wgmmas)
          slots.issue(pa);
          if constexpr (Cfg::kSmemScales) slot_scales(s0, s1);
          wgmma_wait<0>();
          wgmma_hold(pa);
          slots.release();
          wg_promote(acc, pa, s0, s1);
        }
      } else {
        // One K block into cur while prev (block kb - 1, complete) is promoted with the scales
        // loaded one step earlier (ps0, ps1; block kb's are loaded before its wait).
        float ps0 = 0.0f, ps1 = 0.0f;
        auto step = [&](int kb, auto& cur, auto& prev) {
          float s0, s1;
          if constexpr (!Cfg::kSmemScales) scales(kb, s0, s1);
          slots.issue(cur);
          if constexpr (Cfg::kSmemScales) slot_scales(s0, s1);  // (under the wgmmas)
          if (kb > 0) wg_promote(acc, prev, ps0, ps1);
          wgmma_wait<0>();
          wgmma_hold(cur);
          slots.release();
          ps0 = s0;
          ps1 = s1;
        };
        // An odd count starts with one step into part1 (nothing to promote), then pairs.
        int kb = 0;
        if (kblocks % 2 == 1) step(kb++, pb, pa);
        for (; kb < kblocks; kb += 2) {
          step(kb, pa, pb);
          step(kb + 1, pb, pa);
        }
        wg_promote(acc, pb, ps0, ps1);
      }
    };
    if constexpr (Cfg::kSplit64) {
      if (half) {
        float half0[32];
        k_loop(std::false_type{}, half0, half0);
        wg_store_tile<32>(q, acc, m0, n0 + cw * 64, t);
        // (part0 / part1 carry no value into the next tile, whose first wgmma overwrites them,
        // but their asm operands read them: defined here, after the half loop, they are not
        // live through it, which would spill.)
#pragma unroll
        for (int i = 0; i < 64; ++i) part0[i] = 0.0f;
        if constexpr (Pipelined) {
#pragma unroll
          for (int i = 0; i < 64; ++i) part1[i] = 0.0f;
        }
        continue;
      }
    }
    // kCross: block kb's wgmmas into cur issued while block kb - 1's (in prev) still run; then
    // wgmma.wait_group 1 (kb - 1 complete, kb may still run), kb - 1's slot released, prev
    // promoted with kb - 1's scales (ps0, ps1) under kb's wgmmas. Unrolled by two so that every
    // accumulator is a fixed register array: the group in flight at the loop's entry, back edge
    // and exit is always part0's (an odd block count starts with block 0 into part0; an even
    // one with block 0 into part1 and one step), then the last block drains with wait_group 0.
    [[maybe_unused]] auto cross_loop = [&](float (&pa)[64], float (&pb)[64]) {
      float ps0 = 0.0f, ps1 = 0.0f;
      // Block kb into cur; its scales into s0, s1 (global: loaded before the full wait, their
      // latency under it; kSmemScales: from the slot's scale slot after it, under the wgmmas).
      auto issue = [&](int kb, float (&cur)[64], float& s0, float& s1) {
        if constexpr (!Cfg::kSmemScales) scales(kb, s0, s1);
        [[maybe_unused]] const int stage = slots.issue_ahead(cur);
        if constexpr (Cfg::kSmemScales) {
          const float* sc = scale_ring + stage * Cfg::kScaleSlotFloats;
          scales.from(sc, sc[Cfg::kM], s0, s1);
        }
      };
      auto step = [&](int kb, float (&cur)[64], float (&prev)[64]) {
        float s0, s1;
        issue(kb, cur, s0, s1);
        wgmma_wait<1>();  // prev's group (block kb - 1) complete; cur's may still run
        wgmma_hold(prev);
        slots.release_oldest();  // block kb - 1's slot: its wgmmas are done
        wg_promote(acc, prev, ps0, ps1);
        ps0 = s0;
        ps1 = s1;
      };
      int kb = 1;
      if (kblocks % 2 == 1) {
        issue(0, pa, ps0, ps1);
      } else {
        issue(0, pb, ps0, ps1);
        step(1, pa, pb);
        kb = 2;
      }
      for (; kb < kblocks; kb += 2) {
        step(kb, pb, pa);
        step(kb + 1, pa, pb);
      }
      wgmma_wait<0>();
      wgmma_hold(pa);
      slots.release_oldest();
      wg_promote(acc, pa, ps0, ps1);
    };
    if constexpr (Cfg::kCross) {
      cross_loop(part0, part1);
    } else {
      k_loop(std::bool_constant<Pipelined>{}, part0, part1);
    }

    if constexpr (Cfg::kSmemStore) {
      ws_store_tile_smem<Cfg>(q, acc, out_stage, m0, n0, cw, t);
      continue;
    }
    wg_store_tile(q, acc, m0 + cw * 64, n0, t);
  }
}

// kN = 192 (kWgmmaWsTmaGroupedScMW): consumer cw's 64 x 192 tile (rows row0.., columns n0..) in
// three 64-column passes through its 8 KB staging (wgmma::out_pass_offset): the pass's fragments
// as BF16 pairs, then each thread 16-byte chunk t % 8 of rows t / 8 + 16 j, so a warp stores
// four whole 128-byte row segments per instruction instead of 4-byte pieces of eight rows (ncu:
// 39% of the direct stores' L2 sectors were excess). 1.6-2.7% more TFLOP/s at 16K and 64K tokens
// than the direct stores on the H200, within the spread at 4K. Masked past m
// and n; 16-byte stores where ldd and d allow (the grouped GEMM checks both), else 2-byte.
__device__ __forceinline__ void ws_store_wide_smem(const Fp8BlockGemmParams& q,
                                                   const float (&acc)[96], uint8_t* stage,
                                                   int row0, int n0, int cw, int t) {
  auto* d = reinterpret_cast<uint16_t*>(q.d);
  const bool vec = q.ldd % 8 == 0 && reinterpret_cast<uintptr_t>(q.d) % 16 == 0;
  const int c = t % 8;
#pragma unroll
  for (int pass = 0; pass < 3; ++pass) {
    consumer_barrier(cw);  // every thread's reads of the previous pass (or tile) are done
#pragma unroll
    for (int i = 32 * pass; i < 32 * pass + 32; i += 2)
      *reinterpret_cast<uint32_t*>(
          stage + wgmma::out_pass_offset(wgmma::acc_row(t, i),
                                         2 * (wgmma::acc_col(t, i) - 64 * pass))) =
          pack_bf16x2(acc[i], acc[i + 1]);
    consumer_barrier(cw);
    const int col = n0 + 64 * pass + 8 * c;
    if (col >= q.n) continue;  // (every thread still meets the next pass's barriers)
#pragma unroll 1
    for (int j = 0; j < 4; ++j) {
      const int r = t / 8 + 16 * j, row = row0 + r;
      if (row >= q.m) break;  // (r grows with j)
      const uint4 v = *reinterpret_cast<const uint4*>(stage + wgmma::out_pass_offset(r, c * 16));
      store_bf16x8(d + static_cast<int64_t>(row) * q.ldd + col, v, col, q.n, vec);
    }
  }
}

// kN = 192 (kWgmmaWsTmaGroupedScMW): acc += part * scale, each register's scale that of its row
// (s?0 / s?1: the thread's two rows) and of its column's weight-scale block: columns before Split
// (64 or 128; whole 8-column groups of the fragment) the tile's first block (lo), the rest the
// second (hi).
template <int Split>
__device__ __forceinline__ void wg_promote_split(float (&acc)[96], const float (&part)[96],
                                                 float lo0, float lo1, float hi0, float hi1) {
#pragma unroll
  for (int i = 0; i < 96; ++i) {
    const bool hi = 8 * (i / 4) >= Split, row1 = (i / 2) % 2;
    acc[i] += part[i] * (hi ? (row1 ? hi1 : hi0) : (row1 ? lo1 : lo0));
  }
}

// Consumer warpgroup cw of the 128 x 192 tiles (kWgmmaWsTmaGroupedScMW), thread t = 0..127 of
// it: per K block the full wait, 4 m64n192k32 wgmmas into part, the block's scales from its scale
// slot (under the wgmmas), wgmma.wait_group 0, the release (both CTAs' empty barriers), then the
// promotion, under the other consumer's wgmmas. One partial accumulator: acc and part take 192 of
// the 232 registers, no room for the cross-step schedule's second. The tile's second
// weight-scale block starts at column 128 - n0 % 128 (n0 a multiple of 192: 128 or 64), a
// constant of each of the loop's two instances.
template <class Cfg, class Tiles>
__device__ __forceinline__ void ws_consume_wide(const Fp8BlockGemmParams& p, Tiles tiles,
                                                uint32_t ring_addr, uint32_t bars, int cw, int t,
                                                const float* scale_ring, uint8_t* out_stage) {
  static_assert(Cfg::kN == 192 && Cfg::kSmemScales && Cfg::kPair && Cfg::kSmemStore);
  WsSlots<Cfg> slots{ring_addr, bars, cw, t % 32 == 0};
  slots.peer = cluster_rank() ^ 1u;
  Fp8BlockGemmParams q;
  float acc[96], part[96];
  for (int id = tiles.first(); id < tiles.count(); id += tiles.step()) {
    int m0, n0;
    if (!tiles.at(p, id, q, m0, n0)) break;
    const int kblocks = (q.k + kWgK - 1) / kWgK;
    const WgRowScales rows(q, m0, n0, cw * 64, t);  // (its r0, r1 and their masks)
#pragma unroll
    for (int i = 0; i < 96; ++i) acc[i] = 0.0f;
    auto k_loop = [&](auto split_c) {
      for (int kb = 0; kb < kblocks; ++kb) {
        slots.issue(part);
        const float* sc = scale_ring + slots.pos.stage * Cfg::kScaleSlotFloats;
        const float a0 = rows.r0_ok ? sc[rows.r0] : 0.0f, a1 = rows.r1_ok ? sc[rows.r1] : 0.0f;
        const float lo = sc[Cfg::kM], hi = sc[Cfg::kM + 1];
        wgmma_wait<0>();
        wgmma_hold(part);
        slots.release();
        wg_promote_split<decltype(split_c)::value>(acc, part, a0 * lo, a1 * lo, a0 * hi, a1 * hi);
      }
    };
    if (n0 % kWgN == 0) {
      k_loop(std::integral_constant<int, 128>{});
    } else {
      k_loop(std::integral_constant<int, 64>{});
    }
    ws_store_wide_smem(q, acc, out_stage, m0 + cw * 64, n0, cw, t);
  }
}

// Barriers, then the roles. smem: Cfg::kSmemBytes of dynamic shared memory.
// maps: A's and B's tensor maps (Cfg::kTma only).
template <class Cfg, bool Pipelined, class Tiles>
__device__ __forceinline__ void ws_run(const Fp8BlockGemmParams& p, Tiles tiles, uint8_t* smem,
                                       const CUtensorMap* map_a = nullptr,
                                       const CUtensorMap* map_b = nullptr) {
  const int tid = threadIdx.x, wg = warpgroup_index(), t = tid % 128;
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t pad = (wgmma::kSw128AtomBytes - (smem_base % wgmma::kSw128AtomBytes)) %
                       wgmma::kSw128AtomBytes;
  const uint32_t ring_addr = smem_base + pad;
  // full[s] at bars + 8s, empty[s] at bars + 8 (kStages + s).
  const uint32_t bars = ring_addr + Cfg::kRingBytes;
  if (tid == 0) {
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(bars + s * 8, Cfg::kFullArrivals);
      mbarrier_init(bars + (Cfg::kStages + s) * 8, Cfg::kEmptyArrivals);
    }
  }
  // kPair: the peer's barriers exist before this CTA's first multicast or remote arrival.
  if constexpr (Cfg::kPair) cluster_sync();
  else __syncthreads();
  // (kSmemScales: the scale slots after the barriers and the output staging.)
  const uint32_t scale_off = Cfg::kRingBytes + Cfg::kBarBytes + Cfg::kOutBytes;
  if (wg == 0) {
    setmaxnreg_dec<Cfg::kProducerRegs>();
    // (Warps past 1 + kScaleWarps have nothing to do.)
    const bool scale_warp = t >= 32 && t < 32 * (1 + Cfg::kScaleWarps);
    if constexpr (Cfg::kPair) {
      if (t == 0) ws_produce_tma<Cfg>(p, tiles, ring_addr, bars, map_a, nullptr, cluster_rank());
      if (scale_warp) ws_produce_scales<Cfg>(p, tiles, ring_addr + scale_off, bars, t / 32 - 1, t % 32);
    } else if constexpr (Cfg::kTma) {
      if (t == 0) ws_produce_tma<Cfg>(p, tiles, ring_addr, bars, map_a, map_b);
      if constexpr (Cfg::kSmemScales) {
        if (scale_warp) ws_produce_scales<Cfg>(p, tiles, ring_addr + scale_off, bars, t / 32 - 1, t % 32);
      }
    } else {
      ws_produce<Cfg>(p, tiles, ring_addr, bars, t);
    }
  } else {
    setmaxnreg_inc<Cfg::kConsumerRegs>();
    // (kSmemStore: consumer cw's staging after the barriers.)
    uint8_t* out_stage = smem + pad + Cfg::kRingBytes + Cfg::kBarBytes +
                         (wg - 1) * Cfg::kOutStageBytesEach;
    const auto* scale_ring = reinterpret_cast<const float*>(smem + pad + scale_off);
    if constexpr (Cfg::kN != kWgN) {
      ws_consume_wide<Cfg>(p, tiles, ring_addr, bars, wg - 1, t, scale_ring, out_stage);
    } else {
      ws_consume<Cfg, Pipelined>(p, tiles, ring_addr, bars, wg - 1, t, out_stage, scale_ring);
    }
  }
  // kPair: no CTA leaves while its peer may still multicast into it or arrive on its barriers.
  if constexpr (Cfg::kPair) cluster_sync();
}

// Dense: grid = min(tiles, SMs * Cfg::kBlocksPerSm), persistent over the tiles.
template <int Consumers, bool Pipelined>
__global__ void __launch_bounds__(WsCfg<Consumers>::kThreads, WsCfg<Consumers>::kBlocksPerSm)
    fp8_block_gemm_wgmma_ws_kernel(const __grid_constant__ Fp8BlockGemmParams p) {
  using Cfg = WsCfg<Consumers>;
  extern __shared__ __align__(16) uint8_t ws_smem[];
  const WsDenseTiles<Cfg> tiles{(p.m + Cfg::kM - 1) / Cfg::kM, (p.n + kWgN - 1) / kWgN};
  ws_run<Cfg, Pipelined>(p, tiles, ws_smem);
}

// Dense with TMA loads (kWgmmaWsTma): map_a over A [m rows][k bytes] with kM x 128-byte boxes,
// map_b over B [n][k] with 128 x 128-byte boxes, both in the 128-byte swizzle (the host builds
// them per launch: fp8_block_gemm_launch.cu).
// Cross: the cross-step schedule (kWgmmaWsTmaC).
template <int Consumers, bool Pipelined, bool Cross = false>
__global__ void __launch_bounds__(WsCfg<Consumers>::kThreads, WsCfg<Consumers>::kBlocksPerSm)
    fp8_block_gemm_wgmma_tma_kernel(const __grid_constant__ Fp8BlockGemmParams p,
                                    const __grid_constant__ CUtensorMap map_a,
                                    const __grid_constant__ CUtensorMap map_b) {
  using Cfg = WsCfg<Consumers, true, false, false, false, Cross>;
  extern __shared__ __align__(16) uint8_t ws_smem[];
  const WsDenseTiles<Cfg> tiles{(p.m + Cfg::kM - 1) / Cfg::kM, (p.n + kWgN - 1) / kWgN};
  ws_run<Cfg, Pipelined>(p, tiles, ws_smem, &map_a, &map_b);
}

// Grouped: row_tiles = the Cfg::kM-row tiles of all experts; grid = min(row_tiles * tiles_n,
// SMs * Cfg::kBlocksPerSm).
template <int Consumers, bool Pipelined>
__global__ void __launch_bounds__(WsCfg<Consumers>::kThreads, WsCfg<Consumers>::kBlocksPerSm)
    fp8_grouped_gemm_wgmma_ws_kernel(const __grid_constant__ GroupedGemmParams gp,
                                     int row_tiles) {
  using Cfg = WsCfg<Consumers>;
  extern __shared__ __align__(16) uint8_t ws_smem[];
  const WsGroupedTiles<Cfg> tiles{&gp, row_tiles, (gp.n + kWgN - 1) / kWgN, {}};
  ws_run<Cfg, Pipelined>(Fp8BlockGemmParams{}, tiles, ws_smem);
}

// Grouped with TMA loads (kWgmmaWsTmaGrouped): map_a over all permuted rows [rows][k] with kM x
// 128-byte boxes; maps_b[e] over expert e's weight [n][k] with 128 x 128-byte boxes (128-byte
// aligned, in global memory; slots of experts without rows are never read). The host builds them
// (moe.cpp, fp8_block_gemm_launch.cu).
// SmemStore: kWgmmaWsTmaGroupedSt (the output through shared memory, ws_store_tile_smem; its
// launcher pairs it with Pipelined = false: with two partial accumulators the store spills).
// SmemScales: the block scales through the ring (kWgmmaWsTmaGroupedSc); ExpertMajor: the tile
// order of wgmma::grouped_expert_major (kWgmmaWsTmaGroupedX; both: ScX); Split64: tiles of <= 64
// rows as two 64 x 64 column halves (with both: ScXH).
// Cross: the cross-step schedule (WsCfg::kCross; kWgmmaWsTmaGroupedC / ScC / ScXC).
template <bool Pipelined, bool SmemStore, bool SmemScales = false, bool ExpertMajor = false,
          bool Split64 = false, bool Cross = false>
__global__ void __launch_bounds__(WsCfg<2, true>::kThreads, WsCfg<2, true>::kBlocksPerSm)
    fp8_grouped_gemm_wgmma_tma_kernel(const __grid_constant__ GroupedGemmParams gp, int row_tiles,
                                      const __grid_constant__ CUtensorMap map_a,
                                      const CUtensorMap* maps_b) {
  using Cfg = WsCfg<2, true, SmemStore, SmemScales, Split64, Cross>;
  extern __shared__ __align__(16) uint8_t ws_smem[];
  WsGroupedTmaTiles<Cfg, ExpertMajor> tiles;
  tiles.gp = &gp;
  tiles.row_tiles = row_tiles;
  tiles.tiles_n = (gp.n + kWgN - 1) / kWgN;
  tiles.cursor = {};
  tiles.maps = maps_b;
  ws_run<Cfg, Pipelined>(Fp8BlockGemmParams{}, tiles, ws_smem, &map_a, nullptr);
}

// A multicast (kWgmmaWsTmaGroupedScCM: ScC in clusters of two, WsCfg::kPair):
// launched with cluster dimension 2 over an even grid; map_a over all permuted rows with 64-row
// boxes (each CTA loads one half of a tile's A box), maps_b as above (boxes of TileN rows).
// TileN = 192 (kWgmmaWsTmaGroupedScMW): the same with 128 x 192 tiles and ws_consume_wide.
// Scale warps: three for ScCM (+3-6% over one), one for ScMW (4-7% more TFLOP/s at 4K-64K
// tokens than three sharing its 5 slots).
template <int TileN>
using WsPairCfg = WsCfg<2, true, TileN == 192, true, false, TileN == 128, true, TileN,
                        TileN == 128 ? 3 : 1>;
template <int TileN>
__global__ void __launch_bounds__(WsCfg<2, true>::kThreads, WsCfg<2, true>::kBlocksPerSm)
    fp8_grouped_gemm_wgmma_tma_pair_kernel(const __grid_constant__ GroupedGemmParams gp, int row_tiles,
                                           const __grid_constant__ CUtensorMap map_a,
                                           const CUtensorMap* maps_b) {
  using Cfg = WsPairCfg<TileN>;
  extern __shared__ __align__(16) uint8_t ws_smem[];
  WsPairedTmaTiles<Cfg> tiles;
  tiles.gp = &gp;
  tiles.row_tiles = row_tiles;
  tiles.tiles_n = (gp.n + Cfg::kN - 1) / Cfg::kN;
  tiles.cursor = {};
  tiles.maps = maps_b;
  tiles.rank = static_cast<int>(cluster_rank());
  ws_run<Cfg, true>(Fp8BlockGemmParams{}, tiles, ws_smem, &map_a, nullptr);
}

}  // namespace hymoe::gpu::kernels
