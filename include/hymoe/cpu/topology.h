// The machine's NUMA layout as the thread pool needs it: NUMA nodes and, per node, one OS CPU
// per physical core. Read from hwloc (the live system or a synthetic description for tests);
// the hwloc handle is released once the plain structs are filled.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hymoe::cpu {

struct NumaNode {
  int os_index = 0;          // the kernel's node number (for mbind / numa_alloc_onnode)
  std::vector<int> cpus;     // OS index of the first hardware thread of each core of this node
  uint64_t memory_bytes = 0; // local memory (0 when hwloc does not know)
};

class Topology {
 public:
  // This machine. Throws hymoe::Error (kInternal) when hwloc cannot load it.
  static Topology detect();
  // A made-up machine from an hwloc synthetic description, e.g. "pack:2 [numa] core:8 pu:2"
  // (2 NUMA nodes x 8 cores). Throws hymoe::Error (kInvalidArgument) on a bad description.
  static Topology synthetic(std::string_view description);
  // One node with `cores` CPUs 0..cores-1, without hwloc (for machines where it is absent).
  static Topology flat(int cores);

  const std::vector<NumaNode>& nodes() const { return nodes_; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int num_cores() const;
  // True for detect(): CPU numbers are real and workers may be pinned to them.
  bool is_this_system() const { return this_system_; }
  // "2 NUMA nodes: node0 8 cores [0-7], node1 8 cores [8-15]".
  std::string describe() const;

 private:
  std::vector<NumaNode> nodes_;
  bool this_system_ = false;
};

}  // namespace hymoe::cpu
