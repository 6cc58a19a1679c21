// Where each routed expert lives: the one rule the WeightStore (memory) and the MoE executor
// (threads) share, so that every expert is computed on the NUMA node that holds it.
#pragma once

#include <cstdint>

namespace hymoe {

// Node of expert `expert` of `num_experts` spread over `num_nodes` nodes: contiguous ranges,
// expert e on node e * N / E (so node n holds experts [ceil(n*E/N), ceil((n+1)*E/N)) ).
// Preconditions: 0 <= expert < num_experts, num_nodes >= 1. One node: always 0.
constexpr int expert_numa_node(int64_t expert, int64_t num_experts, int num_nodes) {
  return static_cast<int>(expert * num_nodes / num_experts);
}

// First expert held by `node` (the inverse range of expert_numa_node): [first(n), first(n+1)).
constexpr int64_t first_expert_of_node(int node, int64_t num_experts, int num_nodes) {
  return (static_cast<int64_t>(node) * num_experts + num_nodes - 1) / num_nodes;
}

}  // namespace hymoe
