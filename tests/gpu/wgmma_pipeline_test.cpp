// The warp-specialised wgmma kernel's bookkeeping (wgmma_layout.h), checked on the CPU:
//   - the ring protocol: a model of mbarriers (count, pending arrivals, phase; try_wait.parity as
//     the PTX ISA defines it) driving producer threads and consumer warps that walk the ring with
//     RingPos / full_wait_parity / empty_wait_parity, under random interleavings and random
//     landing times of the copies: every consumer reads exactly the K block it expects, no copy
//     lands in a slot a consumer is still reading, nothing deadlocks; and the model catches the
//     two classic mistakes (a wrong parity, an empty barrier counting too few consumers);
//   - the producers' shared-memory addressing (cp.async loader, TMA's swizzle) against the layout;
//   - the persistent grouped schedule: GroupedCursor, walked with each block's increasing tile
//     ids, finds the same expert and tile as a scan from the first expert, and the blocks cover
//     every (row tile, column tile) once.
// Host-only (GpuHost.*: run anywhere).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "hymoe/gpu/wgmma_layout.h"
#include "mbarrier_model.h"

namespace hymoe::gpu::wgmma {
namespace {

using test_model::MBarrier;

struct RingModel {
  int stages = 6, blocks = 40, producers = 4, consumers = 8;
  // Slots a consumer holds at once: 1 (wait_group 0 after each block's wgmmas, then the release)
  // or 2 (the cross-step schedule, WsCfg::kCross: block kb + 1 is issued before kb's slot is
  // released, which follows wait_group 1; all held slots drain at the end of each tile of
  // tile_blocks blocks, before the next tile's first wait).
  int lag = 1;
  int tile_blocks = 0;            // 0: one tile of `blocks`
  bool bad_parity = false;        // injected bug: the producer waits on parity `phase`
  int empty_count_shortfall = 0;  // injected bug: empty barriers count too few consumers
  bool early_release = false;     // injected bug: a slot released when its wgmmas are issued
  // Producers sharing the slots (kSmemScales' scale warps, ws_produce_scales): with
  // turn_groups > 1, producer 0 (the TMA thread) fills every block and producers 1.. form
  // turn_groups groups of `producers - 1` / turn_groups lanes, group g filling the blocks of the
  // slots s with s % turn_groups == g and passing over the others without waiting; a full
  // barrier then counts 1 + one group's lanes.
  int turn_groups = 1;
  bool wrong_turn_count = false;  // injected bug: full barriers count every producer anyway
  // Injected bug: group g fills blocks b with b % turn_groups == g instead (an earlier rule):
  // where turn_groups does not divide the slots, a slot's blocks go to the groups in turn, and
  // on a short ring a group's waits pass over phases of the slot it did not fill.
  bool turn_by_block = false;
};

enum class Outcome { kOk, kDeadlock, kWrongData, kOverwrite };

// One random run of the protocol; K block b fills slot data with b.
Outcome simulate(const RingModel& m, std::mt19937_64& rng) {
  const int group_size = m.turn_groups > 1 ? (m.producers - 1) / m.turn_groups : 0;
  // Whether producer i fills K block b.
  auto fills = [&](int i, int b) {
    const int key = m.turn_by_block ? b : b % m.stages;
    return m.turn_groups == 1 || i == 0 || (i - 1) / group_size == key % m.turn_groups;
  };
  const int full_count = m.turn_groups > 1 && !m.wrong_turn_count ? 1 + group_size : m.producers;
  std::vector<MBarrier> full(m.stages, MBarrier(full_count));
  std::vector<MBarrier> empty(m.stages, MBarrier(m.consumers - m.empty_count_shortfall));
  std::vector<std::vector<int>> data(m.stages, std::vector<int>(m.producers, -1));
  std::vector<int> readers(m.stages, 0);
  struct Producer {
    RingPos pos{0, 0};
    int next = 0;
    std::deque<std::pair<bool, int>> in_flight;  // (is_arrival, stage), issued, not landed
    std::deque<int> blocks;                      // the K block of each copy in flight
  };
  struct Consumer {
    RingPos pos{0, 0};   // the next slot to wait for
    RingPos tail{0, 0};  // the oldest slot held
    int next = 0;
    int held = 0;        // slots issued, not yet released (their wgmmas may still read them)
  };
  const int tile_blocks = m.tile_blocks > 0 ? m.tile_blocks : m.blocks;
  std::vector<Producer> prod(m.producers);
  std::vector<Consumer> cons(m.consumers);
  for (;;) {
    // Enabled actions: 0 issue / 1 land for producer i; 2 start / 3 finish reading for consumer i.
    std::vector<std::pair<int, int>> actions;
    for (int i = 0; i < m.producers; ++i) {
      Producer& p = prod[i];
      while (p.next < m.blocks && !fills(i, p.next)) {  // another group's block: pass over it
        p.pos = ring_next(p.pos, m.stages);
        ++p.next;
      }
      const uint32_t q = m.bad_parity ? full_wait_parity(p.pos) : empty_wait_parity(p.pos);
      if (p.next < m.blocks && empty[p.pos.stage].try_wait_parity(q)) actions.push_back({0, i});
      if (!p.in_flight.empty()) actions.push_back({1, i});
    }
    for (int i = 0; i < m.consumers; ++i) {
      const Consumer& c = cons[i];
      const bool tile_end = c.next % tile_blocks == 0 || c.next == m.blocks;  // (issued all)
      // Release the oldest: with `lag` slots held (wait_group lag - 1 covers the oldest), or
      // draining at a tile's end (wait_group 0).
      if (c.held > 0 && (c.held == m.lag || tile_end)) actions.push_back({3, i});
      // Wait for and issue the next block: below `lag` held, and a new tile only once drained.
      if (c.held < m.lag && c.next < m.blocks && !(c.next % tile_blocks == 0 && c.held > 0) &&
          full[c.pos.stage].try_wait_parity(full_wait_parity(c.pos)))
        actions.push_back({2, i});
    }
    if (actions.empty()) {
      for (const Consumer& c : cons)
        if (c.next < m.blocks || c.held > 0) return Outcome::kDeadlock;
      return Outcome::kOk;
    }
    const auto [kind, i] = actions[std::uniform_int_distribution<size_t>(0, actions.size() - 1)(rng)];
    if (kind == 0) {  // the copies of K block `next` into the slot, then the async arrival
      Producer& p = prod[i];
      p.in_flight.push_back({false, p.pos.stage});
      p.blocks.push_back(p.next);
      p.in_flight.push_back({true, p.pos.stage});
      p.blocks.push_back(p.next);
      p.pos = ring_next(p.pos, m.stages);
      ++p.next;
    } else if (kind == 1) {  // the oldest copy lands, or the arrival once every earlier one did
      Producer& p = prod[i];
      const auto [arrival, stage] = p.in_flight.front();
      const int block = p.blocks.front();
      p.in_flight.pop_front();
      p.blocks.pop_front();
      if (arrival) {
        full[stage].arrive();
      } else {
        if (readers[stage] > 0) return Outcome::kOverwrite;
        data[stage][i] = block;
      }
    } else if (kind == 2) {  // wait passed: every producer's part must hold K block `next`
      Consumer& c = cons[i];
      for (int j = 0; j < m.producers; ++j)
        if (fills(j, c.next) && data[c.pos.stage][j] != c.next) return Outcome::kWrongData;
      ++readers[c.pos.stage];
      if (m.early_release) empty[c.pos.stage].arrive();
      ++c.held;
      c.pos = ring_next(c.pos, m.stages);
      ++c.next;
    } else {  // the oldest slot's wgmmas done: one arrival on its empty barrier
      Consumer& c = cons[i];
      --readers[c.tail.stage];
      if (!m.early_release) empty[c.tail.stage].arrive();
      --c.held;
      c.tail = ring_next(c.tail, m.stages);
    }
  }
}

TEST(GpuHost, WgmmaWsRingProtocolDeliversEveryBlockInOrder) {
  auto rng = test::make_rng();
  // producers 33: kWgmmaWsTmaGroupedSc's full barrier (the TMA thread and the 32 lanes of the
  // scale warp, each walking the ring and arriving on its own)
  for (const int stages : {1, 2, 3, 6})
    for (const int producers : {1, 4, 33})
      for (int run = 0; run < (producers > 4 ? 40 : 200); ++run) {
        RingModel m;
        m.stages = stages;
        m.producers = producers;
        m.blocks = 1 + static_cast<int>(rng() % 30);
        ASSERT_EQ(simulate(m, rng), Outcome::kOk) << stages << " stages, " << m.blocks << " blocks";
      }
}

// The cross-step schedule (kWgmmaWsTmaGroupedC / ScC / ScXC, kWgmmaWsTmaC): each consumer holds
// up to two slots, releasing the older after wait_group 1 and draining at each tile's end; with
// the kernel's 6 slots (and any ring of 2 or more) every block arrives in order, none
// overwritten, no deadlock, over tiles of 1 to 7 blocks (the persistent ring carrying on).
TEST(GpuHost, WgmmaWsRingProtocolCrossStepReleaseOrder) {
  auto rng = test::make_rng();
  for (const int stages : {2, 3, 6})
    for (const int producers : {1, 33})
      for (int run = 0; run < (producers > 4 ? 40 : 200); ++run) {
        RingModel m;
        m.lag = 2;
        m.stages = stages;
        m.producers = producers;
        m.tile_blocks = 1 + static_cast<int>(rng() % 7);
        m.blocks = m.tile_blocks * (1 + static_cast<int>(rng() % 5));
        ASSERT_EQ(simulate(m, rng), Outcome::kOk)
            << stages << " stages, " << m.blocks << " blocks in tiles of " << m.tile_blocks;
      }
  // A one-slot ring cannot hold the two slots: the consumer waits for block 1 in the slot it
  // has not released (the model sees the deadlock; the kernel has 6).
  RingModel one_slot;
  one_slot.lag = 2;
  one_slot.stages = 1;
  one_slot.blocks = 4;
  EXPECT_EQ(simulate(one_slot, rng), Outcome::kDeadlock);
  // Releasing a slot when its wgmmas are issued (before the wait that covers them) lets the
  // producer refill it under them: some interleaving shows it.
  RingModel early;
  early.lag = 2;
  early.stages = 2;
  early.early_release = true;
  bool caught = false;
  for (int run = 0; run < 200 && !caught; ++run) caught = simulate(early, rng) != Outcome::kOk;
  EXPECT_TRUE(caught);
}

// kSmemScales' scale copies on three warps sharing the slots (ws_produce_scales: slot s is warp
// s % 3's): the TMA thread and one warp's 32 lanes complete each full barrier; every block
// arrives in order under both schedules with 6 slots (the 128 x 128 kernels) and 5 (the 128 x
// 192 one, ScMW), and with 2 or 4 (a warp without slots, uneven shares). An earlier rule, block j
// to warp j % 3, fails on a 2-slot ring (a warp passes over whole phases of a slot, which a
// parity wait cannot tell apart), and a full barrier that still counted all 97 producers would
// never complete: the model catches both.
TEST(GpuHost, WgmmaWsRingProtocolScaleWarpsShareTheSlots) {
  auto rng = test::make_rng();
  for (const int lag : {1, 2})
    for (const int stages : {2, 4, 5, 6})
      for (int run = 0; run < 30; ++run) {
        RingModel m;
        m.lag = lag;
        m.stages = stages;
        m.producers = 1 + 3 * 32;
        m.turn_groups = 3;
        m.tile_blocks = 1 + static_cast<int>(rng() % 7);
        m.blocks = m.tile_blocks * (1 + static_cast<int>(rng() % 5));
        ASSERT_EQ(simulate(m, rng), Outcome::kOk)
            << "lag " << lag << ", " << stages << " stages, " << m.blocks << " blocks";
      }
  RingModel wrong;
  wrong.producers = 1 + 3 * 32;
  wrong.turn_groups = 3;
  wrong.wrong_turn_count = true;
  EXPECT_EQ(simulate(wrong, rng), Outcome::kDeadlock);
  RingModel by_block;
  by_block.stages = 2;
  by_block.blocks = 24;
  by_block.producers = 1 + 3 * 4;
  by_block.turn_groups = 3;
  by_block.turn_by_block = true;
  bool caught = false;
  for (int run = 0; run < 200 && !caught; ++run) caught = simulate(by_block, rng) != Outcome::kOk;
  EXPECT_TRUE(caught);
}

TEST(GpuHost, WgmmaWsRingModelCatchesProtocolBugs) {
  auto rng = test::make_rng();
  RingModel wrong_parity;
  wrong_parity.bad_parity = true;
  EXPECT_EQ(simulate(wrong_parity, rng), Outcome::kDeadlock);  // every slot looks full at start
  // An empty barrier that completes after 7 of 8 consumer warps lets a copy land under the 8th
  // (or the 8th read the next fill): some interleaving shows it.
  RingModel short_count;
  short_count.empty_count_shortfall = 1;
  bool caught = false;
  for (int run = 0; run < 200 && !caught; ++run) caught = simulate(short_count, rng) != Outcome::kOk;
  EXPECT_TRUE(caught);
}

TEST(GpuHost, WgmmaRingNextWrapsAndFlipsThePhase) {
  RingPos r{0, 0};
  for (int i = 0; i < 6; ++i) r = ring_next(r, 6);
  EXPECT_EQ(r.stage, 0);
  EXPECT_EQ(r.phase, 1u);
  r = ring_next(ring_next(r, 6), 6);
  EXPECT_EQ(r.stage, 2);
  EXPECT_EQ(full_wait_parity(r), 1u);
  EXPECT_EQ(empty_wait_parity(r), 0u);
}

// The producers' addressing: the cp.async loader steps its destination by 2048 bytes per 16
// rows (rows 16 apart share the swizzle phase), covering every chunk of a 128-row tile once with
// 128 threads x 8 passes; TMA's 128-byte swizzle (PTX ISA "Tensor swizzling modes": a box row of
// 128 bytes at 1024-aligned shared memory, 16-byte chunk index XOR bits 7-9 of the offset) puts
// each byte where sw128_offset (which the wgmma descriptors read) expects it.
TEST(GpuHost, WgmmaWsProducerAddressingMatchesTheSwizzle) {
  std::vector<int> hits(128 * 128, 0);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < 8; ++i) {
      const int row = t / 8 + 16 * i, col = (t % 8) * 16;
      const uint32_t dst = sw128_offset(t / 8, col) + 2048u * i;
      ASSERT_EQ(dst, sw128_offset(row, col));
      for (int b = 0; b < 16; ++b) ++hits[dst + b];
    }
  for (int h : hits) ASSERT_EQ(h, 1);
  for (int r = 0; r < 256; ++r)
    for (int k = 0; k < 128; ++k) {
      const uint32_t linear = r * 128 + k;
      const uint32_t tma = linear ^ (((linear >> 7) & 7u) << 4);
      ASSERT_EQ(tma, sw128_offset(r, k)) << r << " " << k;
    }
}

// Reference: row tile y's expert and first row tile, scanning from expert 0.
std::pair<int, int> scan_expert(const std::vector<int32_t>& offsets, int y, int tile_m) {
  int first = 0;
  for (int e = 0; e + 1 < static_cast<int>(offsets.size()); ++e) {
    const int tiles = (offsets[e + 1] - offsets[e] + tile_m - 1) / tile_m;
    if (y < first + tiles) return {e, first};
    first += tiles;
  }
  return {static_cast<int>(offsets.size()) - 1, first};
}

TEST(GpuHost, WgmmaWsGroupedScheduleMatchesAScanAndCoversEveryTile) {
  auto rng = test::make_rng();
  for (int run = 0; run < 50; ++run) {
    const int experts = 1 + static_cast<int>(rng() % 300), tile_m = 128;
    const int tiles_n = 1 + static_cast<int>(rng() % 20);
    std::vector<int32_t> offsets(experts + 1, 0);
    int row_tiles = 0;
    for (int e = 0; e < experts; ++e) {
      const int rows = rng() % 3 == 0 ? 0 : static_cast<int>(rng() % 400);  // many empty experts
      offsets[e + 1] = offsets[e] + rows;
      row_tiles += (rows + tile_m - 1) / tile_m;
    }
    const int tiles = row_tiles * tiles_n;
    const int grid = 1 + static_cast<int>(rng() % 140);
    std::vector<int> hits(size_t(tiles), 0);
    // kWgmmaWsTmaGrouped: a tile's A box starts at permuted row offsets[e] + m0 (inside all rows)
    // and its stored rows (m0 + r < the expert's rows) cover each permuted row once per column
    // tile; its B map is slot e, an expert with rows (the host encodes only those).
    std::vector<int> stored(static_cast<size_t>(offsets[experts]) * tiles_n, 0);
    for (int b = 0; b < grid; ++b) {
      GroupedCursor cursor;
      for (int id = b; id < tiles; id += grid) {
        const int y = id / tiles_n;
        grouped_advance(cursor, y, offsets.data(), experts, tile_m);
        const auto [e, first] = scan_expert(offsets, y, tile_m);
        ASSERT_EQ(cursor.expert, e) << "y " << y;
        ASSERT_EQ(cursor.first, first) << "y " << y;
        ASSERT_LT(cursor.expert, experts);
        const int rows = offsets[e + 1] - offsets[e];
        ASSERT_LT((y - first) * tile_m, rows);  // the tile starts inside the expert's rows
        ++hits[size_t(id)];
        const int m0 = (y - first) * tile_m, a_row = offsets[e] + m0;
        ASSERT_GT(rows, 0) << "map slot " << e << " is never encoded";
        ASSERT_LT(a_row, offsets[experts]);
        for (int r = 0; r < tile_m && m0 + r < rows; ++r)
          ++stored[size_t(a_row + r) * tiles_n + id % tiles_n];
      }
    }
    for (int h : hits) ASSERT_EQ(h, 1);
    for (int h : stored) ASSERT_EQ(h, 1);
  }
}

// kWgmmaWsTmaGroupedX / ScX: grouped_expert_major visits every (expert, row tile, column tile)
// once from any grid's grid-stride walk, only experts with rows, each tile starting inside its
// expert; every permuted row is stored once per column tile; the row tiles of one expert and
// column tile have consecutive ids (the order that shares the weight tile); ids past the last
// tile find no expert.
// The A-multicast kernels' pairs (wgmma::pair_tile): over every row-tile and column-tile count
// (odd ones included) and every grid of clusters, each real tile is some (pair, rank) exactly
// once; a pair multicasts iff its two tiles share their row tile; the only tile past n is rank 1
// of the last pair when the tile count is odd, on rank 0's row tile; and each rank's row tiles
// never decrease along a cluster's pair ids (the cursor of grouped_advance only moves forward).
TEST(GpuHost, WgmmaPairTilesCoverEveryTileOnce) {
  for (int row_tiles = 1; row_tiles <= 9; ++row_tiles)
    for (int tiles_n = 1; tiles_n <= 9; ++tiles_n) {
      const int tiles = row_tiles * tiles_n, pairs = pair_count(row_tiles, tiles_n);
      ASSERT_EQ(pairs, (tiles + 1) / 2);
      std::vector<int> hits(size_t(tiles), 0);
      int past_n = 0;
      for (int i = 0; i < pairs; ++i) {
        const PairTile t0 = pair_tile(i, 0, row_tiles, tiles_n), t1 = pair_tile(i, 1, row_tiles, tiles_n);
        ASSERT_EQ(t0.multicast, t1.multicast);
        ASSERT_EQ(t0.multicast, t0.y == t1.y) << row_tiles << " x " << tiles_n << " pair " << i;
        for (const PairTile& t : {t0, t1}) {
          ASSERT_GE(t.y, 0);
          ASSERT_LT(t.y, row_tiles);
          if (t.x == tiles_n) {
            ++past_n;
            EXPECT_EQ(i, pairs - 1);
            EXPECT_TRUE(tiles % 2 == 1 && t.multicast);
            continue;
          }
          ASSERT_LT(t.x, tiles_n);
          ++hits[size_t(t.y * tiles_n + t.x)];
        }
        if (tiles_n % 2 == 0) {
          EXPECT_TRUE(t0.multicast);  // (even rows pair up within a row tile)
        }
      }
      EXPECT_EQ(past_n, tiles % 2);
      EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }))
          << row_tiles << " x " << tiles_n;
      for (const int clusters : {1, 2, 3, 7})
        for (int c = 0; c < clusters; ++c)
          for (const int rank : {0, 1}) {
            int last_y = -1;
            for (int i = c; i < pairs; i += clusters) {
              const int y = pair_tile(i, rank, row_tiles, tiles_n).y;
              ASSERT_GE(y, last_y);
              last_y = y;
            }
          }
    }
}

TEST(GpuHost, WgmmaWsGroupedExpertMajorOrderCoversEveryTileOnce) {
  auto rng = test::make_rng();
  for (int run = 0; run < 50; ++run) {
    const int experts = 1 + static_cast<int>(rng() % 300), tile_m = 128;
    const int tiles_n = 1 + static_cast<int>(rng() % 60);
    std::vector<int32_t> offsets(experts + 1, 0);
    std::vector<int> first_tile(experts, 0);  // the expert's first row tile
    int row_tiles = 0;
    for (int e = 0; e < experts; ++e) {
      // many empty experts; sizes around the 128-row tile (remainders 1..127) and ~512
      const int r = static_cast<int>(rng() % 4);
      const int rows = r == 0 ? 0 : r == 1 ? static_cast<int>(rng() % 140)
                                : r == 2 ? 110 + static_cast<int>(rng() % 40)
                                         : 480 + static_cast<int>(rng() % 64);
      offsets[e + 1] = offsets[e] + rows;
      first_tile[e] = row_tiles;
      row_tiles += (rows + tile_m - 1) / tile_m;
    }
    const int tiles = row_tiles * tiles_n;
    const int grid = 1 + static_cast<int>(rng() % 140);
    std::vector<int> hits(size_t(row_tiles) * tiles_n, 0);
    std::vector<int> stored(static_cast<size_t>(offsets[experts]) * tiles_n, 0);
    for (int b = 0; b < grid; ++b) {
      GroupedCursor cursor;
      for (int id = b; id < tiles; id += grid) {
        const GroupedTile g = grouped_expert_major(cursor, id, offsets.data(), experts, tile_m,
                                                   tiles_n);
        ASSERT_LT(g.expert, experts) << "id " << id;
        const int rows = offsets[g.expert + 1] - offsets[g.expert];
        const int r_tiles = (rows + tile_m - 1) / tile_m;
        ASSERT_GT(rows, 0) << "map slot " << g.expert << " is never encoded";
        ASSERT_GE(g.m_tile, 0);
        ASSERT_LT(g.m_tile * tile_m, rows);
        ASSERT_GE(g.n_tile, 0);
        ASSERT_LT(g.n_tile, tiles_n);
        // consecutive ids for one expert's row tiles of one column tile
        ASSERT_EQ(id, first_tile[g.expert] * tiles_n + g.n_tile * r_tiles + g.m_tile);
        ++hits[size_t(first_tile[g.expert] + g.m_tile) * tiles_n + g.n_tile];
        const int m0 = g.m_tile * tile_m;
        for (int r = 0; r < tile_m && m0 + r < rows; ++r)
          ++stored[size_t(offsets[g.expert] + m0 + r) * tiles_n + g.n_tile];
      }
      EXPECT_EQ(grouped_expert_major(cursor, tiles + b, offsets.data(), experts, tile_m, tiles_n)
                    .expert,
                experts);
    }
    for (int h : hits) ASSERT_EQ(h, 1);
    for (int h : stored) ASSERT_EQ(h, 1);
  }
}

}  // namespace
}  // namespace hymoe::gpu::wgmma
