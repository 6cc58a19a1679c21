#include "hymoe/cpu/topology.h"

#include <hwloc.h>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>

#include "hymoe/common/error.h"

namespace hymoe::cpu {
namespace {

struct HwlocTopologyDeleter {
  void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, HwlocTopologyDeleter>;

std::vector<NumaNode> read_nodes(hwloc_topology_t topo) {
  std::vector<NumaNode> nodes;
  const int n_numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  const int n_cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  const hwloc_obj_type_t unit = n_cores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  const int n_units = hwloc_get_nbobjs_by_type(topo, unit);
  for (int i = 0; i < std::max(n_numa, 1); ++i) {
    NumaNode node;
    hwloc_const_cpuset_t node_set = hwloc_topology_get_topology_cpuset(topo);
    if (n_numa > 0) {
      hwloc_obj_t numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
      node.os_index = static_cast<int>(numa->os_index);
      node.memory_bytes = numa->attr ? numa->attr->numanode.local_memory : 0;
      node_set = numa->cpuset;
    }
    for (int u = 0; u < n_units; ++u) {
      hwloc_obj_t obj = hwloc_get_obj_by_type(topo, unit, u);
      if (!hwloc_bitmap_isincluded(obj->cpuset, node_set)) continue;
      const int first = hwloc_bitmap_first(obj->cpuset);
      if (first >= 0) node.cpus.push_back(first);
    }
    if (!node.cpus.empty()) nodes.push_back(std::move(node));  // memory-only nodes have no workers
  }
  return nodes;
}

}  // namespace

Topology Topology::detect() {
  hwloc_topology_t raw = nullptr;
  HYMOE_CHECK(hwloc_topology_init(&raw) == 0, kInternal, "hwloc_topology_init failed");
  HwlocTopology topo(raw);
  HYMOE_CHECK(hwloc_topology_load(raw) == 0, kInternal, "hwloc_topology_load failed");
  Topology t;
  t.nodes_ = read_nodes(raw);
  t.this_system_ = true;
  HYMOE_CHECK(!t.nodes_.empty(), kInternal, "hwloc found no CPUs");
  return t;
}

Topology Topology::synthetic(std::string_view description) {
  const std::string desc(description);
  hwloc_topology_t raw = nullptr;
  HYMOE_CHECK(hwloc_topology_init(&raw) == 0, kInternal, "hwloc_topology_init failed");
  HwlocTopology topo(raw);
  HYMOE_CHECK(hwloc_topology_set_synthetic(raw, desc.c_str()) == 0, kInvalidArgument,
              "hwloc: bad synthetic topology '{}'", desc);
  HYMOE_CHECK(hwloc_topology_load(raw) == 0, kInternal, "hwloc_topology_load failed for '{}'",
              desc);
  Topology t;
  t.nodes_ = read_nodes(raw);
  HYMOE_CHECK(!t.nodes_.empty(), kInvalidArgument, "hwloc: '{}' has no CPUs", desc);
  return t;
}

Topology Topology::flat(int cores) {
  Topology t;
  NumaNode node;
  for (int c = 0; c < cores; ++c) node.cpus.push_back(c);
  t.nodes_.push_back(std::move(node));
  return t;
}

int Topology::num_cores() const {
  int n = 0;
  for (const NumaNode& node : nodes_) n += static_cast<int>(node.cpus.size());
  return n;
}

std::string Topology::describe() const {
  std::string s = fmt::format("{} NUMA node{}:", nodes_.size(), nodes_.size() == 1 ? "" : "s");
  for (const NumaNode& node : nodes_) {
    s += fmt::format(" node{} {} cores [{}-{}]", node.os_index, node.cpus.size(),
                     node.cpus.front(), node.cpus.back());
  }
  return s;
}

}  // namespace hymoe::cpu
