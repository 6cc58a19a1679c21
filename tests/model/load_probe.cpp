// model_load_probe: how fast the WeightStore fills memory, next to a memory-copy ceiling measured
// in the same run. Not a test (ctest does not run it); for figures on a big machine:
//   model_load_probe --preset deepseek-v3 --layers 1 [--dir CKPT] [--threads N]
// dummy: random generation into a fresh store; with --dir: kLoad (parallel pread from the page
// cache into anonymous memory) and kMmap (map, then touch every byte) of that checkpoint.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "host_arena.h"
#include "hymoe/common/log.h"
#include "hymoe/model/model_weights.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/weight_store.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Ceilings for filling memory with `threads` threads, GB/s of bytes copied, best of 3:
// warm = memcpy between touched buffers (memory bandwidth); fresh = memcpy into newly mapped
// memory, first-touch page faults included, as a load into a new store pays them.
struct Ceiling {
  double warm = 0, fresh = 0;
};

double parallel_copy(std::byte* dst, const std::byte* src, size_t bytes, int threads) {
  const auto t = Clock::now();
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([=] {
      const size_t chunk = bytes / threads, off = chunk * i;
      std::memcpy(dst + off, src + off, chunk);
    });
  }
  for (auto& th : pool) th.join();
  return bytes / 1e9 / since(t);
}

Ceiling copy_ceiling(int threads) {
  const size_t bytes = 2ull << 30;
  Ceiling c;
  hymoe::HostArena src(bytes, -1, true), dst(bytes, -1, true);
  std::memset(src.data(), 1, bytes);
  std::memset(dst.data(), 2, bytes);
  for (int rep = 0; rep < 3; ++rep) {
    c.warm = std::max(c.warm, parallel_copy(dst.data(), src.data(), bytes, threads));
    hymoe::HostArena fresh(bytes, -1, true);
    c.fresh = std::max(c.fresh, parallel_copy(fresh.data(), src.data(), bytes, threads));
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "tiny", dir;
  int layers = -1, threads = static_cast<int>(std::thread::hardware_concurrency());
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--preset") preset = argv[i + 1];
    else if (a == "--layers") layers = std::stoi(argv[i + 1]);
    else if (a == "--dir") dir = argv[i + 1];
    else if (a == "--threads") threads = std::stoi(argv[i + 1]);
  }
  hymoe::log::set_level("warn");
  const Ceiling ceiling = copy_ceiling(threads);
  std::printf("ceiling, memcpy with %d threads: %.2f GB/s warm, %.2f GB/s into fresh memory\n",
              threads, ceiling.warm, ceiling.fresh);
  {
    auto t = Clock::now();
    auto store = hymoe::WeightStore::dummy(hymoe::preset_config(preset, layers), 1);
    const double s = since(t);
    std::printf("dummy %s layers=%d: %.2f GB in %.2f s = %.2f GB/s (%u threads)\n", preset.c_str(),
                layers, store->total_bytes() / 1e9, s, store->total_bytes() / 1e9 / s,
                std::thread::hardware_concurrency());
    t = Clock::now();
    auto w = hymoe::ModelWeights::bind(*store);
    std::printf("bind: %zu layers in %.3f s\n", w.layers.size(), since(t));
  }
  if (!dir.empty()) {
    for (int io : {threads, 4, 1}) {
      auto t = Clock::now();
      auto store = hymoe::WeightStore::open(dir, {hymoe::LoadMode::kLoad, true, 0, io});
      const double s = since(t);
      std::printf("kLoad %d readers: %.2f GB in %.2f s = %.2f GB/s\n", io, store->total_bytes() / 1e9,
                  s, store->total_bytes() / 1e9 / s);
    }
    auto t = Clock::now();
    auto store = hymoe::WeightStore::open(dir, {hymoe::LoadMode::kMmap, true, 0, 1});
    const double open_s = since(t);
    t = Clock::now();
    unsigned long sum = 0;
    for (const auto& r : store->regions()) {
      for (size_t i = 0; i < r.bytes; i += 4096) sum += static_cast<unsigned char>(r.data[i]);
    }
    const double s = since(t);
    std::printf("kMmap: open %.3f s, touching every page %.2f GB in %.2f s = %.2f GB/s (%lu)\n",
                open_s, store->total_bytes() / 1e9, s, store->total_bytes() / 1e9 / s, sum % 7);
  }
  return 0;
}
