// generate: offline text generation through the same runtime as hymoe-server (weights,
// tokenizer, chat template, executor, scheduler), streaming text to stdout and a summary with
// tokens/s to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>

#include "commands.h"
#include "hymoe/common/error.h"

#ifdef HYMOE_CLI_HAS_RUNTIME
#include "hymoe/engine/cpu_executor.h"
#if HYMOE_CLI_HAS_HYBRID
#include "hymoe/engine/hybrid_executor.h"
#include "hymoe/engine/slp_executor.h"
#endif
#include "hymoe/server/generation.h"
#include "hymoe/server/runtime.h"
#endif

namespace hymoe::cli {

void register_generate_commands(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate text offline (same engine as hymoe-server)");
  struct Args {
    std::string model, prompt, tokenizer;
    int max_tokens = 64;
    double temperature = 0.0, top_p = 1.0;
    int top_k = 0;
    int64_t seed = -1;
    bool raw = false;
    int threads = 0;
    std::string load_format = "auto", preset = "deepseek-v3";
    int layers = -1;
    bool profile = false;
    bool amx_decode_gemv = false;
    std::string backend = "auto";
    int64_t gpu_memory_limit = 0;
    int64_t kv_cache_bytes = 1ll << 30;
    bool dual_microbatch = true;
    bool tuned_decode_attention = true;
    int64_t slp_threshold = server::ServerConfig{}.slp_threshold;
    int64_t slp_max_tokens = server::ServerConfig{}.slp_max_tokens;
    int gpu_expert_layers = -1;
    int parallel = 1;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model, "Checkpoint directory");
  cmd->add_option("--load-format", a->load_format, "auto | dummy (random weights of --preset)")->capture_default_str();
  cmd->add_option("--preset", a->preset, "Preset for --load-format dummy")->capture_default_str();
  cmd->add_option("--layers", a->layers, "Layers for --load-format dummy (-1 = preset's)")->capture_default_str();
  cmd->add_flag("--profile", a->profile, "Print time per engine stage (attention, MoE, lm_head) to stderr");
  cmd->add_option("--prompt", a->prompt, "Prompt text (a user message unless --raw)")->required();
  cmd->add_option("--tokenizer", a->tokenizer, "Tokenizer directory (default: the model's)");
  cmd->add_option("--max-tokens", a->max_tokens, "Tokens to generate")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", a->temperature, "0 = greedy")->capture_default_str()->check(CLI::Range(0.0, 2.0));
  cmd->add_option("--top-p", a->top_p, "Nucleus sampling mass")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--top-k", a->top_k, "0 = off")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Sampling seed (-1 = random); copy i of --parallel samples with seed + i")->capture_default_str();
  cmd->add_flag("--raw", a->raw, "Use the prompt as is, without the chat template");
  cmd->add_option("--threads", a->threads, "Compute threads (0 = all)")->capture_default_str();
  cmd->add_option("--parallel", a->parallel,
                  "Copies of the request decoding together (one engine step serves all; the first's "
                  "text is printed, the rates count every copy)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--amx-decode-gemv", a->amx_decode_gemv,
                "Dense weights' decode GEMVs on AMX where the CPU has it (as hymoe-server's option)");
  cmd->add_option("--backend", a->backend, "auto | cpu | hybrid (as hymoe-server's option)")->capture_default_str();
  cmd->add_option("--gpu-memory-limit", a->gpu_memory_limit, "Bytes the hybrid backend may use on the GPU (0 = all)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-bytes", a->kv_cache_bytes, "KV cache budget in bytes")->capture_default_str();
  cmd->add_option("--dual-microbatch", a->dual_microbatch,
                  "Hybrid: two overlapped micro-batches from 2 decoding sequences (as hymoe-server's option)")
      ->capture_default_str();
  cmd->add_option("--tuned-decode-attention", a->tuned_decode_attention,
                  "Hybrid: decode attention by the tuned MLA kernel where the shapes allow (as hymoe-server's option)")
      ->capture_default_str();
  cmd->add_option("--slp-threshold", a->slp_threshold,
                  "Hybrid backend: prompt chunks of at least this many tokens by stream-loading prefill (0 = off)")
      ->capture_default_str();
  cmd->add_option("--slp-max-tokens", a->slp_max_tokens, "Hybrid backend: the most tokens one stream-loading prefill step takes")
      ->capture_default_str();
  cmd->add_option("--gpu-expert-layers", a->gpu_expert_layers,
                  "Hybrid: MoE layers whose routed experts go to the GPU where memory is left (-1 all that fit, 0 none)")
      ->capture_default_str();
  cmd->callback([a] {
#ifndef HYMOE_CLI_HAS_RUNTIME
    HYMOE_THROW(kUnsupported, "this hymoe-cli was built without the runtime (tokenizer and CPU engine)");
#else
    server::ServerConfig config;
    config.model = a->model;
    config.tokenizer = a->tokenizer;
    config.load_format = a->load_format;
    config.preset = a->preset;
    config.dummy_layers = a->layers;
    config.validate();
    config.threads = a->threads;
    config.amx_decode_gemv = a->amx_decode_gemv;
    config.backend = a->backend;
    config.gpu_memory_limit = a->gpu_memory_limit;
    config.kv_cache_bytes = a->kv_cache_bytes;
    config.dual_microbatch = a->dual_microbatch;
    config.tuned_decode_attention = a->tuned_decode_attention;
    config.slp_threshold = a->slp_threshold;
    config.slp_max_tokens = a->slp_max_tokens;
    config.gpu_expert_layers = a->gpu_expert_layers;
    config.max_running = a->parallel;
    auto rt = server::Runtime::load(config);
    std::string prompt = a->prompt;
    bool add_special = true;
    if (!a->raw) {
      HYMOE_CHECK(rt->chat_template != nullptr, kInvalidArgument, "the model has no chat template; use --raw");
      nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", a->prompt}}});
      prompt = rt->chat_template->render(messages, {});
      add_special = false;
    }
    const std::vector<int32_t> ids = rt->tokenizer->encode(prompt, add_special);
    const int n = a->parallel;
    std::vector<std::shared_ptr<server::Generation>> gens;
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < n; ++i) {
      server::GenerationOptions go;
      go.id = n == 1 ? "cli" : fmt::format("cli-{}", i);
      go.prompt_tokens = static_cast<int64_t>(ids.size());
      gens.push_back(std::make_shared<server::Generation>(*rt->tokenizer, go, nullptr));
      GenerationRequest req;
      req.id = go.id;
      req.prompt = ids;
      req.sampling.max_tokens = a->max_tokens;
      req.sampling.temperature = a->temperature;
      req.sampling.top_p = a->top_p;
      req.sampling.top_k = a->top_k;
      if (a->seed >= 0) req.sampling.seed = static_cast<uint64_t>(a->seed + i);  // copies part at temperature > 0
      req.callbacks = gens.back()->callbacks(gens.back());
      reqs.push_back(std::move(req));
    }
    auto* cpu = dynamic_cast<CpuExecutor*>(rt->executor.get());
#if HYMOE_CLI_HAS_HYBRID
    auto* hybrid = dynamic_cast<HybridExecutor*>(rt->executor.get());
    HybridExecutor::Profile hybrid_prefill;
#endif
    const auto t0 = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point first{};
    CpuExecutor::Profile prefill_profile;
    for (auto& req : reqs) rt->scheduler->submit(std::move(req));
    // The first copy's text as it comes; its first token starts the decode's clock, and the
    // first token of every copy (all prompts done) ends the prefill's profile. Then the other
    // copies to their ends.
    bool all_decoding = false;
    server::Generation::Delta d;
    while (true) {
      if (!gens[0]->wait(d, std::chrono::milliseconds(1000))) continue;
      if (first == std::chrono::steady_clock::time_point{} && gens[0]->usage().completion_tokens > 0)
        first = std::chrono::steady_clock::now();
      if (!all_decoding && std::all_of(gens.begin(), gens.end(),
                                       [](const auto& g) { return g->usage().completion_tokens > 0; })) {
        all_decoding = true;
        if (cpu) {
          prefill_profile = cpu->profile();
          cpu->reset_profile();
        }
#if HYMOE_CLI_HAS_HYBRID
        if (hybrid) {
          hybrid_prefill = hybrid->profile();
          hybrid->reset_profile();
        }
#endif
      }
      std::fwrite(d.content.data(), 1, d.content.size(), stdout);
      std::fflush(stdout);
      if (d.finished) break;
    }
    const server::Generation::Delta first_end = d;
    int64_t completion = gens[0]->usage().completion_tokens;
    for (int i = 1; i < n; ++i) {
      server::Generation::Delta di;
      do {
        while (!gens[static_cast<size_t>(i)]->wait(di, std::chrono::milliseconds(1000))) {
        }
      } while (!di.finished);
      HYMOE_CHECK(di.reason != FinishReason::kError, kInternal, "generation {} failed: {}", i, di.error);
      completion += gens[static_cast<size_t>(i)]->usage().completion_tokens;
    }
    const auto t1 = std::chrono::steady_clock::now();
    const auto usage = gens[0]->usage();
    const double ttft = std::chrono::duration<double>(first - t0).count();
    const double decode = std::chrono::duration<double>(t1 - first).count();
    std::fprintf(stdout, "\n");
    std::fprintf(stderr, "[%s] prompt %lld tokens, output %lld tokens, TTFT %.3f s, decode %.2f tokens/s\n",
                 finish_reason_name(first_end.reason), static_cast<long long>(usage.prompt_tokens),
                 static_cast<long long>(usage.completion_tokens), ttft,
                 usage.completion_tokens > 1 && decode > 0 ? (usage.completion_tokens - 1) / decode : 0.0);
    if (n > 1)
      std::fprintf(stderr, "%d copies: %lld tokens, decode %.2f tokens/s in all\n", n,
                   static_cast<long long>(completion),
                   completion > n && decode > 0 ? static_cast<double>(completion - n) / decode : 0.0);
    if (cpu && a->profile) {
      auto show = [](const char* what, const CpuExecutor::Profile& p) {
        const double total = p.attention_s + p.dense_s + p.moe_s + p.lm_head_s;
        std::fprintf(stderr,
                     "%s: %lld steps, %lld tokens, %.4f s: attention %.4f s, dense %.4f s, MoE %.4f s, lm_head %.4f s\n",
                     what, static_cast<long long>(p.steps), static_cast<long long>(p.tokens), total, p.attention_s,
                     p.dense_s, p.moe_s, p.lm_head_s);
      };
      if (all_decoding) {
        show("prefill", prefill_profile);
        show("decode", cpu->profile());
      } else {  // a copy still had prompt tokens when the first one finished
        show("prefill and decode (not separable)", cpu->profile());
      }
    }
#if HYMOE_CLI_HAS_HYBRID
    if (hybrid && a->profile) {
      // Per step, and per MoE layer of a step: the GPU's part (the CPU waiting for it), the CPU's
      // routed experts, enqueueing the hand-off copies; the head (lm_head and the logits copy).
      auto show = [](const char* what, const HybridExecutor::Profile& p) {
        const double steps = static_cast<double>(std::max<int64_t>(p.steps, 1));
        const double layers = static_cast<double>(std::max<int64_t>(p.moe_layer_runs, 1));
        std::fprintf(stderr,
                     "%s: %lld steps, %lld tokens, %.4f s (%.2f ms a step): per MoE layer GPU %.3f ms, CPU experts "
                     "%.3f ms, hand-off enqueue %.3f ms; head %.3f ms a step\n",
                     what, static_cast<long long>(p.steps), static_cast<long long>(p.tokens), p.step_s,
                     1e3 * p.step_s / steps, 1e3 * p.gpu_wait_s / layers, 1e3 * p.cpu_moe_s / layers,
                     1e3 * p.handoff_s / layers, 1e3 * p.head_s / steps);
      };
      if (all_decoding) {
        show("prefill", hybrid_prefill);
        show("decode", hybrid->profile());
      } else {
        show("prefill and decode (not separable)", hybrid->profile());
      }
      if (auto* slp = dynamic_cast<SlpExecutor*>(rt->long_executor.get())) {
        const auto p = slp->profile();
        std::fprintf(stderr,
                     "stream-loading prefill (prompt chunks of %lld+ tokens): %lld steps, %lld tokens, %.4f s, %.2f GB of "
                     "experts streamed, compute waited %.3f s for copies\n",
                     static_cast<long long>(config.slp_threshold), static_cast<long long>(p.steps),
                     static_cast<long long>(p.tokens), p.step_s, static_cast<double>(p.streamed_bytes) / 1e9, p.model_wait_s);
      }
    }
#endif
    if (first_end.reason == FinishReason::kError) {
      HYMOE_THROW(kInternal, "generation failed: {}", first_end.error);
    }
#endif
  });
}

}  // namespace hymoe::cli
