// stream-bench: the SLP expert streamer's copy rate against the pinned host-to-device ceiling of
// the same run, on a real-dimension model with random weights (--load-format dummy): the store's
// memory pinned (its cost printed), then every routed expert of every MoE layer streamed through
// rings of several lengths with nothing computed, so the figure is the loader's alone.
#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"

#if HYMOE_CLI_HAS_HYBRID
#include <cuda_runtime_api.h>

#include "hymoe/engine/expert_stream.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/host_register.h"
#include "hymoe/gpu/stream.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/weight_store.h"
#include "pinned_probe.h"
#endif

namespace hymoe::cli {

void register_stream_commands(CLI::App& app) {
  auto* cmd = app.add_subcommand("stream-bench", "SLP: routed experts streamed to the GPU against the pinned copy rate");
  struct Args {
    std::string preset = "deepseek-v3";
    int layers = 5;
    std::vector<int> slots = {2, 8, 32};
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--preset", a->preset, "Model preset (random weights)")->capture_default_str();
  cmd->add_option("--layers", a->layers, "Layers of the preset (the first dense ones included)")->capture_default_str();
  cmd->add_option("--slots", a->slots, "Ring lengths to measure")->capture_default_str();
  cmd->callback([a] {
#if HYMOE_CLI_HAS_HYBRID
    using Clock = std::chrono::steady_clock;
    auto secs = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    HYMOE_CHECK(gpu::device_count() > 0, kUnavailable, "stream-bench needs a CUDA device");
    const ModelConfig config = preset_config(a->preset, a->layers);
    auto t0 = Clock::now();
    auto store = WeightStore::dummy(config, 0);
    ModelWeights weights = ModelWeights::bind(*store);
    std::printf("model: %s, %d layers, %.2f GB of random weights in %.1f s\n", a->preset.c_str(), a->layers,
                static_cast<double>(store->total_bytes()) / 1e9, secs(t0));
    std::vector<gpu::HostSpan> spans;
    for (const MemoryRegion& r : store->regions()) spans.push_back({r.data, r.bytes});
    gpu::HostRegistration pinned(spans);
    std::printf("pinning: %.2f GB registered in %.2f s (%.1f GB/s)\n", static_cast<double>(pinned.bytes()) / 1e9,
                pinned.seconds(), static_cast<double>(pinned.bytes()) / 1e9 / pinned.seconds());
    std::vector<ExpertStreamer::Item> items;
    for (size_t l = 0; l < weights.layers.size(); ++l)
      if (weights.layers[l].moe)
        for (int32_t e = 0; e < static_cast<int32_t>(config.n_routed_experts); ++e) items.push_back({static_cast<int64_t>(l), e});
    HYMOE_CHECK(!items.empty(), kInvalidArgument, "stream-bench: the model has no MoE layer (raise --layers)");
    gpu::Stream s;
    const double ceiling = pinned_copy_ceiling(spans, s);  // one 1 GiB copy from the pinned store, best of 3
    std::printf("ceiling: pinned host-to-device %.1f GB/s (1 GiB copy, best of 3)\n", ceiling);
    std::printf("%-6s %-7s %-9s %-9s %-10s %-8s %s\n", "slots", "experts", "GB", "seconds", "GB/s", "ratio",
                "loader waits for slots / model waits for copies (s)");
    for (const int n : a->slots) {
      ExpertRing ring(config, n, nullptr);
      int device = 0;
      HYMOE_CUDA_CHECK(cudaGetDevice(&device));
      ExpertStreamer streamer(ring, weights, device);
      gpu::Stream compute;
      t0 = Clock::now();
      streamer.start(items);
      for (size_t i = 0; i < items.size(); ++i) {
        streamer.acquire(i, compute);
        streamer.release(i, compute);
      }
      streamer.finish();
      compute.synchronize();
      const double t = secs(t0);
      const auto st = streamer.stats();
      const double gbs = static_cast<double>(st.bytes) / 1e9;
      std::printf("%-6d %-7zu %-9.2f %-9.3f %-10.1f %-8.3f %.3f / %.3f\n", n, items.size(), gbs, t, gbs / t,
                  gbs / t / ceiling, st.slot_wait_s, st.model_wait_s);
    }
#else
    (void)a;
    std::fprintf(stderr, "hymoe-cli stream-bench: this build has no CUDA (hybrid engine)\n");
    exit_code() = 2;
#endif
  });
}

}  // namespace hymoe::cli
