// A CPU model of an mbarrier for the protocol tests of the wgmma kernels (wgmma_pipeline_test,
// mla_pingpong_protocol_test, mla_pair_protocol_test): phase P completes when `count` arrivals
// happened in it; try_wait.parity q is true once the phase of parity q completed, i.e.
// q != P % 2 for a barrier in phase P.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace hymoe::gpu::wgmma::test_model {

struct MBarrier {
  int count = 0, pending = 0;
  uint32_t phase = 0;
  explicit MBarrier(int n) : count(n), pending(n) {}
  void arrive() {
    if (--pending == 0) {
      ++phase;
      pending = count;
    }
  }
  bool try_wait_parity(uint32_t q) const { return (phase & 1u) != q; }
};

// One move of a random interleaving of agents (warps with .prog, .pc and .copies, the copies
// they issued and that have not landed): among the agents whose next step can run
// (enabled(agent)) and those with a copy in flight, one at random. kStep: run agent's next
// step; kLand: its oldest copy lands; kDone: nothing can move and every program ran to its end;
// kDeadlock: nothing can move before that.
enum class Move { kStep, kLand, kDone, kDeadlock };
template <typename Agent, typename Enabled>
std::pair<Move, int> pick_move(const std::vector<Agent>& agents, Enabled enabled,
                               std::mt19937_64& rng) {
  std::vector<std::pair<Move, int>> moves;
  for (int i = 0; i < static_cast<int>(agents.size()); ++i) {
    if (enabled(agents[i])) moves.push_back({Move::kStep, i});
    if (!agents[i].copies.empty()) moves.push_back({Move::kLand, i});
  }
  if (moves.empty()) {
    for (const Agent& a : agents)
      if (a.pc < a.prog.size()) return {Move::kDeadlock, -1};
    return {Move::kDone, -1};
  }
  return moves[std::uniform_int_distribution<size_t>(0, moves.size() - 1)(rng)];
}

}  // namespace hymoe::gpu::wgmma::test_model
