// WeightStore: lookup, the two checkpoint modes' shared pieces, and dummy weights.
#include <chrono>
#include <map>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/model/checkpoint_layout.h"
#include "hymoe/model/placement.h"
#include "hymoe/model/random_weights.h"
#include "indexed_store.h"
#include "parallel.h"

namespace hymoe {

const TensorView& WeightStore::tensor(std::string_view name) const {
  const TensorView* t = find(name);
  HYMOE_CHECK(t != nullptr, kNotFound, "tensor '{}' not found in the weight store", name);
  return *t;
}

size_t WeightStore::total_bytes() const {
  size_t n = 0;
  for (const MemoryRegion& r : regions()) n += r.bytes;
  return n;
}

const TensorView* IndexedStore::find(std::string_view name) const {
  auto it = views_.find(name);
  return it == views_.end() ? nullptr : &it->second;
}

std::vector<std::string> IndexedStore::names() const {
  std::vector<std::string> out;
  out.reserve(views_.size());
  for (const auto& [name, view] : views_) out.push_back(name);
  return out;
}

int tensor_numa_node(const ModelConfig& config, std::string_view name, int num_nodes) {
  if (num_nodes <= 1) return -1;
  const ExpertId id = parse_expert_name(name);
  if (id.expert < 0 || id.expert >= config.n_routed_experts) return -1;
  return expert_numa_node(id.expert, config.n_routed_experts, num_nodes);
}

int resolve_numa_nodes(int requested) {
  const int have = numa_node_count();
  HYMOE_CHECK(requested >= 0, kInvalidArgument, "numa_nodes must be >= 0, got {}", requested);
  HYMOE_CHECK(requested <= have, kInvalidArgument,
              "numa_nodes is {} but this machine has {} NUMA node(s)", requested, have);
  return requested == 0 ? have : requested;
}

MmapStore::MmapStore(ModelConfig config, const CheckpointFiles& files)
    : IndexedStore(std::move(config)) {
  for (const auto& shard : files.shards) {
    maps_.emplace_back(shard);
    HYMOE_CHECK(maps_.back().size() == files.shard_sizes[maps_.size() - 1], kCorruptData,
                "{}: file changed size while opening", shard.string());
    regions_.push_back({maps_.back().data(), maps_.back().size(), -1});
  }
  for (const CheckpointTensor& t : files.tensors) {
    const MappedFile& m = maps_[t.shard];
    const size_t align = dtype_size(t.entry.dtype);
    HYMOE_CHECK(t.file_offset % align == 0, kUnsupported,
                "{}: tensor '{}' at offset {} is not aligned to its {}-byte elements; open it in "
                "load mode", m.path().string(), t.entry.name, t.file_offset, align);
    views_.emplace(t.entry.name, TensorView{t.entry.name, t.entry.dtype, t.entry.shape,
                                            m.data() + t.file_offset, t.entry.nbytes()});
  }
}

ArenaStore::ArenaStore(ModelConfig config, const std::vector<TensorSpec>& specs,
                       const std::vector<int>& nodes, bool huge_pages)
    : IndexedStore(std::move(config)) {
  constexpr size_t kAlign = 64;
  std::map<int, size_t> arena_bytes;  // node -> bytes
  std::vector<size_t> offsets(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    size_t& used = arena_bytes[nodes[i]];
    offsets[i] = used;
    used += (specs[i].nbytes() + kAlign - 1) / kAlign * kAlign;
  }
  std::map<int, size_t> arena_index;
  for (const auto& [node, bytes] : arena_bytes) {
    arena_index[node] = arenas_.size();
    arenas_.emplace_back(bytes, node, huge_pages);
    regions_.push_back({arenas_.back().data(), arenas_.back().size(), node});
  }
  spans_.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    std::byte* p = arenas_[arena_index[nodes[i]]].data() + offsets[i];
    spans_.emplace_back(p, specs[i].nbytes());
    auto [it, fresh] = views_.emplace(
        specs[i].name, TensorView{specs[i].name, specs[i].dtype, specs[i].shape, p, specs[i].nbytes()});
    HYMOE_CHECK(fresh, kInvalidArgument, "tensor '{}' given twice", specs[i].name);
  }
}

std::unique_ptr<WeightStore> WeightStore::dummy(const ModelConfig& config, uint64_t seed,
                                                const LoadOptions& options) {
  config.validate("dummy config");
  const int nodes = resolve_numa_nodes(options.numa_nodes);
  std::vector<LayoutGroup> layout = checkpoint_layout(config);
  std::vector<const LayoutTensor*> tensors;
  std::vector<TensorSpec> specs;
  std::vector<int> placement;
  for (const LayoutGroup& g : layout) {
    for (const LayoutTensor& t : g.tensors) {
      tensors.push_back(&t);
      specs.push_back(t.spec);
      placement.push_back(tensor_numa_node(config, t.spec.name, nodes));
    }
  }
  auto store = std::make_unique<ArenaStore>(config, specs, placement, options.huge_pages);
  std::vector<FillTarget> targets;
  for (size_t i = 0; i < tensors.size(); ++i) targets.push_back({tensors[i], store->writable(i)});
  const auto start = std::chrono::steady_clock::now();
  const int threads = default_threads();
  fill_random_weights(targets, seed, threads);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gb = static_cast<double>(store->total_bytes()) / 1e9;
  log::get("load")->info("dummy weights: {} tensors, {:.2f} GB in {:.1f} s ({:.2f} GB/s, {} threads, "
                         "{} NUMA node(s))", specs.size(), gb, secs, gb / std::max(secs, 1e-9),
                         threads, nodes);
  return store;
}

}  // namespace hymoe
