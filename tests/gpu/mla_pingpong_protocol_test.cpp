// The barrier protocol of MLA decode's kWgmmaPingPong (kernels/cuda/mla_decode_wgmma_pp.cuh),
// checked on the CPU: a model of mbarriers (as wgmma_pipeline_test.cpp's: try_wait.parity as the
// PTX ISA defines it) driving the two warpgroups' 8 warps as independent agents, each running the
// kernel's per-tile steps with the parities of wgmma_layout.h (mla_pp_tile_parity); copies land
// at random times, and a wgmma group counts as reading its operands until the warp's
// wgmma.wait_group retires it (a warp's part reads the whole tile as B, and its own 16 rows of P).
// Both orders of the owner's release (the kernel's TMA and cp.async variants). Under random
// interleavings: every S and P V reads the tile it expects, every P V from shared
// memory reads the P and maxima rows of its tile, no copy or P store
// lands on something a wgmma in flight still reads, nothing deadlocks; and the model catches the
// mistakes the design avoids (one P barrier for both warpgroups, a load without the empty wait,
// a stage released by the other warpgroup only: this model caught that one in the kernel).
// Host-only (GpuHost.*: run anywhere).
#include <gtest/gtest.h>

#include <array>
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

struct PpModel {
  int tiles = 5;
  bool shared_p_barrier = false;  // injected bug: one P barrier for both warpgroups
  bool skip_empty_wait = false;   // injected bug: refill a stage without the empty wait
  // injected bug (this design's first version): only the other warpgroup releases a stage, so a
  // warp refills it while its own warpgroup's other warps may still read it
  bool owner_skips_release = false;
  // The kernel's cp.async order (kEarly): the owner waits for its own P V_{j-1} and releases the
  // previous stage before it waits for tile j (the TMA order releases after issuing S_j).
  bool early_release = false;
};

enum class Outcome { kOk, kDeadlock, kWrongData, kOverwrite };

enum class Op {
  kWaitFull,    // a = stage, parity; then the stage must hold tile j (every loader warp's part)
  kWaitEmpty,   // a = stage
  kWaitP,       // a = owner; then this warp's rows of P and of the maxima slot must hold tile j
  kIssueS,      // S_j: reads stage j % 2
  kIssuePvRs,   // P V_j from registers: reads stage j % 2
  kIssuePvSs,   // P V_j from shared memory: reads stage j % 2 and P
  kWait0,       // wgmma.wait_group 0
  kWait1,       // wgmma.wait_group 1
  kArriveEmpty, // a = stage
  kStoreP,      // this warp's part of P_j and of the maxima slot j % 2
  kArriveP,     // a = owner
  kLoad,        // this warp's part of tile j into stage a, then its arrival on full[a]
};

struct Step {
  Op op;
  int j = 0, a = 0;
  uint32_t parity = 0;
};

// The kernel's steps for warp `warp` (warpgroup warp / 4), tile by tile.
std::vector<Step> program(const PpModel& m, int warp) {
  const int wg = warp / 4;
  std::vector<Step> s;
  if (wg < m.tiles) s.push_back({Op::kLoad, wg, wg});
  for (int j = 0; j < m.tiles; ++j) {
    const int owner = j % 2;
    const uint32_t use = mla_pp_tile_parity(j);
    if (owner == wg) {
      if (m.early_release) {
        s.push_back({Op::kWait0, j});
        if (j > 0) s.push_back({Op::kArriveEmpty, j, wg ^ 1});
        s.push_back({Op::kWaitFull, j, wg, use});
        s.push_back({Op::kIssueS, j});
      } else {
        s.push_back({Op::kWaitFull, j, wg, use});
        s.push_back({Op::kIssueS, j});
        s.push_back({Op::kWait1, j});
        if (j > 0) s.push_back({Op::kArriveEmpty, j, wg ^ 1});
      }
      s.push_back({Op::kWait0, j});
      s.push_back({Op::kStoreP, j});
      s.push_back({Op::kArriveP, j, wg});
      s.push_back({Op::kIssuePvRs, j});
    } else {
      s.push_back({Op::kWait0, j});
      if (j > 0 && !m.owner_skips_release) s.push_back({Op::kArriveEmpty, j, wg});
      if (j >= 1 && j + 1 < m.tiles) {
        if (!m.skip_empty_wait) s.push_back({Op::kWaitEmpty, j, wg, mla_pp_tile_parity(j - 1)});
        s.push_back({Op::kLoad, j + 1, wg});
      }
      s.push_back({Op::kWaitP, j, owner, m.shared_p_barrier ? uint32_t(j & 1) : use});
      s.push_back({Op::kWaitFull, j, owner, use});
      s.push_back({Op::kIssuePvSs, j});
    }
  }
  s.push_back({Op::kWait0, m.tiles});
  return s;
}

Outcome simulate(const PpModel& m, std::mt19937_64& rng) {
  constexpr int kWarps = 8;
  // Arrivals per phase: full and P from the owner's 4 warps (each warp standing for its 32
  // threads), empty from all 8 warps. With shared_p_barrier both warpgroups
  // arrive on p[0].
  std::vector<MBarrier> full(2, MBarrier(4)), p(2, MBarrier(4));
  std::vector<MBarrier> empty(2, MBarrier(m.owner_skips_release ? 4 : 8));
  std::array<std::array<int, 4>, 2> stage{};  // [stage][loader warp part]: tile held
  std::array<int, 4> pbuf{};                  // [writer warp part]: tile of P held
  std::array<std::array<int, 4>, 2> mslot{};  // [slot][writer warp part]: tile of the maxima
  for (auto& st : stage) st.fill(-1);
  pbuf.fill(-1);
  for (auto& ms : mslot) ms.fill(-1);
  // A warp's part of a wgmma reads the whole tile (B) and, from P, only the warp's 16 rows.
  struct Group {
    int stage;
    int p_part;  // -1: none
  };
  struct Warp {
    std::vector<Step> prog;
    size_t pc = 0;
    std::deque<Group> groups;                 // wgmma groups in flight, oldest first
    std::deque<std::pair<int, int>> copies;   // (stage, tile) issued, not landed; -1 tile: arrival
  };
  std::vector<Warp> warps(kWarps);
  for (int w = 0; w < kWarps; ++w) warps[w].prog = program(m, w);
  auto stage_read = [&](int st) {
    for (const Warp& w : warps)
      for (const Group& g : w.groups)
        if (g.stage == st) return true;
    return false;
  };
  auto p_part_read = [&](int part) {
    for (const Warp& w : warps)
      for (const Group& g : w.groups)
        if (g.p_part == part) return true;
    return false;
  };
  auto p_bar = [&](int owner) -> MBarrier& { return p[m.shared_p_barrier ? 0 : owner]; };
  auto enabled = [&](const Warp& w) {
    if (w.pc == w.prog.size()) return false;
    const Step& s = w.prog[w.pc];
    switch (s.op) {
      case Op::kWaitFull: return full[s.a].try_wait_parity(s.parity);
      case Op::kWaitEmpty: return empty[s.a].try_wait_parity(s.parity);
      case Op::kWaitP: return p_bar(s.a).try_wait_parity(s.parity);
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
      const auto [st, tile] = w.copies.front();
      w.copies.pop_front();
      if (tile < 0) {
        full[st].arrive();
      } else {
        if (stage_read(st)) return Outcome::kOverwrite;
        stage[st][part] = tile;
      }
      continue;
    }
    const Step s = w.prog[w.pc++];
    switch (s.op) {
      case Op::kWaitFull:
        for (int v : stage[s.a])
          if (v != s.j) return Outcome::kWrongData;
        break;
      case Op::kWaitEmpty: break;
      case Op::kWaitP:  // the warp reads its own rows of P and of the maxima
        if (pbuf[part] != s.j || mslot[s.j % 2][part] != s.j) return Outcome::kWrongData;
        break;
      case Op::kIssueS: w.groups.push_back({s.j % 2, -1}); break;
      case Op::kIssuePvRs: w.groups.push_back({s.j % 2, -1}); break;
      case Op::kIssuePvSs: w.groups.push_back({s.j % 2, part}); break;
      case Op::kWait0: w.groups.clear(); break;
      case Op::kWait1:
        while (w.groups.size() > 1) w.groups.pop_front();
        break;
      case Op::kArriveEmpty: empty[s.a].arrive(); break;
      case Op::kStoreP:
        if (p_part_read(part)) return Outcome::kOverwrite;
        pbuf[part] = s.j;
        mslot[s.j % 2][part] = s.j;
        break;
      case Op::kArriveP: p_bar(wg).arrive(); break;
      case Op::kLoad:
        if (stage_read(s.a)) return Outcome::kOverwrite;
        w.copies.push_back({s.a, s.j});
        w.copies.push_back({s.a, -1});
        break;
    }
  }
}

TEST(GpuHost, MlaPingPongProtocolDeliversEveryTile) {
  auto rng = test::make_rng();
  for (const bool early : {false, true})
    for (int tiles = 0; tiles <= 9; ++tiles)
      for (int run = 0; run < 300; ++run) {
        PpModel m;
        m.tiles = tiles;
        m.early_release = early;
        ASSERT_EQ(simulate(m, rng), Outcome::kOk)
            << tiles << " tiles, run " << run << (early ? ", early release" : "");
      }
}

TEST(GpuHost, MlaPingPongProtocolModelCatchesMistakes) {
  auto rng = test::make_rng();
  // One P barrier for both warpgroups: a warp whose own warpgroup has not finished arriving for
  // tile j - 1 sees the phase before last complete and reads a stale P.
  bool caught = false;
  for (int run = 0; run < 2000 && !caught; ++run) {
    PpModel m;
    m.tiles = 8;
    m.shared_p_barrier = true;
    const Outcome o = simulate(m, rng);
    caught = o == Outcome::kWrongData || o == Outcome::kDeadlock;
  }
  EXPECT_TRUE(caught);
  for (const bool early : {false, true}) {
    caught = false;
    for (int run = 0; run < 2000 && !caught; ++run) {
      PpModel m;
      m.tiles = 8;
      m.skip_empty_wait = true;
      m.early_release = early;
      const Outcome o = simulate(m, rng);
      caught = o == Outcome::kOverwrite || o == Outcome::kWrongData;
    }
    EXPECT_TRUE(caught) << (early ? "early release" : "");
  }
  caught = false;
  for (int run = 0; run < 2000 && !caught; ++run) {
    PpModel m;
    m.tiles = 8;
    m.owner_skips_release = true;
    caught = simulate(m, rng) == Outcome::kOverwrite;
  }
  EXPECT_TRUE(caught);
}

}  // namespace
}  // namespace hymoe::gpu::wgmma
