// WeightStore: the one host-DRAM copy of a model's tensors that every execution path reads.
//
// Sources: an HF checkpoint directory (model.safetensors.index.json + shards, or one
// model.safetensors), or "dummy" random tensors of a preset, made in memory.
// Modes for a checkpoint: mmap the shard files read-only, or load them into anonymous memory
// (transparent huge pages where available) with each MoE layer's routed experts placed on the
// NUMA node whose threads will compute them; one copy in total either way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/model/config.h"
#include "hymoe/model/tensor.h"

namespace hymoe {

enum class LoadMode {
  kMmap,  // map shards read-only; pages come in on first touch (fast start, page-cache backed)
  kLoad,  // read into anonymous memory, huge pages where possible, NUMA placement of experts
};

struct LoadOptions {
  LoadMode mode = LoadMode::kLoad;
  bool huge_pages = true;   // madvise(MADV_HUGEPAGE) on anonymous memory
  int numa_nodes = 0;       // routed experts spread over this many nodes in contiguous ranges
                            // (placement.h); 0 = all detected; more than the machine has throws
  int io_threads = 4;       // parallel readers in kLoad mode
};

// A contiguous range of host memory owned by the store (for cudaHostRegister and NUMA stats).
struct MemoryRegion {
  const std::byte* data = nullptr;
  size_t bytes = 0;
  int numa_node = -1;  // -1: not placed on a node
};

class WeightStore {
 public:
  virtual ~WeightStore() = default;
  WeightStore(const WeightStore&) = delete;
  WeightStore& operator=(const WeightStore&) = delete;

  // Opens a checkpoint directory. Every malformed input (truncated file, lying header length,
  // offsets out of range or overlapping, shape/dtype/bytes mismatch, missing shard or tensor)
  // throws hymoe::Error naming the file and tensor. Logs progress (bytes, GB/s, ETA).
  static std::unique_ptr<WeightStore> open(const std::filesystem::path& dir,
                                           const LoadOptions& options = {});
  // Random tensors with the names, shapes and dtypes of `config` (the --load-format dummy path):
  // FP8 weights with block scales, BF16 embeddings/norms/lm_head, F32 router bias. No files.
  // The values are those hymoe-make-model writes for the same seed (random_weights.h), made on
  // every hardware thread into anonymous memory placed as kLoad places it (options.mode ignored).
  static std::unique_ptr<WeightStore> dummy(const ModelConfig& config, uint64_t seed,
                                            const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  // The tensor or nullptr.
  virtual const TensorView* find(std::string_view name) const = 0;
  // The tensor; throws hymoe::Error (kNotFound) naming it when absent.
  const TensorView& tensor(std::string_view name) const;
  // Every tensor name, sorted.
  virtual std::vector<std::string> names() const = 0;
  // Host memory held (for pinning with cudaHostRegister, and stats).
  virtual std::span<const MemoryRegion> regions() const = 0;
  size_t total_bytes() const;

 protected:
  explicit WeightStore(ModelConfig config) : config_(std::move(config)) {}

 private:
  ModelConfig config_;
};

}  // namespace hymoe
