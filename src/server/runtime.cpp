#include "hymoe/server/runtime.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/cpu/topology.h"
#include "hymoe/engine/cpu_executor.h"
#if HYMOE_HAVE_CUDA
#include "hymoe/engine/gpu_model.h"
#include "hymoe/engine/hybrid_executor.h"
#include "hymoe/engine/peer_kv_executor.h"
#include "hymoe/engine/slp_executor.h"
#include "hymoe/gpu/device.h"
#endif
#include "hymoe/model/presets.h"

namespace hymoe::server {

std::string served_model_name(const ServerConfig& config) {
  if (!config.served_model_name.empty()) return config.served_model_name;
  if (config.load_format == "dummy" || config.model.empty()) return "dummy-" + config.preset;
  std::filesystem::path p = std::filesystem::absolute(config.model).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

Runtime::~Runtime() {
  scheduler.reset();
  long_executor.reset();
  executor.reset();
  pool.reset();
}

std::string Runtime::backend() const {
  return long_executor ? std::string(executor->name()) + "+" + long_executor->name() : executor->name();
}

std::string Runtime::placement() const {
  return long_executor ? long_executor->placement_summary() : executor->placement_summary();
}

namespace {

std::unique_ptr<Executor> make_cpu_executor(const ServerConfig& config, const WeightStore& store,
                                            cpu::ThreadPool& pool) {
  CpuExecutorOptions eo;
  eo.kv_cache_bytes = static_cast<size_t>(config.kv_cache_bytes);
  eo.max_step_tokens = config.max_prefill_chunk + config.max_running;
  // The special-code scan reads every weight once: with mmap it would page the whole checkpoint
  // in at startup, which mmap's fast start is for avoiding (the GEMVs then decode by table).
  eo.shift_decode = config.load_mode != "mmap";
  eo.amx_decode_gemv = config.amx_decode_gemv;
  return std::make_unique<CpuExecutor>(store, pool, eo);
}

#if HYMOE_HAVE_CUDA
// The hybrid executor and, where slp_threshold > 0 and the model's shapes and the budget allow it,
// stream-loading prefill over the same device model (one copy of the weights, one KV pool) as
// `long_path`; otherwise the hybrid executor alone, with a warning saying why.
std::unique_ptr<Executor> make_gpu_executor(const ServerConfig& config, const WeightStore& store, cpu::ThreadPool& pool,
                                            const HybridExecutorOptions& ho, std::unique_ptr<Executor>& long_path) {
  if (config.slp_threshold == 0) return std::make_unique<HybridExecutor>(store, pool, ho);
  const bool two_gpus = config.slp_device >= 0 && config.slp_device != ho.device;
  if (two_gpus) {
    HYMOE_CHECK(config.slp_device < gpu::device_count(), kInvalidArgument,
                "--slp-device {}: no such CUDA device ({} present)", config.slp_device, gpu::device_count());
  }
  auto model = std::make_shared<GpuModel>(
      store, GpuModelOptions{.device = ho.device, .gpu_memory_limit = ho.gpu_memory_limit, .kv_cache_bytes = ho.kv_cache_bytes,
                             .kv_block_tokens = ho.kv_block_tokens, .prefill_weights = !two_gpus});
  // Two GPUs: SLP on its own device over a mirror of the decode device's KV pool.
  std::shared_ptr<GpuModel> slp_model = model;
  if (two_gpus) {
    slp_model = std::make_shared<GpuModel>(
        store, GpuModelOptions{.device = config.slp_device, .gpu_memory_limit = ho.gpu_memory_limit,
                               .kv_block_tokens = ho.kv_block_tokens, .prefill_weights = true,
                               .mirror_kv = &model->kv_cache()});
  }
  // SLP first: its buffers and ring come out of the budget before the hybrid executor places
  // whole layers of routed experts in what is left (leaving room for its own step buffers).
  // A step limit the budget cannot hold is halved (down to the threshold) rather than losing SLP.
  std::unique_ptr<SlpExecutor> slp;
  SlpExecutorOptions so;
  so.ring_headroom = size_t{3} << 29;
  for (const MemoryRegion& r : store.regions()) so.pin.push_back({r.data, r.bytes});
  so.max_tokens = config.slp_max_tokens;
  try {
    slp = SlpExecutor::create_fitting(slp_model, so, config.slp_threshold);
    if (slp->max_tokens() < config.slp_max_tokens)
      log::get("load")->warn("stream-loading prefill: {} tokens a step (--slp-max-tokens {} does not fit the GPU budget)",
                             slp->max_tokens(), config.slp_max_tokens);
  } catch (const Error& e) {
    log::get("load")->warn("stream-loading prefill unavailable ({}); long prompts prefill on the hybrid path", e.what());
  }
  auto hybrid = std::make_unique<HybridExecutor>(model, pool, ho);
  if (two_gpus && slp) {
    long_path = std::make_unique<PeerKvExecutor>(std::move(slp), slp_model, model);
  } else {
    long_path = std::move(slp);
  }
  return hybrid;
}

// The stream-loading prefill executor of a long path (itself, or inside a two-GPU wrapper).
SlpExecutor* slp_of(Executor* long_path) {
  if (auto* peer = dynamic_cast<PeerKvExecutor*>(long_path)) return dynamic_cast<SlpExecutor*>(&peer->inner());
  return dynamic_cast<SlpExecutor*>(long_path);
}
#endif

// The backend: cpu, hybrid, or auto (hybrid where this build has CUDA and a device is present,
// falling back to cpu with a warning when the hybrid backend cannot start there).
std::unique_ptr<Executor> make_executor(const ServerConfig& config, const WeightStore& store, cpu::ThreadPool& pool,
                                        [[maybe_unused]] std::unique_ptr<Executor>& long_path) {
  auto log = log::get("load");
  if (config.backend == "cpu") return make_cpu_executor(config, store, pool);
#if HYMOE_HAVE_CUDA
  if (config.backend == "hybrid" || gpu::device_count() > config.gpu_device) {
    HybridExecutorOptions ho;
    ho.device = config.gpu_device;
    if (config.gpu_memory_limit > 0) ho.gpu_memory_limit = static_cast<size_t>(config.gpu_memory_limit);
    ho.kv_cache_bytes = static_cast<size_t>(config.kv_cache_bytes);
    ho.max_step_tokens = config.max_prefill_chunk + config.max_running;
    ho.shift_decode = config.load_mode != "mmap";
    ho.dual_microbatch = config.dual_microbatch;
    ho.tuned_decode_attention = config.tuned_decode_attention;
    ho.max_gpu_expert_layers = config.gpu_expert_layers;
    try {
      return make_gpu_executor(config, store, pool, ho, long_path);
    } catch (const Error& e) {
      if (config.backend == "hybrid") throw;
      log->warn("backend auto: the hybrid backend cannot start ({}); serving on the CPU", e.what());
    }
  }
#else
  HYMOE_CHECK(config.backend != "hybrid", kUnsupported,
              "backend hybrid: this build has no CUDA (configure with CUDA at /usr/local/cuda)");
#endif
  return make_cpu_executor(config, store, pool);
}

}  // namespace

std::shared_ptr<const JsonModeVocab> make_json_mode_vocab(const tokenizer::Tokenizer& tok, int32_t eos) {
  std::vector<std::string> vocab(static_cast<size_t>(tok.vocab_size()));
  std::vector<int32_t> special;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special(id)) {
      special.push_back(id);
      continue;
    }
    try {
      vocab[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
    } catch (const Error&) {
      // An id the vocabulary leaves undefined: empty, so never allowed.
    }
  }
  return std::make_shared<const JsonModeVocab>(vocab, std::move(special), eos);
}

std::unique_ptr<Runtime> Runtime::load(const ServerConfig& config) {
  auto log = log::get("load");
  auto rt = std::make_unique<Runtime>();
  rt->name = served_model_name(config);
  HYMOE_CHECK(config.load_format == "dummy" || !config.model.empty(), kInvalidArgument,
              "no model: pass --model DIR (an HF DeepSeek-V3 format checkpoint) or --load-format dummy");
  std::string tokenizer_dir = config.tokenizer;
  if (config.load_format == "dummy") {
    ModelConfig mc = preset_config(config.preset, config.dummy_layers);
    if (!tokenizer_dir.empty()) {
      // Random weights, real vocabulary: the embedding must cover every token id.
      auto probe = tokenizer::Tokenizer::load(tokenizer_dir);
      mc.vocab_size = std::max<int64_t>(mc.vocab_size, probe->vocab_size());
    }
    log->info("random weights of preset '{}' ({} layers)", config.preset, mc.num_hidden_layers);
    rt->store = WeightStore::dummy(mc, 0);
  } else {
    LoadOptions lo;
    lo.mode = config.load_mode == "mmap" ? LoadMode::kMmap : LoadMode::kLoad;
    // Parallel readers: one per hardware thread loads ~2x faster than 4 on a 16-core host.
    lo.io_threads = std::max(4, static_cast<int>(std::thread::hardware_concurrency()));
    rt->store = WeightStore::open(config.model, lo);
    rt->model_dir = config.model;
    if (tokenizer_dir.empty()) tokenizer_dir = config.model;
  }
  HYMOE_CHECK(!tokenizer_dir.empty(), kInvalidArgument, "dummy weights need --tokenizer DIR");
  rt->tokenizer = tokenizer::Tokenizer::load(tokenizer_dir);
  HYMOE_CHECK(rt->tokenizer->vocab_size() <= rt->store->config().vocab_size, kInvalidArgument,
              "the tokenizer in '{}' has {} tokens but the model's vocabulary is {}", tokenizer_dir,
              rt->tokenizer->vocab_size(), rt->store->config().vocab_size);
  try {
    rt->chat_template = std::make_unique<tokenizer::ChatTemplate>(tokenizer::ChatTemplate::load(tokenizer_dir));
    log->info("chat template: {}", tokenizer::template_family_name(rt->chat_template->family()));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNotFound) throw;
    log->warn("no chat template in '{}': /v1/chat/completions is unavailable", tokenizer_dir);
  }
  rt->eos = rt->tokenizer->eos_id() ? *rt->tokenizer->eos_id() : static_cast<int32_t>(rt->store->config().eos_token_id);
  rt->json_mode = make_json_mode_vocab(*rt->tokenizer, rt->eos);

  cpu::ThreadPoolOptions po;
  po.threads = config.threads;
#if HYMOE_HAVE_CUDA
  // Stream-loading prefill's host threads (loader, unloader, the long path's model thread) and the
  // engine loop must not queue behind the CPU experts' pinned workers: leave them cores.
  const unsigned hw = std::thread::hardware_concurrency();
  if (config.threads == 0 && config.slp_threshold > 0 && config.slp_host_cores > 0 && config.backend != "cpu" &&
      gpu::device_count() > config.gpu_device && hw > static_cast<unsigned>(config.slp_host_cores) + 1) {
    po.threads = static_cast<int>(hw) - config.slp_host_cores;
    log->info("CPU experts' pool: {} of {} threads ({} left for stream-loading prefill's host threads)", po.threads, hw,
              config.slp_host_cores);
  }
#endif
  rt->pool = std::make_unique<cpu::ThreadPool>(cpu::Topology::detect(), po);
  rt->executor = make_executor(config, *rt->store, *rt->pool, rt->long_executor);
  SchedulerConfig sc;
  sc.max_running = config.max_running;
  sc.max_decode_batch = config.max_decode_batch;
  sc.max_waiting = config.max_waiting;
  sc.max_prefill_chunk = config.max_prefill_chunk;
#if HYMOE_HAVE_CUDA
  // Stream-loading prefill takes every prompt with at least --slp-threshold tokens pending, in
  // steps of up to its step limit (each streams all of the routed experts once), beside the
  // decodes and short prompts of the hybrid path.
  if (auto* slp = slp_of(rt->long_executor.get())) {
    sc.long_prefill_threshold = config.slp_threshold;
    sc.long_prefill_chunk = slp->max_tokens();
  }
#endif
  sc.decode_prefill_chunk = config.decode_prefill_chunk;
  sc.prefix_cache = config.prefix_cache;
  sc.max_context = config.max_context;
  sc.sample_vocab = rt->tokenizer->vocab_size();
  rt->scheduler = std::make_unique<Scheduler>(*rt->executor, rt->eos, sc, rt->long_executor.get());
#if HYMOE_HAVE_CUDA
  if (auto* slp = slp_of(rt->long_executor.get()); slp && config.slp_pacing && slp->ring_slots() > 0) {
    CopyPacerOptions pa;
    pa.tpot_objective_s = config.tpot_slo_ms / 1000.0;
    rt->pacer = std::make_unique<CopyPacer>(pa);
    slp->set_copy_pacer(rt->pacer.get());
    rt->scheduler->set_step_observer([pacer = rt->pacer.get()](const MainStepInfo& i) {
      pacer->on_decode_step(i.seconds, i.decode_tokens, i.prompt_tokens, i.long_running);
    });
    if (config.tpot_slo_ms > 0) {
      log->info("stream-loading prefill's copies paced while requests decode: TPOT objective {} ms", config.tpot_slo_ms);
    } else {
      log->info("stream-loading prefill's copies paced while requests decode: TPOT objective {}x the decode step "
                "measured alone", pa.auto_factor);
    }
  }
#endif
  if (rt->long_executor) {
    log->info("backend: {}, prompts of {}+ tokens on {} beside it", rt->executor->name(), config.slp_threshold,
              rt->long_executor->name());
  } else {
    log->info("backend: {}", rt->executor->name());
  }
  return rt;
}

}  // namespace hymoe::server
