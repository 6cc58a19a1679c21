// WeightStore::open: a checkpoint directory mapped (kMmap) or read into host memory (kLoad).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "indexed_store.h"
#include "parallel.h"
#include "posix_file.h"

namespace hymoe {
namespace {

using Clock = std::chrono::steady_clock;

// Logs bytes done, GB/s and ETA on log::get("load") every `period` until stopped.
class ProgressReporter {
 public:
  ProgressReporter(uint64_t total, std::chrono::milliseconds period)
      : total_(total), period_(period), start_(Clock::now()), thread_([this] { run(); }) {}
  ~ProgressReporter() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  void add(uint64_t bytes) { done_.fetch_add(bytes, std::memory_order_relaxed); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!cv_.wait_for(lock, period_, [this] { return stop_; })) {
      const uint64_t done = done_.load(std::memory_order_relaxed);
      const double secs = seconds();
      const double rate = static_cast<double>(done) / std::max(secs, 1e-9);
      const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
      log::get("load")->info("loading: {:.2f} / {:.2f} GB ({:.0f}%), {:.2f} GB/s, ETA {:.0f} s",
                             static_cast<double>(done) / 1e9, static_cast<double>(total_) / 1e9,
                             100.0 * static_cast<double>(done) / static_cast<double>(std::max<uint64_t>(total_, 1)),
                             rate / 1e9, eta);
    }
  }

  const uint64_t total_;
  const std::chrono::milliseconds period_;
  const Clock::time_point start_;
  std::atomic<uint64_t> done_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the fields it reads
};

std::unique_ptr<WeightStore> load_into_memory(ModelConfig config, const CheckpointFiles& files,
                                              const LoadOptions& options) {
  const int nodes = resolve_numa_nodes(options.numa_nodes);
  std::vector<TensorSpec> specs;
  std::vector<int> placement;
  uint64_t total = 0;
  for (const CheckpointTensor& t : files.tensors) {
    specs.push_back({t.entry.name, t.entry.dtype, t.entry.shape});
    placement.push_back(tensor_numa_node(config, t.entry.name, nodes));
    total += t.entry.nbytes();
  }
  auto store = std::make_unique<ArenaStore>(std::move(config), specs, placement, options.huge_pages);

  std::vector<PosixFile> fds;
  for (const auto& shard : files.shards) fds.emplace_back(shard);
  for (size_t s = 0; s < fds.size(); ++s) {
    HYMOE_CHECK(fds[s].size() == files.shard_sizes[s], kCorruptData,
                "{}: file changed size since its header was read", files.shards[s].string());
  }

  // Work items: tensors cut into chunks so large tensors spread over the readers.
  struct Chunk {
    size_t tensor;
    uint64_t offset;  // within the tensor
    uint64_t bytes;
  };
  constexpr uint64_t kChunk = 64ull << 20;
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < files.tensors.size(); ++i) {
    const uint64_t n = files.tensors[i].entry.nbytes();
    for (uint64_t off = 0; off < n; off += kChunk) chunks.push_back({i, off, std::min(kChunk, n - off)});
  }
  {
    ProgressReporter progress(total, std::chrono::milliseconds(2000));
    parallel_for(chunks.size(), std::max(1, options.io_threads), [&](size_t k) {
      const Chunk& c = chunks[k];
      const CheckpointTensor& t = files.tensors[c.tensor];
      std::byte* dst = store->writable(c.tensor).data() + c.offset;
      fds[t.shard].read_exact(dst, c.bytes, t.file_offset + c.offset, t.entry.name);
      progress.add(c.bytes);
    });
    const double secs = progress.seconds();
    log::get("load")->info("loaded {} tensors, {:.2f} GB from {} shard(s) in {:.1f} s ({:.2f} GB/s, "
                           "{} reader(s), {} NUMA node(s))", files.tensors.size(),
                           static_cast<double>(total) / 1e9, files.shards.size(), secs,
                           static_cast<double>(total) / 1e9 / std::max(secs, 1e-9),
                           options.io_threads, nodes);
  }
  return store;
}

}  // namespace

std::unique_ptr<WeightStore> WeightStore::open(const std::filesystem::path& dir,
                                               const LoadOptions& options) {
  ModelConfig config = ModelConfig::load(dir / "config.json");
  CheckpointFiles files = CheckpointFiles::scan(dir);
  if (options.mode == LoadMode::kMmap) {
    auto store = std::make_unique<MmapStore>(std::move(config), files);
    log::get("load")->info("mapped {} tensors, {:.2f} GB from {} shard(s) of {}", files.tensors.size(),
                           static_cast<double>(store->total_bytes()) / 1e9, files.shards.size(),
                           dir.string());
    return store;
  }
  return load_into_memory(std::move(config), files, options);
}

}  // namespace hymoe
