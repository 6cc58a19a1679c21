#include "hymoe/engine/slp_executor.h"

#include <algorithm>
#include <array>
#include <vector>

#include <fmt/format.h>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/common/stopwatch.h"
#include "hymoe/engine/expert_stream.h"
#include "hymoe/engine/gpu_head.h"
#include "hymoe/engine/gpu_linear.h"
#include "hymoe/engine/gpu_model.h"
#include "hymoe/engine/kv_cache.h"
#include "hymoe/engine/layer_sequence.h"
#include "hymoe/engine/slp_moe.h"
#include "hymoe/engine/step_plan.h"
#include "hymoe/gpu/activation.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/layer_kernels.h"
#include "hymoe/gpu/mla_prefill.h"
#include "hymoe/gpu/mla_prefill_cudnn.h"
#include "hymoe/gpu/rope.h"
#include "hymoe/gpu/stream.h"
#include "hymoe/gpu/upload.h"

namespace hymoe {
namespace {

using Clock = SteadyClock;
double gb(size_t bytes) { return static_cast<double>(bytes) / 1e9; }

}  // namespace

struct SlpExecutor::Impl final : LayerOps {
  std::shared_ptr<GpuModel> model;
  const ModelConfig& config;
  ModelWeights weights;  // host views: the streamer copies the routed experts from them
  gpu::MemoryBudget& budget;
  GpuPlacement& placement;
  KvCache* kv;
  const int device;
  SlpExecutorOptions opt;
  const int64_t hidden, heads, lora, rope, width, qk, vdim, chunk, block;
  const int64_t kvw, kvw3;  // kv_b's output per token (k_nope | v per head); the assembled keys and values
  size_t own_bytes = 0;  // this executor's buffers and ring (placement.step_bytes)

  gpu::Stream stream;
  std::unique_ptr<gpu::CublasLt> lt;
  std::unique_ptr<GpuLinear> linear;
  std::unique_ptr<SlpMoe> moe;
  std::unique_ptr<ExpertRing> ring;
  std::unique_ptr<ExpertStreamer> streamer;
  std::unique_ptr<GpuHead> head;
  std::unique_ptr<gpu::MlaPrefillCudnn> cudnn;  // null: the tensor-core kernel
  bool use_cudnn = false;                        // cudnn set up and not turned off
  // Every streamed MoE layer's experts, in layer order (layers whose experts the device model
  // holds are computed where they are); per layer its first item.
  std::vector<ExpertStreamer::Item> schedule;
  std::vector<size_t> first_item;
  void build_schedule();

  // The step's rows: the FP32 residual stream, the norms' outputs (BF16 for the GEMMs, FP32 for
  // the router), the FFN's and attention's FP32 outputs, the router's top-k, the routed sum.
  gpu::DeviceBuffer h, xb, xf, proj, router_logits, topk_ids, topk_w;
  // One chunk's rows: GEMM outputs (BF16), the FP32 inputs of the norms and latent rows, kv_b's
  // output, the MLPs' activations; one attention block's rows: q and the attention output.
  gpu::DeviceBuffer lin_out, wide, qab, kvb, act, q, attn;
  // A second attention output and both blocks' log-sum-exp ([heads, block] FP32), where a
  // sequence's keys come in windows.
  gpu::DeviceBuffer attn_part, lse, lse_part;
  // One sequence's cached latent rows, grown to the longest sequence seen; a window of its keys
  // and values ([window, heads, k_nope | k_pe | v]).
  gpu::DeviceBuffer latent, keys;
  int64_t latent_cap = 0, window = 0;
  // The plan on the device: positions and cache slots per row, then each run's block table.
  StepPlan plan;
  gpu::DeviceBuffer d_plan;
  gpu::PinnedBuffer h_plan;
  int64_t plan_cap = 0;
  std::vector<int64_t> run_table;  // per run: its table's offset in the plan's tables
  const int32_t *p_ids = nullptr, *p_pos = nullptr, *p_slots = nullptr, *p_tables = nullptr;
  gpu::HostRegistration pinned;
  // The timeline (set_timeline): a reference event at the step's start and four per layer
  // (attention begin / end, routed experts begin / end) on the compute stream.
  bool timeline_on = false;
  gpu::Event t_ref;
  std::vector<std::array<gpu::Event, 4>> t_layer;
  std::vector<SlpExecutor::TimelineRow> last_timeline;
  void mark(int64_t li, int k) {
    if (timeline_on) t_layer[static_cast<size_t>(li)][static_cast<size_t>(k)].record(stream);
  }
  Profile prof;
  ExpertStreamer::Stats stream_base;  // the streamer's counts at the last reset_profile()

  Impl(std::shared_ptr<GpuModel> m, const SlpExecutorOptions& o);
  ~Impl() override { placement.step_bytes -= own_bytes; }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  const DevLayer& layer(int64_t li) const { return model->layer(li); }
  int64_t T() const { return plan.tokens(); }
  gpu::DeviceBuffer make(size_t bytes) { return gpu::DeviceBuffer(std::max<size_t>(bytes, 16), &budget); }
  void ensure_latent(int64_t tokens);
  // Expands the sequence's keys [k0, k1) (latent rows gathered) into keys.
  void expand_keys(const DevLayer& l, int64_t k0, int64_t k1);
  void init_attention();
  gpu::MlaPrefillParams attention_params(int64_t rows, int64_t past) const;
  void attend(const gpu::MlaPrefillParams& pp) {
    if (use_cudnn && cudnn->supports(pp)) {
      cudnn->run(pp, stream);
    } else {
      gpu::mla_prefill(pp, stream);
    }
  }
  void upload_plan();
  void forward(std::span<const StepItem> items, std::span<float> logits);
  void widen(const gpu::Bf16* x, int64_t x_stride, int64_t rows, int64_t cols, float* out, int64_t out_stride) {
    gpu::widen_bf16({.x = x, .out = out, .rows = static_cast<int>(rows), .cols = static_cast<int>(cols),
                     .x_stride = x_stride, .out_stride = out_stride},
                    stream);
  }
  // proj rows [0, T) = down(silu(gate x) * up x) for x = xb, chunk by chunk.
  void mlp(const DevMlp& w);
  void stage_done() {
    if (opt.profile_stages) stream.synchronize();
  }
  // With profile_stages: the stream synchronised, the time since t added to `into`.
  void part_done(SteadyClock::time_point t, double& into) {
    if (!opt.profile_stages) return;
    stream.synchronize();
    into += seconds_since(t);
  }

  void attention(int64_t li) override;
  void ffn_input(int64_t li) override;
  void dense_mlp(int64_t li) override { mlp(*layer(li).dense); }
  void router(int64_t li) override;
  void shared_expert(int64_t li) override;
  void routed_experts(int64_t li) override;
  void ffn_residual(int64_t li) override;
};

SlpExecutor::Impl::Impl(std::shared_ptr<GpuModel> m, const SlpExecutorOptions& o)
    : model(std::move(m)),
      config(model->config()),
      weights(model->weights()),
      budget(model->budget()),
      placement(model->placement()),
      kv(&model->kv_cache()),
      device(model->device()),
      opt(o),
      hidden(config.hidden_size),
      heads(config.num_attention_heads),
      lora(config.kv_lora_rank),
      rope(config.qk_rope_head_dim),
      width(config.kv_lora_rank + config.qk_rope_head_dim),
      qk(config.qk_nope_head_dim + config.qk_rope_head_dim),
      vdim(config.v_head_dim),
      chunk(std::min(o.chunk_tokens, o.max_tokens)),
      block(std::max(chunk, std::min(o.attention_tokens, o.max_tokens))),
      kvw(config.num_attention_heads * (config.qk_nope_head_dim + config.v_head_dim)),
      kvw3(config.num_attention_heads * (config.qk_nope_head_dim + config.qk_rope_head_dim + config.v_head_dim)) {
  HYMOE_CUDA_CHECK(cudaSetDevice(device));
  weights.config = &config;
  const ModelConfig& c = config;
  HYMOE_CHECK(model->has_prefill_weights(), kInvalidArgument,
              "SLP executor: the GPU model was built without prefill weights (GpuModelOptions::prefill_weights)");
  HYMOE_CHECK(c.qk_nope_head_dim == gpu::kMlaNopeDim && qk == gpu::kMlaQkDim && vdim == gpu::kMlaVDim &&
                  lora % 128 == 0,
              kUnsupported,
              "SLP executor: attention of nope {} rope {} v {} lora {}; the prefill kernel takes DeepSeek-V3's "
              "(128, 64, 128; lora a multiple of 128)",
              c.qk_nope_head_dim, rope, vdim, lora);
  HYMOE_CHECK(o.max_tokens >= 1 && o.chunk_tokens >= 1 && o.attention_tokens >= 1, kInvalidArgument,
              "SLP executor: max_tokens {}, chunk_tokens {}, attention_tokens {}", o.max_tokens, o.chunk_tokens,
              o.attention_tokens);
  const size_t before = budget.used();
  {
    const auto t = static_cast<size_t>(o.max_tokens), C = static_cast<size_t>(chunk), H = static_cast<size_t>(hidden);
    const int64_t E = c.n_routed_experts, K = c.num_experts_per_tok;
    const int64_t inter = std::max(c.intermediate_size, c.moe_intermediate_size * std::max<int64_t>(c.n_shared_experts, 1));
    lt = std::make_unique<gpu::CublasLt>(gpu::CublasLt::kDefaultWorkspace, &budget);
    const int64_t max_k = std::max({hidden, c.q_lora_rank, lora, heads * vdim, inter});
    linear = std::make_unique<GpuLinear>(*lt, chunk, (max_k + 15) / 16 * 16, &budget);
    head = std::make_unique<GpuHead>(*model, &budget);
    h = make(t * H * 4);
    xb = make(t * H * 2);
    xf = make(t * H * 4);
    proj = make(t * H * 4);
    const bool has_moe = E > 0 && c.num_hidden_layers > c.first_k_dense_replace;
    if (has_moe) {
      router_logits = make(t * static_cast<size_t>(E) * 4);
      topk_ids = make(t * static_cast<size_t>(K) * 4);
      topk_w = make(t * static_cast<size_t>(K) * 4);
      moe = std::make_unique<SlpMoe>(c, *lt, o.max_tokens, &budget);
      moe->set_timing(o.profile_stages);
    }
    const int64_t lin_cols = std::max({c.q_lora_rank, width, hidden, 2 * inter});
    lin_out = make(C * static_cast<size_t>(lin_cols) * 2);
    wide = make(C * static_cast<size_t>(std::max(c.q_lora_rank, width)) * 4);
    qab = make(C * static_cast<size_t>(c.q_lora_rank) * 2);
    kvb = make(C * static_cast<size_t>(kvw) * 2);
    act = make(C * static_cast<size_t>(inter) * 2);
    q = make(static_cast<size_t>(block * heads * qk) * 2);
    attn = make(static_cast<size_t>(block * heads * vdim) * 2);
    window = std::max<int64_t>(1, std::min(o.attention_window, kv->capacity_tokens()));
    keys = make(static_cast<size_t>(window * kvw3) * 2);
    attn_part = make(static_cast<size_t>(block * heads * vdim) * 2);
    lse = make(static_cast<size_t>(block * heads) * 4);
    lse_part = make(static_cast<size_t>(block * heads) * 4);
    ensure_latent(std::min<int64_t>(o.max_tokens, kv->capacity_tokens()));
    init_attention();
    if (has_moe) {
      const size_t slot = ExpertSlotLayout::of(c).bytes;
      int slots = o.ring_slots;
      if (slots <= 0) {
        const size_t avail = budget.available() > o.ring_headroom ? budget.available() - o.ring_headroom : 0;
        slots = static_cast<int>(std::min<size_t>(static_cast<size_t>(E), avail / slot));
      }
      HYMOE_CHECK(slots >= 2, kResourceExhausted,
                  "SLP executor: the GPU memory limit leaves {:.2f} GB after the resident set, the KV pool and the "
                  "prefill buffers ({:.2f} GB for {} tokens); the expert ring needs at least {:.2f} GB (2 slots) plus "
                  "{:.2f} GB headroom: raise --gpu-memory-limit or lower the SLP token limit",
                  gb(budget.available()), gb(budget.used() - before), o.max_tokens, gb(2 * slot), gb(o.ring_headroom));
      ring = std::make_unique<ExpertRing>(c, slots, &budget);
      streamer = std::make_unique<ExpertStreamer>(*ring, weights, device);
    }
  }
  if (!o.pin.empty()) {
    pinned = gpu::HostRegistration(o.pin);
    log::get("engine")->info("SLP executor: {:.2f} GB of host memory pinned for DMA in {:.2f} s", gb(pinned.bytes()),
                             pinned.seconds());
  }
  own_bytes = budget.used() - before;
  placement.step_bytes += own_bytes;
  log::get("engine")->info("SLP executor: {} tokens a step in chunks of {}, buffers {:.2f} GB, expert ring {} slots ({:.2f} GB)",
                           o.max_tokens, chunk, gb(own_bytes - (ring ? static_cast<size_t>(ring->slots()) * ring->layout().bytes : 0)),
                           ring ? ring->slots() : 0, ring ? gb(static_cast<size_t>(ring->slots()) * ring->layout().bytes) : 0.0);
}

// One attention call: `rows` query rows (from q) at positions past.., over the assembled keys
// [0, past + rows), into attn.
gpu::MlaPrefillParams SlpExecutor::Impl::attention_params(int64_t rows, int64_t past) const {
  return gpu::mla_prefill_over_assembled(q.as<gpu::Bf16>(), keys.as<gpu::Bf16>(), attn.as<gpu::Bf16>(),
                                         static_cast<int>(rows), static_cast<int>(past + rows), static_cast<int>(heads),
                                         static_cast<int>(past), model->softmax_scale());
}

// cuDNN where asked or available and it takes this model's shapes; its kernels are compiled for
// the causal and the shifted (past > 0) masks, with and without the log-sum-exp output, here at
// start-up rather than in a request.
void SlpExecutor::Impl::init_attention() {
  using A = SlpExecutorOptions::Attention;
  if (opt.attention == A::kTensorCores) return;
  std::string why;
  if (gpu::MlaPrefillCudnn::available(&why)) {
    const auto t0 = Clock::now();
    auto c = std::make_unique<gpu::MlaPrefillCudnn>(&budget);
    // Both masks; with the log-sum-exp output too (key windows: where cuDNN refuses that, the
    // windows' calls take the tensor-core kernel, attend() asks per call).
    const int64_t rows = std::min<int64_t>(block, 64);
    const gpu::MlaPrefillParams causal = attention_params(rows, 0), shifted = attention_params(rows, rows);
    if (c->supports(causal, &why) && c->supports(shifted, &why)) {
      gpu::MlaPrefillParams causal_lse = causal, shifted_lse = shifted;
      causal_lse.lse = shifted_lse.lse = lse.as<float>();
      (void)c->supports(causal_lse);
      (void)c->supports(shifted_lse);
      cudnn = std::move(c);
      use_cudnn = true;
      log::get("engine")->info("SLP executor: attention by cuDNN (kernels prepared in {:.2f} s)", seconds_since(t0));
      return;
    }
  }
  HYMOE_CHECK(opt.attention != A::kCudnn, kUnsupported, "SLP executor: cuDNN attention asked for but unavailable: {}", why);
  log::get("engine")->info("SLP executor: attention by the tensor-core kernel (cuDNN: {})", why);
}

// The placement may give the device model whole layers of experts after this executor was built
// (the hybrid executor places them in what is left): rebuilt at each step, cheaply.
void SlpExecutor::Impl::build_schedule() {
  schedule.clear();
  first_item.assign(weights.layers.size(), 0);
  for (size_t li = 0; li < weights.layers.size(); ++li) {
    if (!weights.layers[li].moe) continue;
    if (model->layer(static_cast<int64_t>(li)).experts) continue;
    first_item[li] = schedule.size();
    for (int32_t e = 0; e < static_cast<int32_t>(config.n_routed_experts); ++e)
      schedule.push_back({static_cast<int64_t>(li), e});
  }
}

void SlpExecutor::Impl::ensure_latent(int64_t tokens) {
  if (tokens <= latent_cap) return;
  const int64_t old = latent_cap;
  latent = {};
  latent_cap = 0;
  try {
    latent = make(static_cast<size_t>(tokens * width) * 2);
    latent_cap = tokens;
  } catch (...) {
    latent = {};
    if (old > 0) ensure_latent(old);  // keep serving shorter sequences
    throw;
  }
}

void SlpExecutor::Impl::upload_plan() {
  const int64_t n = T(), runs = plan.runs(), bt = kv->shape().block_tokens;
  run_table.assign(static_cast<size_t>(runs), 0);
  int64_t table_ints = 0;
  for (int64_t r = 0; r < runs; ++r) {
    run_table[static_cast<size_t>(r)] = table_ints;
    const int64_t last = plan.token_pos[static_cast<size_t>(plan.run_begin[static_cast<size_t>(r + 1)] - 1)];
    table_ints += (last + bt) / bt;
  }
  const int64_t ints = 3 * n + table_ints;
  if (ints > plan_cap) {
    d_plan = {};
    h_plan = {};
    plan_cap = 0;
    d_plan = make(static_cast<size_t>(ints) * 4);
    h_plan = gpu::PinnedBuffer(static_cast<size_t>(ints) * 4);
    plan_cap = ints;
  }
  int32_t* ids = h_plan.as<int32_t>().data();
  int32_t* pos = ids + n;
  int32_t* slots = pos + n;
  int32_t* tables = slots + n;
  for (int64_t t = 0; t < n; ++t) {
    const auto ts = static_cast<size_t>(t);
    const int64_t p = plan.token_pos[ts];
    const BlockTable& table = *plan.token_item[ts]->table;
    ids[t] = plan.token_id[ts];
    pos[t] = static_cast<int32_t>(p);
    slots[t] = static_cast<int32_t>(table.blocks[static_cast<size_t>(p / bt)] * bt + p % bt);
  }
  for (int64_t r = 0; r < runs; ++r) {
    const auto b = static_cast<size_t>(plan.run_begin[static_cast<size_t>(r)]);
    const BlockTable& table = *plan.token_item[b]->table;
    const int64_t last = plan.token_pos[static_cast<size_t>(plan.run_begin[static_cast<size_t>(r + 1)] - 1)];
    const auto blocks = static_cast<size_t>((last + bt) / bt);
    std::copy(table.blocks.begin(), table.blocks.begin() + static_cast<std::ptrdiff_t>(blocks),
              tables + run_table[static_cast<size_t>(r)]);
  }
  gpu::upload_mapped(d_plan.data(), ids, static_cast<size_t>(ints) * 4, stream);  // not behind expert copies
  const int32_t* base = d_plan.as<int32_t>();
  p_ids = base;
  p_pos = base + n;
  p_slots = base + 2 * n;
  p_tables = base + 3 * n;
}

void SlpExecutor::Impl::forward(std::span<const StepItem> items, std::span<float> logits) {
  const auto t_step = Clock::now();
  HYMOE_CUDA_CHECK(cudaSetDevice(device));
  const ModelConfig& c = config;
  plan.build(items, *kv, c.vocab_size);
  const int64_t n = T();
  if (n == 0) return;
  HYMOE_CHECK(n <= opt.max_tokens, kInvalidArgument, "SLP executor: a step of {} tokens, at most {}", n, opt.max_tokens);
  HYMOE_CHECK(static_cast<int64_t>(logits.size()) == static_cast<int64_t>(plan.logit_rows.size()) * c.vocab_size,
              kInternal, "logits buffer holds {} values, {} rows of {} needed", logits.size(), plan.logit_rows.size(),
              c.vocab_size);
  int64_t longest = 0;
  for (int64_t r = 0; r < plan.runs(); ++r)
    longest = std::max(longest, plan.token_pos[static_cast<size_t>(plan.run_begin[static_cast<size_t>(r + 1)] - 1)] + 1);
  ensure_latent(longest);
  upload_plan();
  gpu::embed_f32({.ids = p_ids, .table = model->embed().as<gpu::Bf16>(), .out = h.as<float>(), .tokens = static_cast<int>(n),
                  .dim = static_cast<int>(hidden)},
                 stream);
  build_schedule();
  const bool streaming = streamer && !schedule.empty();
  if (timeline_on) {
    if (t_layer.size() != weights.layers.size()) t_layer = std::vector<std::array<gpu::Event, 4>>(weights.layers.size());
    t_ref.record(stream);
  }
  if (streamer) streamer->set_layer_marks(timeline_on);
  if (streaming) streamer->start(schedule);
  LayerTimes times;
  try {
    run_layers(weights, *this, &times);
    if (streaming) streamer->finish();
  } catch (...) {
    if (streaming) streamer->cancel();
    stream.synchronize();
    throw;
  }
  const auto t_head = Clock::now();
  head->run(h.as<float>(), plan.logit_rows, logits, stream);
  prof.head_s += seconds_since(t_head);
  StepPlan::advance(items);
  if (timeline_on) {
    stream.synchronize();
    last_timeline.clear();
    std::vector<ExpertStreamer::LayerCopy> copies;
    if (streaming) copies = streamer->layer_copies(t_ref);
    for (size_t li = 0; li < weights.layers.size(); ++li) {
      if (!weights.layers[li].moe) continue;
      const auto& e = t_layer[li];
      TimelineRow row{static_cast<int64_t>(li), gpu::Event::elapsed_ms(t_ref, e[0]), gpu::Event::elapsed_ms(t_ref, e[1]),
                      gpu::Event::elapsed_ms(t_ref, e[2]), gpu::Event::elapsed_ms(t_ref, e[3])};
      for (const auto& cp : copies) {
        if (cp.layer != static_cast<int64_t>(li)) continue;
        row.copy_begin = cp.begin_ms;
        row.copy_end = cp.end_ms;
      }
      last_timeline.push_back(row);
    }
  }
  prof.attention_s += times.attention_s;
  prof.dense_s += times.dense_s;
  prof.moe_s += times.moe_s;
  ++prof.steps;
  prof.tokens += n;
  prof.step_s += seconds_since(t_step);
}

void SlpExecutor::Impl::attention(int64_t li) {
  const ModelConfig& c = config;
  const DevLayer& l = layer(li);
  const int64_t n = T(), qlr = c.q_lora_rank;
  const float eps = static_cast<float>(c.rms_norm_eps);
  gpu::Bf16* x = xb.as<gpu::Bf16>();
  gpu::Bf16* y = lin_out.as<gpu::Bf16>();
  float* w = wide.as<float>();
  gpu::Bf16* cache = model->cache_layer(li);
  mark(li, 0);
  gpu::rmsnorm_f32({.x = h.as<float>(), .weight = l.input_norm.as<float>(), .out = x, .rows = static_cast<int>(n),
                    .cols = static_cast<int>(hidden), .eps = eps},
                   stream);
  // Every row's latent KV row into the pool first: a sequence's queries then read its keys whole.
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t m = std::min(chunk, n - c0);
    linear->run(l.kv_a, x + c0 * hidden, hidden, m, y, width, stream);
    widen(y, width, m, width, w, width);
    gpu::mla_latent_rows({.kva = w, .norm_weight = l.kv_a_norm.as<float>(), .positions = p_pos + c0, .slots = p_slots + c0,
                          .cache = cache, .table = model->yarn(), .tokens = static_cast<int>(m), .lora = static_cast<int>(lora),
                          .rope = static_cast<int>(rope), .kva_stride = width, .eps = eps},
                         stream);
  }
  for (int64_t r = 0; r < plan.runs(); ++r) {
    const int64_t rb = plan.run_begin[static_cast<size_t>(r)], re = plan.run_begin[static_cast<size_t>(r + 1)];
    const int64_t kv_len = plan.token_pos[static_cast<size_t>(re - 1)] + 1;
    // The sequence's latent rows [0, kv_len) in order, expanded by kv_b and laid out per head as
    // k_nope | k_pe | v.
    gpu::mla_gather_latent({.cache = cache, .block_table = p_tables + run_table[static_cast<size_t>(r)],
                            .out = latent.as<gpu::Bf16>(), .tokens = static_cast<int>(kv_len), .width = static_cast<int>(width),
                            .block_tokens = static_cast<int>(kv->shape().block_tokens)},
                           stream);
    // Keys that fit the window are expanded once for all the sequence's rows; longer sequences
    // expand window after window for each block of rows (kv_b is cheap beside attention).
    const bool whole = kv_len <= window;
    if (whole) expand_keys(l, 0, kv_len);
    for (int64_t b0 = rb; b0 < re; b0 += block) {
      const int64_t bm = std::min(block, re - b0);
      // q = q_b(rmsnorm(q_a(x))) for the block's rows, q_pe roped in place.
      for (int64_t c0 = b0; c0 < b0 + bm; c0 += chunk) {
        const int64_t m = std::min(chunk, b0 + bm - c0);
        gpu::Bf16* qc = q.as<gpu::Bf16>() + (c0 - b0) * heads * qk;
        linear->run(l.q_a, x + c0 * hidden, hidden, m, y, qlr, stream);
        widen(y, qlr, m, qlr, w, qlr);
        gpu::rmsnorm_f32({.x = w, .weight = l.q_a_norm.as<float>(), .out = qab.as<gpu::Bf16>(), .rows = static_cast<int>(m),
                          .cols = static_cast<int>(qlr), .eps = eps},
                         stream);
        linear->run(l.q_b, qab.as<gpu::Bf16>(), qlr, m, qc, heads * qk, stream);
        gpu::rope_yarn({.x = qc + gpu::kMlaNopeDim, .positions = p_pos + c0, .tokens = static_cast<int>(m),
                        .heads = static_cast<int>(heads), .token_stride = heads * qk, .head_stride = qk, .table = model->yarn()},
                       stream);
      }
      const int64_t first_pos = plan.token_pos[static_cast<size_t>(b0)], end = first_pos + bm;
      if (whole) {
        attend(attention_params(bm, first_pos));
      } else {
        // Window [k0, k1) is seen by the block's rows from r0 on (the earlier rows' causal limit
        // lies before it); the first window reaches every row.
        for (int64_t k0 = 0; k0 < end; k0 += window) {
          const int64_t k1 = std::min(end, k0 + window), r0 = std::max<int64_t>(0, k0 - first_pos);
          expand_keys(l, k0, k1);
          gpu::MlaPrefillParams pp = attention_params(bm - r0, first_pos + r0 - k0);
          pp.q += r0 * heads * qk;
          pp.kv_tokens = static_cast<int>(k1 - k0);
          const bool first = k0 == 0;
          pp.out = (first ? attn : attn_part).as<gpu::Bf16>() + r0 * heads * vdim;
          pp.lse = (first ? lse : lse_part).as<float>();
          attend(pp);
          if (first) continue;
          gpu::mla_merge_attention({.out = attn.as<gpu::Bf16>() + r0 * heads * vdim, .lse = lse.as<float>() + r0,
                                    .part = pp.out, .part_lse = pp.lse, .rows = pp.tokens, .heads = static_cast<int>(heads),
                                    .out_token_stride = heads * vdim, .out_head_stride = vdim,
                                    .part_token_stride = heads * vdim, .part_head_stride = vdim,
                                    .lse_head_stride = bm, .part_lse_head_stride = pp.tokens},
                                   stream);
        }
      }
      for (int64_t c0 = b0; c0 < b0 + bm; c0 += chunk) {
        const int64_t m = std::min(chunk, b0 + bm - c0);
        linear->run(l.o, attn.as<gpu::Bf16>() + (c0 - b0) * heads * vdim, heads * vdim, m, y, hidden, stream);
        widen(y, hidden, m, hidden, proj.as<float>() + c0 * hidden, hidden);
      }
    }
  }
  gpu::residual_add({.h = h.as<float>(), .a = proj.as<float>(), .n = n * hidden}, stream);
  mark(li, 1);
  stage_done();
}

void SlpExecutor::Impl::expand_keys(const DevLayer& l, int64_t k0, int64_t k1) {
  for (int64_t c0 = k0; c0 < k1; c0 += chunk) {
    const int64_t m = std::min(chunk, k1 - c0);
    linear->run(l.kv_b, latent.as<gpu::Bf16>() + c0 * width, width, m, kvb.as<gpu::Bf16>(), kvw, stream);
    gpu::mla_assemble_kv({.kvb = kvb.as<gpu::Bf16>(), .latent = latent.as<gpu::Bf16>() + c0 * width,
                          .out = keys.as<gpu::Bf16>() + (c0 - k0) * kvw3, .tokens = static_cast<int>(m),
                          .heads = static_cast<int>(heads), .nope = gpu::kMlaNopeDim, .rope = static_cast<int>(rope),
                          .vdim = static_cast<int>(vdim), .lora = static_cast<int>(lora), .latent_stride = width},
                         stream);
  }
}

void SlpExecutor::Impl::ffn_input(int64_t li) {
  gpu::rmsnorm_f32({.x = h.as<float>(), .weight = layer(li).post_norm.as<float>(), .out = xb.as<gpu::Bf16>(),
                    .out_f32 = xf.as<float>(), .rows = static_cast<int>(T()), .cols = static_cast<int>(hidden),
                    .eps = static_cast<float>(config.rms_norm_eps)},
                   stream);
}

void SlpExecutor::Impl::mlp(const DevMlp& w) {
  const int64_t n = T(), inter = w.gate.n;
  gpu::Bf16* y = lin_out.as<gpu::Bf16>();
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t m = std::min(chunk, n - c0);
    const gpu::Bf16* x = xb.as<gpu::Bf16>() + c0 * hidden;
    linear->run(w.gate, x, hidden, m, y, 2 * inter, stream);
    linear->run(w.up, x, hidden, m, y + inter, 2 * inter, stream);
    gpu::silu_mul({.gate_up = y, .out = act.as<gpu::Bf16>(), .rows = static_cast<int>(m), .cols = static_cast<int>(inter),
                   .in_stride = 2 * inter, .out_stride = inter},
                  stream);
    linear->run(w.down, act.as<gpu::Bf16>(), inter, m, y, hidden, stream);
    widen(y, hidden, m, hidden, proj.as<float>() + c0 * hidden, hidden);
  }
}

void SlpExecutor::Impl::router(int64_t li) {
  const ModelConfig& c = config;
  const DevLayer& l = layer(li);
  const int64_t n = T(), E = c.n_routed_experts;
  const auto t0 = Clock::now();
  // FP32 scores from the FP32 normed state (as the hybrid path; a tiled kernel for many tokens).
  gpu::dense_gemm_f32({.w = l.router_w.as<gpu::Bf16>(), .x = xf.as<float>(), .y = router_logits.as<float>(),
                       .tokens = static_cast<int>(n), .n = static_cast<int>(E), .k = static_cast<int>(hidden), .ldy = E},
                      stream);
  model->route(li, router_logits.as<float>(), topk_ids.as<int32_t>(), topk_w.as<float>(), static_cast<int>(n), stream);
  part_done(t0, prof.router_s);
}

void SlpExecutor::Impl::shared_expert(int64_t li) {
  const auto t0 = Clock::now();
  if (const auto& s = layer(li).shared) {
    mlp(*s);
  } else {
    HYMOE_CUDA_CHECK(cudaMemsetAsync(proj.data(), 0, static_cast<size_t>(T() * hidden) * 4, stream));
  }
  part_done(t0, prof.shared_s);
}

void SlpExecutor::Impl::routed_experts(int64_t li) {
  const int64_t n = T();
  // The routed sum in FP32 into xf, free once the router has read it.
  const auto& resident = layer(li).experts;
  mark(li, 2);
  moe->run({.x = xb.as<gpu::Bf16>(), .topk_ids = topk_ids.as<int32_t>(), .topk_weights = topk_w.as<float>(),
            .out = xf.as<float>(), .tokens = n, .first_item = first_item[static_cast<size_t>(li)],
            .resident = resident ? resident->host_views.data() : nullptr},
           *streamer, *ring, stream);
  mark(li, 3);
}

void SlpExecutor::Impl::ffn_residual(int64_t li) {
  const bool is_moe = weights.layers[static_cast<size_t>(li)].moe.has_value();
  gpu::residual_add({.h = h.as<float>(), .a = proj.as<float>(), .b = is_moe ? xf.as<float>() : nullptr, .n = T() * hidden},
                    stream);
  stage_done();
}

SlpExecutor::SlpExecutor(std::shared_ptr<GpuModel> model, const SlpExecutorOptions& options)
    : impl_(std::make_unique<Impl>(std::move(model), options)) {}

SlpExecutor::~SlpExecutor() = default;

std::unique_ptr<SlpExecutor> SlpExecutor::create_fitting(std::shared_ptr<GpuModel> model, SlpExecutorOptions options,
                                                         int64_t min_tokens) {
  for (;; options.max_tokens /= 2) {
    try {
      return std::make_unique<SlpExecutor>(model, options);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kResourceExhausted || options.max_tokens / 2 < std::max<int64_t>(min_tokens, 1)) throw;
    }
  }
}

const ModelConfig& SlpExecutor::config() const { return impl_->config; }
KvCache& SlpExecutor::kv_cache() { return *impl_->kv; }
void SlpExecutor::forward(std::span<const StepItem> items, std::span<float> logits) { impl_->forward(items, logits); }
std::string SlpExecutor::placement_summary() const {
  int64_t resident = 0;
  for (size_t li = 0; li < impl_->weights.layers.size(); ++li)
    resident += impl_->weights.layers[li].moe && impl_->model->layer(static_cast<int64_t>(li)).experts ? 1 : 0;
  return fmt::format("{}; SLP: {} tokens a step, expert ring of {} slots, {} MoE layers' experts used in place, attention "
                     "by {}",
                     impl_->placement.describe(), impl_->opt.max_tokens, ring_slots(), resident, attention_kernel());
}
const char* SlpExecutor::attention_kernel() const { return impl_->use_cudnn ? "cudnn" : "tensor-cores"; }
void SlpExecutor::set_timeline(bool on) { impl_->timeline_on = on; }
std::vector<SlpExecutor::TimelineRow> SlpExecutor::timeline() const { return impl_->last_timeline; }
void SlpExecutor::set_attention_tensor_cores(bool on) { impl_->use_cudnn = impl_->cudnn && !on; }
int SlpExecutor::ring_slots() const { return impl_->ring ? impl_->ring->slots() : 0; }
int64_t SlpExecutor::max_tokens() const { return impl_->opt.max_tokens; }

SlpExecutor::Profile SlpExecutor::profile() const {
  Profile p = impl_->prof;
  if (impl_->streamer) {
    const auto st = impl_->streamer->stats();
    const auto& b = impl_->stream_base;
    p.streamed_bytes = st.bytes - b.bytes;
    p.model_wait_s = st.model_wait_s - b.model_wait_s;
    p.slot_wait_s = st.slot_wait_s - b.slot_wait_s;
    p.paced_s = st.paced_s - b.paced_s;
  }
  if (impl_->moe) {
    const SlpMoe::Times& t = impl_->moe->times();
    p.routed_prep_s = t.prep_s;
    p.routed_wait_s = t.wait_s;
    p.routed_gemm_s = t.gemm_s;
    p.routed_combine_s = t.combine_s;
  }
  return p;
}

void SlpExecutor::set_copy_pacer(CopyPacer* pacer) {
  if (impl_->streamer) impl_->streamer->set_pacer(pacer);
}

void SlpExecutor::set_profile_stages(bool on) {
  impl_->opt.profile_stages = on;
  if (impl_->moe) impl_->moe->set_timing(on);
}

void SlpExecutor::reset_profile() {
  impl_->prof = {};
  if (impl_->streamer) impl_->stream_base = impl_->streamer->stats();
  if (impl_->moe) impl_->moe->reset_times();
}

}  // namespace hymoe
