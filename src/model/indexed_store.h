// The WeightStore implementations (internal to hymoe_model): a name -> view table over memory the
// store owns, either file mappings (kMmap) or anonymous arenas (kLoad, dummy).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hymoe/model/safetensors.h"
#include "hymoe/model/weight_store.h"
#include "host_arena.h"

namespace hymoe {

class IndexedStore : public WeightStore {
 public:
  const TensorView* find(std::string_view name) const override;
  std::vector<std::string> names() const override;
  std::span<const MemoryRegion> regions() const override { return regions_; }

 protected:
  explicit IndexedStore(ModelConfig config) : WeightStore(std::move(config)) {}
  std::map<std::string, TensorView, std::less<>> views_;
  std::vector<MemoryRegion> regions_;
};

// Shards mapped read-only; views point into the mappings.
class MmapStore final : public IndexedStore {
 public:
  MmapStore(ModelConfig config, const CheckpointFiles& files);

 private:
  std::vector<MappedFile> maps_;
};

// Tensors in anonymous arenas, one arena per NUMA node used (plus one unplaced).
class ArenaStore final : public IndexedStore {
 public:
  // Plans and allocates space for `specs`; tensor i goes to arena of nodes[i] (-1: unplaced).
  // Each tensor starts 64-byte aligned. Memory is untouched until written.
  ArenaStore(ModelConfig config, const std::vector<TensorSpec>& specs, const std::vector<int>& nodes,
             bool huge_pages);
  // Writable bytes of tensor i (constructor order); only during construction of the store.
  std::span<std::byte> writable(size_t i) const { return spans_[i]; }

 private:
  std::vector<HostArena> arenas_;
  std::vector<std::span<std::byte>> spans_;
};

// NUMA node of a tensor under LoadOptions: routed experts spread over `num_nodes` (see
// placement.h), everything else -1 (unplaced). num_nodes <= 1 places nothing.
int tensor_numa_node(const ModelConfig& config, std::string_view name, int num_nodes);

// Resolves LoadOptions::numa_nodes (0 = all) against the machine; throws when it asks for more.
int resolve_numa_nodes(int requested);

}  // namespace hymoe
