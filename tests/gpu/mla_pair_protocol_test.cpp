// The barrier protocol of MLA decode's kWgmmaPair (kernels/cuda/mla_decode_wgmma_pair.cuh),
// checked on the CPU: a model of mbarriers (mbarrier_model.h: try_wait.parity as the PTX ISA
// defines it) driving the two warpgroups' 8 warps as independent agents, each running the
// kernel's steps pair by pair. A tile is two halves (column blocks 0-3, which only warpgroup 0's
// P V reads besides S, and 4-8), each loaded by its warpgroup's thread 0 (both halves of the
// first two tiles by the block's thread 0) and landing at a random later time on its own barrier
// (the kernel's per-block barriers, 1 arrival and the bytes); a wgmma group counts as reading its
// operands until the warp's wgmma.wait_group retires it (a warp's part reads the whole tile half
// as B, and its own rows of P). Under random interleavings: every S and P V reads the tile it
// expects, every P V from shared memory reads the P rows of its tile, the row maxima read are the
// pair's, no copy, P store or tail zeroing lands on something a wgmma in flight still reads,
// nothing deadlocks; and the model catches the mistakes the design avoids. Host-only (GpuHost.*:
// run anywhere).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "mbarrier_model.h"

namespace hymoe::gpu::wgmma {
namespace {

using test_model::MBarrier;

struct PairModel {
  int tiles = 5;
  bool skip_empty_wait = false;  // injected bug: a half refilled without its half_empty wait
  // injected bug: warpgroup 0 refills its half of stage 1 before its P_b V1 is done (no wait<1>)
  bool early_stage1_refill = false;
};

enum class Outcome { kOk, kDeadlock, kWrongData, kOverwrite };

enum class Op {
  kWaitPiece,      // a = stage, h = half, j = tile: then the half must hold tile j
  kWaitHalfEmpty,  // a = stage, h = warpgroup
  kWaitM,          // a = writer warpgroup; then its maxima slot must hold pair j
  kWaitP,          // a = P block; then this warp's rows of it must hold tile j
  kIssueS,         // a = stage, h = half read (S's wgmmas over that half)
  kIssuePvRs,      // a = stage: reads this warpgroup's half
  kIssuePvSs,      // a = stage: reads this warpgroup's half and P block h
  kWait0,
  kWait1,
  kArriveHalfEmpty,  // a = stage
  kWriteM,           // j = pair: this warp's rows of the warpgroup's maxima slot
  kArriveM,
  kStoreP,           // j = tile: this warp's rows of P block (= warpgroup)
  kArriveP,
  kZeroTail,         // a = stage: zeroes rows of both halves' V columns
  kArriveSync,       // the warpgroup's named barrier (bar.sync 1 + wg, 128 threads): arrive,
  kWaitSync,         // then wait for all 4 warps (parity: its use)
  kLoad,             // j = tile, h = half: into stage j % 2
};

struct Step {
  Op op;
  int j = 0, a = 0, h = 0;
  uint32_t parity = 0;
};

std::vector<Step> program(const PairModel& m, int warp) {
  const int wg = warp / 4;
  const bool loader = warp % 4 == 0;  // the warp of thread 0
  const int tiles = m.tiles, pairs = (tiles + 1) / 2;
  auto par = [](int j) { return static_cast<uint32_t>((j / 2) & 1); };  // tile j's phase parity
  std::vector<Step> s;
  auto wait_tile_half = [&](int j, int h) { s.push_back({Op::kWaitPiece, j, j % 2, h, par(j)}); };
  // A warpgroup's release of its half of stage st after pair i, and the refill with tile j.
  auto refill = [&](int st, int i, int j) {
    s.push_back({Op::kArriveHalfEmpty, j, st});
    if (j < tiles) {
      if (!m.skip_empty_wait)
        s.push_back({Op::kWaitHalfEmpty, j, st, wg, static_cast<uint32_t>(i & 1)});
      if (loader) s.push_back({Op::kLoad, j, 0, wg});
    }
  };
  // The last tile's rows past the end: zeroed between two warpgroup barriers (every warp's part
  // of S done before, every thread's stores done after).
  auto zero_tail = [&](int st) {
    s.push_back({Op::kArriveSync, 0});
    s.push_back({Op::kWaitSync, 0, 0, 0, 0});
    s.push_back({Op::kZeroTail, 0, st});
    s.push_back({Op::kArriveSync, 0});
    s.push_back({Op::kWaitSync, 0, 0, 0, 1});
  };
  if (warp == 0)  // thread 0 of the block: both halves of the first two tiles
    for (int j = 0; j < 2 && j < tiles; ++j)
      for (int h = 0; h < 2; ++h) s.push_back({Op::kLoad, j, 0, h});
  if (wg < tiles) {
    for (int h = 0; h < 2; ++h) {
      wait_tile_half(wg, h);
      s.push_back({Op::kIssueS, wg, wg, h});
    }
  }
  for (int i = 0; i < pairs; ++i) {
    const int t0 = 2 * i, t1 = 2 * i + 1;
    const bool has_b = t1 < tiles, next = t0 + 2 < tiles;
    const uint32_t use = static_cast<uint32_t>(i & 1);
    s.push_back({Op::kWait0, t0});
    if (wg == 0) {
      if (t0 == tiles - 1) zero_tail(0);
      s.push_back({Op::kWriteM, i});
      s.push_back({Op::kArriveM, i});
      s.push_back({Op::kIssuePvRs, t0, 0});
      s.push_back({Op::kWaitM, i, 1, 0, use});
      s.push_back({Op::kStoreP, t0});
      s.push_back({Op::kArriveP, t0});
      s.push_back({Op::kWait0, t0});
      refill(0, i, t0 + 2);
      if (has_b) {
        s.push_back({Op::kWaitP, t1, 1, 0, use});
        wait_tile_half(t1, 0);
        s.push_back({Op::kIssuePvSs, t1, 1, 1});
      }
      if (next) {
        wait_tile_half(t0 + 2, 0);
        s.push_back({Op::kIssueS, t0 + 2, 0, 0});
        if (!m.early_stage1_refill) s.push_back({Op::kWait1, t0});
        refill(1, i, t1 + 2);
        wait_tile_half(t0 + 2, 1);
        s.push_back({Op::kIssueS, t0 + 2, 0, 1});
      }
    } else {
      if (has_b && t1 == tiles - 1) zero_tail(1);
      s.push_back({Op::kWaitM, i, 0, 0, use});
      s.push_back({Op::kWriteM, i});
      s.push_back({Op::kArriveM, i});
      if (has_b) {
        s.push_back({Op::kStoreP, t1});
        s.push_back({Op::kArriveP, t1});
        s.push_back({Op::kIssuePvRs, t1, 1});
      } else {
        s.push_back({Op::kArriveP, t1});
      }
      s.push_back({Op::kWaitP, t0, 0, 0, use});
      wait_tile_half(t0, 1);
      s.push_back({Op::kIssuePvSs, t0, 0, 0});
      if (has_b) {
        s.push_back({Op::kWait1, t1});
        refill(1, i, t1 + 2);
      }
      s.push_back({Op::kWait0, t1});
      refill(0, i, t0 + 2);
      if (t1 + 2 < tiles) {
        wait_tile_half(t1 + 2, 1);
        s.push_back({Op::kIssueS, t1 + 2, 1, 1});
        wait_tile_half(t1 + 2, 0);
        s.push_back({Op::kIssueS, t1 + 2, 1, 0});
      }
    }
  }
  s.push_back({Op::kWait0, tiles});
  return s;
}

Outcome simulate(const PairModel& m, std::mt19937_64& rng) {
  constexpr int kWarps = 8;
  // piece[stage][half]: 1 event a phase (the half landed); half_empty[stage][wg], m_full[wg],
  // p_full[wg]: the warpgroup's 4 warps (each standing for its 32 threads).
  std::array<std::vector<MBarrier>, 2> piece{std::vector<MBarrier>(2, MBarrier(1)),
                                             std::vector<MBarrier>(2, MBarrier(1))};
  std::array<std::vector<MBarrier>, 2> half_empty{std::vector<MBarrier>(2, MBarrier(4)),
                                                  std::vector<MBarrier>(2, MBarrier(4))};
  std::vector<MBarrier> m_full(2, MBarrier(4)), p_full(2, MBarrier(4)), sync(2, MBarrier(4));
  std::array<std::array<int, 2>, 2> stage{};    // [stage][half]: tile held
  std::array<std::array<int, 4>, 2> pbuf{};     // [P block][writer warp part]: tile
  std::array<std::array<int, 4>, 2> mslot{};    // [warpgroup][writer warp part]: pair
  for (auto& x : stage) x.fill(-1);
  for (auto& x : pbuf) x.fill(-1);
  for (auto& x : mslot) x.fill(-1);
  struct Group {
    int stage, half;  // half -1: both
    int p_block;      // -1: none
  };
  struct Copy {
    int stage, half, tile;
  };
  struct Warp {
    std::vector<Step> prog;
    size_t pc = 0;
    std::deque<Group> groups;
    std::deque<Copy> copies;
  };
  std::vector<Warp> warps(kWarps);
  for (int w = 0; w < kWarps; ++w) warps[w].prog = program(m, w);
  auto stage_read = [&](int st, int h) {
    for (const Warp& w : warps)
      for (const Group& g : w.groups)
        if (g.stage == st && (h < 0 || g.half < 0 || g.half == h)) return true;
    return false;
  };
  auto p_read = [&](int blk, int part) {
    for (int i = 0; i < kWarps; ++i)
      for (const Group& g : warps[i].groups)
        if (g.p_block == blk && i % 4 == part) return true;
    return false;
  };
  auto enabled = [&](const Warp& w) {
    if (w.pc == w.prog.size()) return false;
    const Step& s = w.prog[w.pc];
    switch (s.op) {
      case Op::kWaitPiece: return piece[s.a][s.h].try_wait_parity(s.parity);
      case Op::kWaitHalfEmpty: return half_empty[s.a][s.h].try_wait_parity(s.parity);
      case Op::kWaitM: return m_full[s.a].try_wait_parity(s.parity);
      case Op::kWaitP: return p_full[s.a].try_wait_parity(s.parity);
      case Op::kWaitSync:
        return sync[static_cast<int>(&w - warps.data()) / 4].try_wait_parity(s.parity);
      default: return true;
    }
  };
  for (;;) {
    const auto [move, i] = test_model::pick_move(warps, enabled, rng);
    if (move == test_model::Move::kDeadlock) return Outcome::kDeadlock;
    if (move == test_model::Move::kDone) return Outcome::kOk;
    Warp& w = warps[i];
    const int part = i % 4, wg = i / 4;
    if (move == test_model::Move::kLand) {
      const Copy cp = w.copies.front();
      w.copies.pop_front();
      if (stage_read(cp.stage, cp.half)) return Outcome::kOverwrite;
      stage[cp.stage][cp.half] = cp.tile;
      piece[cp.stage][cp.half].arrive();
      continue;
    }
    const Step s = w.prog[w.pc++];
    switch (s.op) {
      case Op::kWaitPiece:
        if (stage[s.a][s.h] != s.j) return Outcome::kWrongData;
        break;
      case Op::kWaitHalfEmpty: break;
      case Op::kWaitM:
        if (mslot[s.a][part] != s.j) return Outcome::kWrongData;
        break;
      case Op::kWaitP:
        if (pbuf[s.a][part] != s.j) return Outcome::kWrongData;
        break;
      case Op::kIssueS: w.groups.push_back({s.a, s.h, -1}); break;
      case Op::kIssuePvRs: w.groups.push_back({s.a, wg, -1}); break;
      case Op::kIssuePvSs: w.groups.push_back({s.a, wg, s.h}); break;
      case Op::kWait0: w.groups.clear(); break;
      case Op::kWait1:
        while (w.groups.size() > 1) w.groups.pop_front();
        break;
      case Op::kArriveHalfEmpty: half_empty[s.a][wg].arrive(); break;
      case Op::kWriteM: mslot[wg][part] = s.j; break;
      case Op::kArriveM: m_full[wg].arrive(); break;
      case Op::kStoreP:
        if (p_read(wg, part)) return Outcome::kOverwrite;
        pbuf[wg][part] = s.j;
        break;
      case Op::kArriveP: p_full[wg].arrive(); break;
      case Op::kZeroTail:
        if (stage_read(s.a, -1)) return Outcome::kOverwrite;
        break;
      case Op::kArriveSync: sync[wg].arrive(); break;
      case Op::kWaitSync: break;
      case Op::kLoad:
        if (stage_read(s.j % 2, s.h)) return Outcome::kOverwrite;
        w.copies.push_back({s.j % 2, s.h, s.j});
        break;
    }
  }
}

TEST(GpuHost, MlaPairProtocolDeliversEveryTile) {
  auto rng = test::make_rng();
  for (int tiles = 0; tiles <= 9; ++tiles)
    for (int run = 0; run < 300; ++run) {
      PairModel m;
      m.tiles = tiles;
      ASSERT_EQ(simulate(m, rng), Outcome::kOk) << tiles << " tiles, run " << run;
    }
}

TEST(GpuHost, MlaPairProtocolModelCatchesMistakes) {
  auto rng = test::make_rng();
  auto caught = [&](const PairModel& m) {
    for (int run = 0; run < 2000; ++run) {
      const Outcome o = simulate(m, rng);
      if (o == Outcome::kOverwrite || o == Outcome::kWrongData) return true;
    }
    return false;
  };
  PairModel m;
  m.tiles = 8;
  m.skip_empty_wait = true;  // thread 0 loads while its warpgroup's other warps still read
  EXPECT_TRUE(caught(m));
  m.skip_empty_wait = false;
  m.early_stage1_refill = true;  // warpgroup 0's P_b V1 still reads the half it refills
  EXPECT_TRUE(caught(m));
}

}  // namespace
}  // namespace hymoe::gpu::wgmma
