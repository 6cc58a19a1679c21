// slp-bench: stream-loading prefill (SlpExecutor) of long prompts on a real-dimension model with
// random weights, against the ceilings of the same run: the pinned host-to-device copy rate (the
// routed experts' bytes streamed) and the GPU's BF16 and FP8 matrix rates (cuBLASLt at 8192^3, the
// prompt's FLOPs). The floor of a prompt is the larger of its copy time and its compute time at
// those rates (perfect overlap); the ratio is the measured time over it. Each prompt length runs
// cold (its attention plans built), then - where cuDNN is the attention kernel - on the
// tensor-core kernel (mma_s), then the timed run; then, for the longest, a run with the GPU
// synchronised after every stage for the split between attention, dense layers and MoE layers,
// and one unsynchronised with the timeline of each MoE layer's attention, routed experts and
// expert copies on the GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "commands.h"

#if HYMOE_CLI_HAS_HYBRID
#include <cuda_runtime_api.h>

#include "hymoe/cpu/thread_pool.h"
#include "hymoe/cpu/topology.h"
#include "hymoe/engine/gpu_model.h"
#include "hymoe/engine/hybrid_executor.h"
#include "hymoe/engine/kv_cache.h"
#include "hymoe/engine/slp_executor.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/gemm.h"
#include "hymoe/gpu/host_register.h"
#include "hymoe/gpu/stream.h"
#include "hymoe/model/presets.h"
#include "hymoe/model/weight_store.h"
#include "pinned_probe.h"
#endif

namespace hymoe::cli {

#if HYMOE_CLI_HAS_HYBRID
namespace {

// FLOPs of a prefill of `tokens` tokens (one sequence from position 0) through the model's
// layers: GEMM FLOPs (FP8 weights) and attention FLOPs (BF16 scores and values).
struct PrefillFlops {
  double gemm = 0, attention = 0;
};
PrefillFlops prefill_flops(const ModelConfig& c, const ModelWeights& w, double tokens) {
  const double H = static_cast<double>(c.num_attention_heads), hidden = static_cast<double>(c.hidden_size);
  const double qk = static_cast<double>(c.qk_nope_head_dim + c.qk_rope_head_dim), v = static_cast<double>(c.v_head_dim);
  const double width = static_cast<double>(c.kv_lora_rank + c.qk_rope_head_dim);
  double attn_params = hidden * static_cast<double>(c.q_lora_rank) + static_cast<double>(c.q_lora_rank) * H * qk +
                       hidden * width + static_cast<double>(c.kv_lora_rank) * H * (static_cast<double>(c.qk_nope_head_dim) + v) +
                       H * v * hidden;
  PrefillFlops f;
  for (const LayerWeights& l : w.layers) {
    double params = attn_params;
    if (l.dense) params += 3 * hidden * static_cast<double>(c.intermediate_size);
    if (l.moe) {
      const double inter = static_cast<double>(c.moe_intermediate_size);
      params += 3 * hidden * inter * (static_cast<double>(c.n_shared_experts) + static_cast<double>(c.num_experts_per_tok));
    }
    f.gemm += 2 * params * tokens;
    f.attention += 2 * (tokens * (tokens + 1) / 2) * H * (qk + v);  // causal scores and values
  }
  return f;
}

// cuBLASLt's rate at 8192^3 (best of 5 after a warm-up), random inputs.
double gemm_ceiling(const gpu::CublasLt& lt, gpu::GemmKind kind, gpu::Stream& s) {
  const int n = 8192;
  const size_t elem = kind == gpu::GemmKind::kBf16 ? 2 : 1, bytes = size_t{n} * n * elem;
  std::mt19937 rng(1);
  std::vector<uint8_t> host(bytes);
  for (size_t i = 0; i < bytes; ++i) {
    // FP8: E4M3 without its NaN codes; BF16: the high byte kept to small exponents.
    const auto r = static_cast<uint8_t>(rng());
    host[i] = elem == 1 ? static_cast<uint8_t>(r & 0x7E ? r & 0xBF : 0x38)
                        : static_cast<uint8_t>(i % 2 ? 0x3C | (r & 0x80) | (r & 1) : r);
  }
  gpu::DeviceBuffer a(bytes), b(bytes), d(size_t{n} * n * 2), sa(16), sb(16);
  a.copy_from_host(host.data(), bytes, s);
  b.copy_from_host(host.data(), bytes, s);
  const float one[4] = {1, 1, 1, 1};
  sa.copy_from_host(one, 16, s);
  sb.copy_from_host(one, 16, s);
  s.synchronize();
  gpu::GemmPlan plan(lt, kind, {n, n, n, n, n, n});
  const gpu::GemmOperands ops{a.data(), sa.as<float>(), b.data(), sb.as<float>(), d.as<gpu::Bf16>()};
  plan.run(ops, s);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    gpu::Event e0, e1;
    e0.record(s);
    for (int i = 0; i < 4; ++i) plan.run(ops, s);
    e1.record(s);
    e1.synchronize();
    best = std::max(best, 4 * plan.flops() / (gpu::Event::elapsed_ms(e0, e1) / 1e3) / 1e12);
  }
  return best;
}

}  // namespace
#endif

void register_slp_commands(CLI::App& app) {
  auto* cmd = app.add_subcommand("slp-bench", "SLP: long-prompt prefill on the GPU with the experts streamed, against its ceilings");
  struct Args {
    std::string preset = "deepseek-v3";
    std::vector<int> layers = {5};
    std::vector<int64_t> tokens = {2048, 8192};
    int64_t chunk = 2048;
#if HYMOE_CLI_HAS_HYBRID
    int64_t attention_tokens = SlpExecutorOptions{}.attention_tokens;
    int64_t attention_window = SlpExecutorOptions{}.attention_window;
#else
    int64_t attention_tokens = 0, attention_window = 0;  // (the command needs CUDA)
#endif
    std::string attention = "auto";
    int ring_slots = 0;
    double gpu_memory_limit_gb = 0;
    std::vector<int64_t> crossover;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--preset", a->preset, "Model preset (random weights)")->capture_default_str();
  cmd->add_option("--layers", a->layers,
                  "Layers of the preset (the first dense ones included); with two or more counts, the time of the "
                  "extra MoE layers extrapolates the full model")
      ->capture_default_str();
  cmd->add_option("--tokens", a->tokens, "Prompt lengths")->capture_default_str();
  cmd->add_option("--chunk", a->chunk, "Rows a chunk of the per-token stages")->capture_default_str();
  cmd->add_option("--attention-tokens", a->attention_tokens, "Query rows of one attention call")->capture_default_str();
  cmd->add_option("--attention-window", a->attention_window, "Keys expanded at once (longer sequences attend in windows)")
      ->capture_default_str();
  cmd->add_option("--attention", a->attention,
                  "Attention kernel: auto (cuDNN where available), cudnn, mma (the tensor-core kernel); with auto and "
                  "cuDNN present the longest prompt is also timed on the tensor-core kernel")
      ->check(CLI::IsMember({"auto", "cudnn", "mma"}))
      ->capture_default_str();
  cmd->add_option("--ring-slots", a->ring_slots, "Expert ring slots (0: from the budget)")->capture_default_str();
  cmd->add_option("--gpu-memory-limit-gb", a->gpu_memory_limit_gb, "GPU memory budget in GB (0: the device's)")
      ->capture_default_str();
  cmd->add_option("--crossover", a->crossover,
                  "Prompt lengths to time on both SLP and the hybrid executor (routed experts on the CPU) over the "
                  "first model: where SLP starts to win sets --slp-threshold");
  cmd->callback([a] {
#if HYMOE_CLI_HAS_HYBRID
    using Clock = std::chrono::steady_clock;
    auto secs = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    HYMOE_CHECK(gpu::device_count() > 0, kUnavailable, "slp-bench needs a CUDA device");
    HYMOE_CHECK(!a->tokens.empty() && !a->layers.empty(), kInvalidArgument, "slp-bench: no --tokens or --layers");
    gpu::Stream s;
    double fp8_tflops = 0, bf16_tflops = 0;
    {
      gpu::CublasLt lt;
      fp8_tflops = gemm_ceiling(lt, gpu::GemmKind::kFp8TensorScale, s);
      bf16_tflops = gemm_ceiling(lt, gpu::GemmKind::kBf16, s);
    }
    const int64_t longest = *std::max_element(a->tokens.begin(), a->tokens.end());
    struct Run {
      int layers = 0;
      int64_t moe_layers = 0;
      std::vector<double> seconds;  // per prompt length
    };
    std::vector<Run> runs;
    for (const int layers : a->layers) {
      const ModelConfig config = preset_config(a->preset, layers);
      auto t0 = Clock::now();
      auto store = WeightStore::dummy(config, 0);
      std::printf("model: %s, %d layers, %.2f GB of random weights in %.1f s\n", a->preset.c_str(), layers,
                  static_cast<double>(store->total_bytes()) / 1e9, secs(t0));
      std::vector<gpu::HostSpan> spans;
      for (const MemoryRegion& r : store->regions()) spans.push_back({r.data, r.bytes});
      gpu::HostRegistration pinned(spans);
      std::printf("pinning: %.2f GB registered in %.2f s\n", static_cast<double>(pinned.bytes()) / 1e9, pinned.seconds());
      const double pinned_gbs = pinned_copy_ceiling(spans, s);
      std::printf("ceilings: pinned host-to-device %.1f GB/s; cuBLASLt 8192^3 FP8 %.0f TFLOP/s, BF16 %.0f TFLOP/s\n",
                  pinned_gbs, fp8_tflops, bf16_tflops);
      GpuModelOptions mo;
      if (a->gpu_memory_limit_gb > 0) mo.gpu_memory_limit = static_cast<size_t>(a->gpu_memory_limit_gb * 1e9);
      const KvCacheShape kv_shape{.layers = config.num_hidden_layers, .kv_lora_rank = config.kv_lora_rank,
                                  .rope_dim = config.qk_rope_head_dim, .block_tokens = 64};
      mo.kv_cache_bytes = static_cast<size_t>((longest + 64) / 64 + 1) * kv_shape.bytes_per_block();
      mo.prefill_weights = true;
      t0 = Clock::now();
      auto model = std::make_shared<GpuModel>(*store, mo);
      SlpExecutorOptions so;
      so.max_tokens = longest;
      so.chunk_tokens = a->chunk;
      so.ring_slots = a->ring_slots;
      so.attention_tokens = a->attention_tokens;
      so.attention_window = a->attention_window;
      so.attention = a->attention == "cudnn" ? SlpExecutorOptions::Attention::kCudnn
                     : a->attention == "mma" ? SlpExecutorOptions::Attention::kTensorCores
                                             : SlpExecutorOptions::Attention::kAuto;
      // As the runtime: a step limit whose buffers the budget cannot hold is halved; longer
      // prompts then run in several steps.
      const std::unique_ptr<SlpExecutor> slp_owner = SlpExecutor::create_fitting(model, so, 512);
      SlpExecutor& slp = *slp_owner;
      if (slp.max_tokens() < so.max_tokens)
        std::printf("%lld tokens a step do not fit the budget: %lld\n", static_cast<long long>(so.max_tokens),
                    static_cast<long long>(slp.max_tokens()));
      std::printf("%s (set up in %.1f s)\n", slp.placement_summary().c_str(), secs(t0));

      std::mt19937 rng(7);
      // Seconds of one random prompt of n tokens through `ex` (SLP unless named).
      auto prefill = [&](int64_t n, Executor* ex = nullptr) {
        Executor& e = ex ? *ex : slp;
        std::vector<int32_t> ids(static_cast<size_t>(n));
        for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(config.vocab_size));
        BlockTable table;
        HYMOE_CHECK(e.kv_cache().reserve(table, n), kResourceExhausted, "slp-bench: KV pool too small for {}", n);
        std::vector<float> logits(static_cast<size_t>(config.vocab_size));
        const int64_t step = ex ? n : slp.max_tokens();
        const auto t = Clock::now();
        for (int64_t at = 0; at < n; at += step) {
          const int64_t m = std::min(step, n - at);
          StepItem item{&table, std::span<const int32_t>(ids).subspan(static_cast<size_t>(at), static_cast<size_t>(m)), at,
                        at + m == n};
          e.forward({&item, 1}, item.want_logits ? std::span<float>(logits) : std::span<float>());
        }
        const double dt = secs(t);
        e.kv_cache().release(table);
        return dt;
      };
      prefill(std::min<int64_t>(longest, 512));  // warm-up: plans, first-touch of the pinned pages
      Run run{layers, 0, {}};
      for (const LayerWeights& l : model->weights().layers) run.moe_layers += l.moe ? 1 : 0;
      // Each length twice: the first (cold) builds the attention plans of its shapes (cuDNN: once a
      // shape for every layer and later prompt), the second is the steady figure.
      const bool both_kernels = a->attention == "auto" && std::string(slp.attention_kernel()) == "cudnn";
      std::printf("%-8s %-9s %-9s %-8s %-9s %-9s %-9s %-8s %-8s %-8s %s\n", "tokens", "seconds", "tok/s", "GB", "copy_s",
                  "compute_s", "floor_s", "ratio", "cold_s", both_kernels ? "mma_s" : "-",
                  "model waits for copies / loader waits for slots (s)");
      for (const int64_t n : a->tokens) {
        const double cold = prefill(n);
        double mma = 0;
        if (both_kernels) {
          slp.set_attention_tensor_cores(true);
          mma = prefill(n);
          slp.set_attention_tensor_cores(false);
        }
        slp.reset_profile();
        const double dt = prefill(n);
        run.seconds.push_back(dt);
        const auto p = slp.profile();
        const PrefillFlops f = prefill_flops(config, model->weights(), static_cast<double>(n));
        const double copy_s = static_cast<double>(p.streamed_bytes) / 1e9 / pinned_gbs;
        const double compute_s = f.gemm / (fp8_tflops * 1e12) + f.attention / (bf16_tflops * 1e12);
        const double floor_s = std::max(copy_s, compute_s);
        std::printf("%-8lld %-9.3f %-9.0f %-8.2f %-9.3f %-9.3f %-9.3f %-8.2f %-8.3f %-8.3f %.3f / %.3f\n",
                    static_cast<long long>(n), dt, static_cast<double>(n) / dt,
                    static_cast<double>(p.streamed_bytes) / 1e9, copy_s, compute_s, floor_s, floor_s / dt, cold, mma,
                    p.model_wait_s, p.slot_wait_s);
      }
      // The stage split of the longest prompt (the GPU synchronised after every stage).
      slp.set_profile_stages(true);
      slp.reset_profile();
      const double dt = prefill(longest);
      slp.set_profile_stages(false);
      const auto p = slp.profile();
      const auto all = static_cast<double>(config.num_hidden_layers);
      std::printf("stages of %lld tokens, synchronised: %.3f s; attention %.3f s (%.3f a layer), dense FFN %.3f s, MoE "
                  "FFN %.3f s (%.3f a MoE layer), head %.3f s\n",
                  static_cast<long long>(longest), dt, p.attention_s, p.attention_s / all, p.dense_s, p.moe_s,
                  run.moe_layers ? p.moe_s / static_cast<double>(run.moe_layers) : 0.0, p.head_s);
      std::printf("  MoE FFN parts: router %.3f s, shared expert %.3f s, routed: grouping %.3f s, waiting for copies %.3f s, "
                  "GEMMs %.3f s, un-permutes %.3f s\n",
                  p.router_s, p.shared_s, p.routed_prep_s, p.routed_wait_s, p.routed_gemm_s, p.routed_combine_s);
      // The timeline of the longest prompt, unsynchronised: where each MoE layer's attention, routed
      // experts and expert copies ran on the GPU (ms since the step began).
      slp.set_timeline(true);
      prefill(longest);
      slp.set_timeline(false);
      std::printf("timeline of %lld tokens (ms): layer  attention  routed experts  copies of its experts\n",
                  static_cast<long long>(longest));
      for (const SlpExecutor::TimelineRow& r : slp.timeline()) {
        std::printf("  %3lld  %8.1f-%-8.1f %8.1f-%-8.1f %8.1f-%-8.1f\n", static_cast<long long>(r.layer), r.attention_begin,
                    r.attention_end, r.routed_begin, r.routed_end, r.copy_begin, r.copy_end);
      }
      runs.push_back(std::move(run));
      if (!a->crossover.empty() && runs.size() == 1) {
        // The same prompts through the hybrid executor over the same device model, its routed
        // experts on the CPU (a card that cannot hold them), against SLP.
        cpu::ThreadPool pool(cpu::Topology::detect(), cpu::ThreadPoolOptions{});
        HybridExecutorOptions ho;
        ho.max_gpu_expert_layers = 0;
        ho.max_step_tokens = *std::max_element(a->crossover.begin(), a->crossover.end());
        HybridExecutor hybrid(model, pool, ho);
        std::printf("%-8s %-10s %-10s %s\n", "tokens", "hybrid_s", "slp_s", "faster");
        for (const int64_t n : a->crossover) {
          const double hy = prefill(n, &hybrid), sl = prefill(n);
          std::printf("%-8lld %-10.3f %-10.3f %s\n", static_cast<long long>(n), hy, sl, sl < hy ? "slp" : "hybrid");
        }
      }
    }
    // The full model from the marginal cost of a MoE layer (the largest layer count against the
    // smallest: the start-up and the tail cancel out).
    const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end(), [](const Run& x, const Run& y) {
      return x.moe_layers < y.moe_layers;
    });
    if (hi->moe_layers > lo->moe_layers) {
      const ModelConfig full = preset_config(a->preset);
      const int64_t full_moe = full.num_hidden_layers - full.first_k_dense_replace;
      for (size_t i = 0; i < a->tokens.size(); ++i) {
        const double per_layer = (hi->seconds[i] - lo->seconds[i]) / static_cast<double>(hi->moe_layers - lo->moe_layers);
        const double full_s = lo->seconds[i] + static_cast<double>(full_moe - lo->moe_layers) * per_layer;
        std::printf("extrapolated: %lld tokens through the full %s (%lld layers): %.2f s (%.0f tok/s), a MoE layer "
                    "%.1f ms (from %d and %d layers)\n",
                    static_cast<long long>(a->tokens[i]), a->preset.c_str(), static_cast<long long>(full.num_hidden_layers),
                    full_s, static_cast<double>(a->tokens[i]) / full_s, 1e3 * per_layer, lo->layers, hi->layers);
      }
    }
#else
    (void)a;
    std::fprintf(stderr, "hymoe-cli slp-bench: this build has no CUDA (hybrid engine)\n");
    exit_code() = 2;
#endif
  });
}

}  // namespace hymoe::cli
