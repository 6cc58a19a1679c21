#include "hymoe/engine/hybrid_executor.h"

#include <algorithm>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/common/numeric.h"
#include "hymoe/common/stopwatch.h"
#include "hymoe/engine/cpu_routed_experts.h"
#include "hymoe/engine/fp8_special_index.h"
#include "hymoe/engine/gpu_head.h"
#include "hymoe/engine/gpu_model.h"
#include "hymoe/engine/kv_cache.h"
#include "hymoe/engine/layer_sequence.h"
#include "hymoe/engine/step_plan.h"
#include "hymoe/gpu/gemm.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/fp8_gemv.h"
#include "hymoe/gpu/layer_kernels.h"
#include "hymoe/gpu/mla_decode.h"
#include "hymoe/gpu/rope.h"
#include "hymoe/gpu/stream.h"
#include "hymoe/gpu/upload.h"
#include "hymoe/kernels/isa.h"
#include "hymoe/model/weight_store.h"

namespace hymoe {
namespace {

using Clock = SteadyClock;

}  // namespace

struct HybridExecutor::Impl {
  struct Lane;
  // The device half (weights, KV pool, budget), maybe shared with other executors; the names
  // below are views of it.
  std::shared_ptr<GpuModel> model;
  const ModelConfig& config;
  ModelWeights weights;  // this executor's host views (the CPU experts' special-code index attaches here)
  gpu::MemoryBudget& budget;
  GpuPlacement& placement;
  KvCache* kv;
  const gpu::YarnTable& yarn;
  const float softmax_scale;
  const gpu::Fp8GemvImpl gemv_impl;
  const int device;  // made current by every forward() (the scheduler's thread is not the loader's)
  Fp8SpecialIndex specials;
  cpu::ThreadPool& pool;
  // Plan upload, embedding, head; the lanes' streams join it. Decode's streams are the device's
  // highest priority: a stream-loading prefill beside them gets the SMs they leave.
  gpu::Stream stream{gpu::highest_stream_priority()};
  gpu::Event embedded{false};
  bool dual_microbatch = true;
  // Decode rows through the tuned mla_decode (HybridExecutorOptions::tuned_decode_attention):
  // whether it applies, the SM count its splits are planned for, the most splits a row gets.
  bool tuned_decode = false;
  int multiprocessors = 0;
  int max_decode_splits = 1;
  size_t own_step_bytes = 0;  // what this executor's step buffers took at construction (placement)
  std::unique_ptr<CpuRoutedExperts> routed;

  // The step: its plan, on the device as int32 arrays of every row; the FP32 residual stream
  // [T, hidden]; the head's rows and logits. Each lane works on a range of rows.
  StepPlan plan;
  int64_t cap_tokens = 0, cap_blocks = 0;
  // The plan goes up in one copy: ids, positions, cache slots, causal lengths (T each), then the
  // block tables (T rows of step_blocks); the pointers below are this step's views of d_plan.
  gpu::DeviceBuffer d_plan, d_h;
  const int32_t *p_ids = nullptr, *p_pos = nullptr, *p_slots = nullptr, *p_lens = nullptr, *p_tables = nullptr;
  gpu::PinnedBuffer h_plan;
  std::unique_ptr<GpuHead> gpu_head;
  int64_t step_tokens = 0, step_blocks = 0;
  std::unique_ptr<Lane> lanes[2];
  Profile profile;

  Impl(std::shared_ptr<GpuModel> m, cpu::ThreadPool& p, const HybridExecutorOptions& o);
  ~Impl() { placement.step_bytes -= own_step_bytes; }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  const DevLayer& layer(int64_t li) const { return model->layer(li); }

  // Grows the plan arrays and the residual stream to T rows and `blocks` blocks a row; on
  // failure (past the budget) keeps the old ones and throws.
  void ensure_plan_capacity(int64_t T, int64_t blocks);
  void allocate_plan(int64_t T, int64_t blocks);

  gpu::Bf16* cache_layer(int64_t li) const { return model->cache_layer(li); }
  // y[t] = W x[t] for t < T: FP8 GEMVs of up to 8 rows, one implementation for every row count
  // (a row's result does not depend on the rows beside it).
  // FP32 results (the CPU engine rounds a linear layer's output only where the next one reads it).
  void linear(const DevFp8& w, const gpu::Bf16* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
              cudaStream_t s) const {
    for (int64_t t0 = 0; t0 < T; t0 += gpu::kGemvMaxTokens) {
      gpu::Fp8GemvParams p;
      p.w = w.data.as<gpu::Fp8E4M3>();
      p.w_scales = w.scales.as<float>();
      p.x = x + t0 * ldx;
      p.y_f32 = y + t0 * ldy;
      p.tokens = static_cast<int>(std::min<int64_t>(gpu::kGemvMaxTokens, T - t0));
      p.n = w.n;
      p.k = w.k;
      p.ldw = w.k;
      p.scale_ld = w.scale_ld;
      p.ldx = ldx;
      p.ldy = ldy;
      p.impl = gemv_impl;
      gpu::fp8_gemv(p, s);
    }
  }
  // y[t] = M x[t] for dense BF16 weights and FP32 x / y, up to 8 rows a launch.
  static void dense(const gpu::DeviceBuffer& w, int n, int k, const float* x, int64_t T, float* y, int64_t ldy,
                    cudaStream_t s) {
    for (int64_t t0 = 0; t0 < T; t0 += gpu::kDenseGemvMaxTokens) {
      gpu::dense_gemv_f32({.w = w.as<gpu::Bf16>(), .x = x + t0 * k, .y = y + t0 * ldy,
                           .tokens = static_cast<int>(std::min<int64_t>(gpu::kDenseGemvMaxTokens, T - t0)), .n = n,
                           .k = k, .ldy = ldy},
                          s);
    }
  }

  void forward(std::span<const StepItem> items, std::span<float> logits);
  void upload_plan();
  void head(std::span<float> logits);
};

// One micro-batch: rows [row0, row0 + rows) of the step, with its own stream, scratch buffers
// and hand-off buffers. The stages enqueue GPU work on the lane's stream; routed_experts waits for
// the lane's hand-off copy and runs the CPU experts.
struct HybridExecutor::Impl::Lane final : LayerOps {
  static constexpr int64_t kMoeGemvRows = 2048;  // rows per moe_gemv launch (grid y = rows * top_k <= 65535)
  Impl& x;
  gpu::Stream stream{gpu::highest_stream_priority()};
  gpu::Event moe_input_ready{false}, done{false};
  int64_t row0 = 0, rows = 0, decode_rows = 0;  // decode rows: [row0, row0 + decode_rows)
  int64_t cap = 0;
  // FP32: xf, proj, qa, q, kva, qabs, olat, gate_up, router_logits, topk_w, routed; BF16: xb, qab,
  // attn, act, moe_act (the inputs of linear layers).
  gpu::DeviceBuffer xf, xb, proj, qa, qab, q, kva, qabs, olat, attn, gate_up, act, router_logits, topk_w, topk_ids, routed,
      moe_act;
  // The tuned decode attention's BF16 q and o_lat (decode rows) and its split-K workspace.
  gpu::DeviceBuffer qabs_bf, olat_bf, decode_ws;
  gpu::PinnedBuffer h_xb, h_topk, h_routed;

  explicit Lane(Impl& impl) : x(impl) {}

  void ensure_capacity(int64_t T) {
    if (T <= cap) return;
    const int64_t old = cap;
    try {
      allocate(T);
    } catch (...) {
      if (old > 0) allocate(old);
      throw;
    }
  }
  void allocate(int64_t T);

  static gpu::Bf16* bf(const gpu::DeviceBuffer& b) { return b.as<gpu::Bf16>(); }
  static float* f32(const gpu::DeviceBuffer& b) { return b.as<float>(); }
  float* h() const { return x.d_h.as<float>() + row0 * x.config.hidden_size; }
  const int32_t* rows_of(const int32_t* plan_array) const { return plan_array + row0; }
  int Ti() const { return static_cast<int>(rows); }

  // out = down(BF16(silu(gate in) * up in)), FP32 out.
  void mlp(const DevMlp& w, const gpu::Bf16* in, float* out) {
    const int64_t inter = w.gate.n, hidden = x.config.hidden_size;
    float* gu = f32(gate_up);
    x.linear(w.gate, in, hidden, rows, gu, 2 * inter, stream);
    x.linear(w.up, in, hidden, rows, gu + inter, 2 * inter, stream);
    gpu::silu_mul_f32({.gate_up = gu, .out = bf(act), .rows = Ti(), .cols = static_cast<int>(inter),
                       .in_stride = 2 * inter, .out_stride = inter},
                      stream);
    x.linear(w.down, bf(act), inter, rows, out, hidden, stream);
  }

  void attention(int64_t li) override;
  void ffn_input(int64_t li) override;
  void dense_mlp(int64_t li) override { mlp(*x.layer(li).dense, bf(xb), f32(proj)); }
  void router(int64_t li) override;
  void shared_expert(int64_t li) override;
  void routed_experts(int64_t li) override;
  void ffn_residual(int64_t li) override;
};

HybridExecutor::Impl::Impl(std::shared_ptr<GpuModel> m, cpu::ThreadPool& p, const HybridExecutorOptions& o)
    : model(std::move(m)),
      config(model->config()),
      weights(model->weights()),
      budget(model->budget()),
      placement(model->placement()),
      kv(&model->kv_cache()),
      yarn(model->yarn()),
      softmax_scale(model->softmax_scale()),
      gemv_impl(model->gemv_impl()),
      device(model->device()),
      pool(p) {
  HYMOE_CUDA_CHECK(cudaSetDevice(device));
  weights.config = &config;
  const ModelConfig& c = config;
  const gpu::DeviceInfo& info = model->device_info();
  if (c.n_routed_experts > 0 && c.num_hidden_layers > c.first_k_dense_replace)
    routed = std::make_unique<CpuRoutedExperts>(pool, c);
  if (o.shift_decode && kernels::best_isa() == kernels::Isa::kAvx512Bf16) specials = Fp8SpecialIndex::attach(weights, pool);
  dual_microbatch = o.dual_microbatch;
  tuned_decode = o.tuned_decode_attention && c.kv_lora_rank == 512 && c.qk_rope_head_dim == 64 &&
                 c.num_attention_heads % 16 == 0 && info.sm() >= 80;
  multiprocessors = info.multiprocessors;
  if (tuned_decode) {
    max_decode_splits = gpu::mla_decode_splits_for(gpu::MlaDecodeImpl::kAuto, multiprocessors, 1,
                                                   static_cast<int>(c.num_attention_heads),
                                                   static_cast<int>(kv->capacity_tokens()));
  }
  lanes[0] = std::make_unique<Lane>(*this);
  lanes[1] = std::make_unique<Lane>(*this);
  const size_t before = budget.used();
  gpu_head = std::make_unique<GpuHead>(*model, &budget);
  ensure_plan_capacity(std::max<int64_t>(o.max_step_tokens, 1), 1);
  lanes[0]->ensure_capacity(std::max<int64_t>(o.max_step_tokens, 1));
  own_step_bytes = budget.used() - before;
  placement.step_bytes += own_step_bytes;
  // Whole MoE layers' routed experts where room is left (headroom for the larger steps' buffers).
  model->place_experts(o.max_gpu_expert_layers, size_t{1} << 30);
  log::get("engine")->info("hybrid executor: {}", placement.describe());
}

void HybridExecutor::Impl::ensure_plan_capacity(int64_t T, int64_t blocks) {
  if (T <= cap_tokens && blocks <= cap_blocks) return;
  const int64_t old_tokens = cap_tokens, old_blocks = cap_blocks;
  try {
    allocate_plan(std::max(T, cap_tokens), std::max(blocks, cap_blocks));
  } catch (...) {
    // Past the budget (or out of device memory): keep serving with the buffers it had.
    if (old_tokens > 0) allocate_plan(old_tokens, old_blocks);
    throw;
  }
}

void HybridExecutor::Impl::allocate_plan(int64_t T, int64_t blocks) {
  cap_tokens = cap_blocks = 0;
  const size_t t = static_cast<size_t>(T), hidden = static_cast<size_t>(config.hidden_size);
  for (auto* b : {&d_plan, &d_h}) *b = {};
  h_plan = {};
  auto make = [&](size_t bytes) { return gpu::DeviceBuffer(std::max<size_t>(bytes, 16), &budget); };
  d_plan = make((4 * t + t * static_cast<size_t>(blocks)) * 4);
  d_h = make(t * hidden * 4);
  h_plan = gpu::PinnedBuffer((4 * t + t * static_cast<size_t>(blocks)) * 4);
  cap_tokens = T;
  cap_blocks = blocks;
}

void HybridExecutor::Impl::Lane::allocate(int64_t T) {
  cap = 0;
  const ModelConfig& c = x.config;
  const size_t t = static_cast<size_t>(T), hidden = static_cast<size_t>(c.hidden_size);
  const size_t heads = static_cast<size_t>(c.num_attention_heads), width = static_cast<size_t>(c.kv_lora_rank + c.qk_rope_head_dim);
  const size_t inter = static_cast<size_t>(std::max(c.intermediate_size, c.moe_intermediate_size * std::max<int64_t>(c.n_shared_experts, 1)));
  const size_t E = static_cast<size_t>(std::max<int64_t>(c.n_routed_experts, 1)), K = static_cast<size_t>(std::max<int64_t>(c.num_experts_per_tok, 1));
  for (auto* b : {&xf, &xb, &proj, &qa, &qab, &q, &kva, &qabs, &olat, &attn, &gate_up, &act, &router_logits, &topk_w, &topk_ids,
                  &routed, &moe_act, &qabs_bf, &olat_bf, &decode_ws})
    *b = {};  // release first: the budget counts old and new otherwise
  h_xb = {};
  h_topk = {};
  h_routed = {};
  auto make = [&](size_t bytes) { return gpu::DeviceBuffer(std::max<size_t>(bytes, 16), &x.budget); };
  xf = make(t * hidden * 4);
  xb = make(t * hidden * 2);
  proj = make(t * hidden * 4);
  qa = make(t * static_cast<size_t>(c.q_lora_rank) * 4);
  qab = make(t * static_cast<size_t>(c.q_lora_rank) * 2);
  q = make(t * heads * static_cast<size_t>(c.qk_nope_head_dim + c.qk_rope_head_dim) * 4);
  kva = make(t * width * 4);
  qabs = make(t * heads * width * 4);
  olat = make(t * heads * static_cast<size_t>(c.kv_lora_rank) * 4);
  attn = make(t * heads * static_cast<size_t>(c.v_head_dim) * 2);
  gate_up = make(t * 2 * inter * 4);
  act = make(t * inter * 2);
  router_logits = make(t * E * 4);
  topk_w = make(t * K * 4);
  topk_ids = make(t * K * 4);
  routed = make(t * hidden * 4);
  moe_act = make(t * K * static_cast<size_t>(c.moe_intermediate_size) * 2);
  if (x.tuned_decode) {
    qabs_bf = make(t * heads * width * 2);
    olat_bf = make(t * heads * static_cast<size_t>(c.kv_lora_rank) * 2);
    decode_ws = make(gpu::mla_decode_workspace_bytes(1, static_cast<int>(heads), x.max_decode_splits));
  }
  h_xb = gpu::PinnedBuffer(t * hidden * 2);
  h_topk = gpu::PinnedBuffer(t * K * 8);
  h_routed = gpu::PinnedBuffer(t * hidden * 4);
  cap = T;
}

void HybridExecutor::Impl::upload_plan() {
  const int64_t T = plan.tokens();
  int64_t blocks = 1;
  for (const StepItem* it : plan.token_item) blocks = std::max<int64_t>(blocks, static_cast<int64_t>(it->table->blocks.size()));
  ensure_plan_capacity(T, blocks);
  step_tokens = T;
  step_blocks = blocks;
  int32_t* ids = h_plan.as<int32_t>().data();
  int32_t* pos = ids + T;
  int32_t* slots = pos + T;
  int32_t* lens = slots + T;
  int32_t* tables = lens + T;
  const int64_t bt = kv->shape().block_tokens;
  for (int64_t t = 0; t < T; ++t) {
    const size_t ts = static_cast<size_t>(t);
    const int64_t p = plan.token_pos[ts];
    const BlockTable& table = *plan.token_item[ts]->table;
    ids[t] = plan.token_id[ts];
    pos[t] = static_cast<int32_t>(p);
    slots[t] = static_cast<int32_t>(table.blocks[static_cast<size_t>(p / bt)] * bt + p % bt);
    lens[t] = static_cast<int32_t>(p + 1);  // causal: a token sees its own position and those before
    int32_t* row = tables + t * blocks;
    std::copy(table.blocks.begin(), table.blocks.end(), row);
    std::fill(row + table.blocks.size(), row + blocks, 0);
  }
  // By a kernel, not the copy engine: behind SLP's expert copies it would wait (upload.h).
  gpu::upload_mapped(d_plan.data(), ids, static_cast<size_t>(T * (4 + blocks)) * 4, stream);
  const int32_t* base = d_plan.as<int32_t>();
  p_ids = base;
  p_pos = base + T;
  p_slots = base + 2 * T;
  p_lens = base + 3 * T;
  p_tables = base + 4 * T;
}

void HybridExecutor::Impl::forward(std::span<const StepItem> items, std::span<float> logits) {
  const auto t_step = Clock::now();
  HYMOE_CUDA_CHECK(cudaSetDevice(device));
  const ModelConfig& c = config;
  plan.build(items, *kv, c.vocab_size);
  const int64_t T = plan.tokens();
  if (T == 0) return;
  HYMOE_CHECK(static_cast<int64_t>(logits.size()) == static_cast<int64_t>(plan.logit_rows.size()) * c.vocab_size,
              kInternal, "logits buffer holds {} values, {} rows of {} needed", logits.size(), plan.logit_rows.size(),
              c.vocab_size);
  // Two micro-batches where two or more tokens decode: the first half of the decode rows, then
  // the rest (the other decode rows and the prompt rows). Each row's arithmetic is the same in
  // either lane.
  const int64_t D = plan.decode_rows;
  const bool dual = dual_microbatch && D >= 2;
  Lane& a = *lanes[0];
  Lane& b = *lanes[1];
  a.row0 = 0;
  a.rows = dual ? D / 2 : T;
  a.decode_rows = dual ? D / 2 : D;
  b.row0 = a.rows;
  b.rows = T - a.rows;
  b.decode_rows = D - a.decode_rows;
  a.ensure_capacity(a.rows);
  if (dual) b.ensure_capacity(b.rows);
  upload_plan();
  gpu::embed_f32({.ids = p_ids, .table = model->embed().as<gpu::Bf16>(), .out = d_h.as<float>(),
                  .tokens = static_cast<int>(T), .dim = static_cast<int>(c.hidden_size)},
                 stream);
  embedded.record(stream);
  if (dual) {
    embedded.wait_on(a.stream);
    embedded.wait_on(b.stream);
    LayerOps* both[] = {&a, &b};
    run_layers_interleaved(weights, both);
    a.done.record(a.stream);
    b.done.record(b.stream);
    a.done.wait_on(stream);
    b.done.wait_on(stream);
  } else {
    embedded.wait_on(a.stream);
    run_layers(weights, a);
    a.done.record(a.stream);
    a.done.wait_on(stream);
  }
  head(logits);
  StepPlan::advance(items);
  ++profile.steps;
  profile.tokens += T;
  profile.step_s += seconds_since(t_step);
}

void HybridExecutor::Impl::Lane::attention(int64_t li) {
  const ModelConfig& c = x.config;
  const DevLayer& l = x.layer(li);
  const int64_t T = rows, hidden = c.hidden_size, heads = c.num_attention_heads, nope = c.qk_nope_head_dim,
                rope = c.qk_rope_head_dim, lora = c.kv_lora_rank, qk = nope + rope, width = lora + rope;
  if (T == 0) return;
  const float eps = static_cast<float>(c.rms_norm_eps);
  gpu::rmsnorm_f32({.x = h(), .weight = f32(l.input_norm), .out = bf(xb), .rows = Ti(), .cols = static_cast<int>(hidden),
                    .eps = eps},
                   stream);
  // q = q_b(rmsnorm(q_a(x))); [c_kv | k_pe] = kv_a_with_mqa(x); FP32 outputs, rounded to BF16
  // only where a linear layer or the cache reads them (the CPU engine's points).
  x.linear(l.q_a, bf(xb), hidden, T, f32(qa), c.q_lora_rank, stream);
  gpu::rmsnorm_f32({.x = f32(qa), .weight = f32(l.q_a_norm), .out = bf(qab), .rows = Ti(),
                    .cols = static_cast<int>(c.q_lora_rank), .eps = eps},
                   stream);
  x.linear(l.q_b, bf(qab), c.q_lora_rank, T, f32(q), heads * qk, stream);
  x.linear(l.kv_a, bf(xb), hidden, T, f32(kva), width, stream);
  // This step's latent rows to the cache: c_kv normalised, k_pe roped.
  gpu::mla_latent_rows({.kva = f32(kva), .norm_weight = f32(l.kv_a_norm), .positions = rows_of(x.p_pos),
                        .slots = rows_of(x.p_slots), .cache = x.cache_layer(li), .table = x.yarn, .tokens = Ti(),
                        .lora = static_cast<int>(lora), .rope = static_cast<int>(rope), .kva_stride = width, .eps = eps},
                       stream);
  // Absorbed attention: q_lat = W_UK^T q_nope (q_pe roped), attention over the latent cache, out
  // through W_UV. A lane's rows read only the cache rows of their own sequences, which no other
  // lane writes.
  const int64_t D = x.tuned_decode ? decode_rows : 0;  // rows through the tuned decode kernel
  gpu::mla_absorb_q({.q = f32(q), .w_uk = bf(l.w_uk), .positions = rows_of(x.p_pos), .out = f32(qabs),
                     .out_bf16 = D > 0 ? bf(qabs_bf) : nullptr, .table = x.yarn, .tokens = Ti(),
                     .heads = static_cast<int>(heads), .nope = static_cast<int>(nope), .rope = static_cast<int>(rope),
                     .lora = static_cast<int>(lora)},
                    stream);
  // Decode rows: one mla_decode launch each, split by the row's own length (batch-invariant).
  for (int64_t r = 0; r < D; ++r) {
    const int len = static_cast<int>(x.plan.token_pos[static_cast<size_t>(row0 + r)] + 1);
    gpu::MlaDecodeParams dp;
    dp.q = bf(qabs_bf) + r * heads * width;
    dp.kv_cache = x.cache_layer(li);
    dp.block_table = x.p_tables + (row0 + r) * x.step_blocks;
    dp.seq_lens = rows_of(x.p_lens) + r;
    dp.out = bf(olat_bf) + r * heads * lora;
    dp.workspace = f32(decode_ws);
    dp.batch = 1;
    dp.heads = static_cast<int>(heads);
    dp.block_size = static_cast<int>(x.kv->shape().block_tokens);
    dp.max_blocks = static_cast<int>(x.step_blocks);
    dp.max_seq_len = len;
    dp.cache_blocks = x.kv->total_blocks();
    dp.num_splits = std::min(x.max_decode_splits, gpu::mla_decode_splits_for(gpu::MlaDecodeImpl::kAuto, x.multiprocessors,
                                                                              1, static_cast<int>(heads), len));
    dp.softmax_scale = x.softmax_scale;
    gpu::mla_decode(dp, stream);
  }
  if (D > 0) {
    gpu::mla_unabsorb({.o_lat_bf16 = bf(olat_bf), .w_uv_t = bf(l.w_uv_t), .out = bf(attn), .tokens = static_cast<int>(D),
                       .heads = static_cast<int>(heads), .lora = static_cast<int>(lora), .v_dim = static_cast<int>(c.v_head_dim)},
                      stream);
  }
  // The other rows (prompt rows, or every row without the tuned kernel): the generic attention.
  if (T > D) {
    const int n = static_cast<int>(T - D);
    gpu::mla_attention_any({.q = f32(qabs) + D * heads * width, .cache = x.cache_layer(li),
                            .block_table = x.p_tables + (row0 + D) * x.step_blocks, .seq_lens = rows_of(x.p_lens) + D,
                            .out = f32(olat) + D * heads * lora, .tokens = n, .heads = static_cast<int>(heads),
                            .lora = static_cast<int>(lora), .rope = static_cast<int>(rope),
                            .block_tokens = static_cast<int>(x.kv->shape().block_tokens),
                            .max_blocks = static_cast<int>(x.step_blocks), .scale = x.softmax_scale},
                           stream);
    gpu::mla_unabsorb({.o_lat = f32(olat) + D * heads * lora, .w_uv_t = bf(l.w_uv_t),
                       .out = bf(attn) + D * heads * c.v_head_dim, .tokens = n, .heads = static_cast<int>(heads),
                       .lora = static_cast<int>(lora), .v_dim = static_cast<int>(c.v_head_dim)},
                      stream);
  }
  x.linear(l.o, bf(attn), heads * c.v_head_dim, T, f32(proj), hidden, stream);
  gpu::residual_add({.h = h(), .a = f32(proj), .n = T * hidden}, stream);
}

void HybridExecutor::Impl::Lane::ffn_input(int64_t li) {
  if (rows == 0) return;
  const ModelConfig& c = x.config;
  gpu::rmsnorm_f32({.x = h(), .weight = f32(x.layer(li).post_norm), .out = bf(xb), .out_f32 = f32(xf),
                    .rows = Ti(), .cols = static_cast<int>(c.hidden_size), .eps = static_cast<float>(c.rms_norm_eps)},
                   stream);
}

void HybridExecutor::Impl::Lane::router(int64_t li) {
  if (rows == 0) return;
  const ModelConfig& c = x.config;
  const DevLayer& l = x.layer(li);
  const int64_t T = rows, E = c.n_routed_experts, K = c.num_experts_per_tok, hidden = c.hidden_size;
  dense(l.router_w, static_cast<int>(E), static_cast<int>(hidden), f32(xf), T, f32(router_logits), E, stream);
  x.model->route(li, f32(router_logits), topk_ids.as<int32_t>(), f32(topk_w), Ti(), stream);
  if (l.experts) return;  // computed on the GPU: no hand-off
  // Hand-off to the CPU: the normed hidden state and the top-k, into pinned memory.
  const auto t0 = Clock::now();
  xb.copy_to_host(h_xb.data(), static_cast<size_t>(T * hidden) * 2, stream);
  auto* topk = h_topk.as<int32_t>().data();
  topk_ids.copy_to_host(topk, static_cast<size_t>(T * K) * 4, stream);
  topk_w.copy_to_host(topk + T * K, static_cast<size_t>(T * K) * 4, stream);
  moe_input_ready.record(stream);
  x.profile.handoff_s += seconds_since(t0);
}

void HybridExecutor::Impl::Lane::shared_expert(int64_t li) {
  if (rows == 0) return;
  const DevLayer& l = x.layer(li);
  if (l.shared) {
    mlp(*l.shared, bf(xb), f32(proj));
  } else {
    HYMOE_CUDA_CHECK(cudaMemsetAsync(proj.data(), 0, static_cast<size_t>(rows * x.config.hidden_size) * 4, stream));
  }
}

void HybridExecutor::Impl::Lane::routed_experts(int64_t li) {
  if (rows == 0) return;
  const ModelConfig& c = x.config;
  const int64_t T = rows, hidden = c.hidden_size, K = c.num_experts_per_tok;
  if (const auto& ex = x.layer(li).experts) {
    // This layer's experts are on the device: the same sum, on the lane's stream.
    const int64_t E = c.n_routed_experts;
    const auto* views = ex->views.as<gpu::ExpertWeight>();
    for (int64_t t0 = 0; t0 < T; t0 += kMoeGemvRows) {
      const int64_t n = std::min<int64_t>(kMoeGemvRows, T - t0);
      gpu::moe_gemv({.gate = views, .up = views + E, .down = views + 2 * E, .topk_ids = topk_ids.as<int32_t>() + t0 * K,
                     .topk_weights = f32(topk_w) + t0 * K, .x = bf(xb) + t0 * hidden, .act = bf(moe_act),
                     .out = f32(routed) + t0 * hidden, .tokens = static_cast<int>(n), .top_k = static_cast<int>(K),
                     .experts = static_cast<int>(E), .hidden = static_cast<int>(hidden),
                     .inter = static_cast<int>(c.moe_intermediate_size),
                     .gate_scale_ld = gpu::block_scale_ld(static_cast<int>(hidden)),
                     .down_scale_ld = gpu::block_scale_ld(static_cast<int>(c.moe_intermediate_size))},
                    stream);
    }
    return;
  }
  auto t0 = Clock::now();
  moe_input_ready.synchronize();  // the GPU's part of the layer up to the router is done
  x.profile.gpu_wait_s += seconds_since(t0);
  t0 = Clock::now();
  float* out = h_routed.as<float>().data();
  std::fill(out, out + T * hidden, 0.0f);
  const int32_t* ids = h_topk.as<int32_t>().data();
  const float* wts = reinterpret_cast<const float*>(ids + T * K);
  x.routed->run(x.weights.layers[static_cast<size_t>(li)].moe->experts, h_xb.as<uint16_t>().data(), T, decode_rows, ids,
                wts, static_cast<int>(K), out);
  x.profile.cpu_moe_s += seconds_since(t0);
  ++x.profile.moe_layer_runs;
  t0 = Clock::now();
  gpu::upload_mapped(routed.data(), out, static_cast<size_t>(T * hidden) * 4, stream);
  x.profile.handoff_s += seconds_since(t0);
}

void HybridExecutor::Impl::Lane::ffn_residual(int64_t li) {
  if (rows == 0) return;
  const bool moe = x.weights.layers[static_cast<size_t>(li)].moe.has_value();
  gpu::residual_add({.h = h(), .a = f32(proj), .b = moe ? f32(routed) : nullptr, .n = rows * x.config.hidden_size}, stream);
}

void HybridExecutor::Impl::head(std::span<float> logits) {
  const auto t0 = Clock::now();
  // Also the point where the step's KV writes are done, before its tables advance.
  gpu_head->run(d_h.as<float>(), plan.logit_rows, logits, stream);
  profile.head_s += seconds_since(t0);
}

namespace {
GpuModelOptions model_options(const HybridExecutorOptions& o) {
  return {.device = o.device, .gpu_memory_limit = o.gpu_memory_limit, .kv_cache_bytes = o.kv_cache_bytes,
          .kv_block_tokens = o.kv_block_tokens};
}
}  // namespace

HybridExecutor::HybridExecutor(const WeightStore& store, cpu::ThreadPool& pool, const HybridExecutorOptions& options)
    : HybridExecutor(std::make_shared<GpuModel>(store, model_options(options)), pool, options) {}

HybridExecutor::HybridExecutor(std::shared_ptr<GpuModel> model, cpu::ThreadPool& pool,
                               const HybridExecutorOptions& options)
    : impl_(std::make_unique<Impl>(std::move(model), pool, options)) {}

HybridExecutor::~HybridExecutor() = default;

const ModelConfig& HybridExecutor::config() const { return impl_->config; }
KvCache& HybridExecutor::kv_cache() { return *impl_->kv; }
void HybridExecutor::forward(std::span<const StepItem> items, std::span<float> logits) { impl_->forward(items, logits); }
const GpuPlacement& HybridExecutor::placement() const { return impl_->placement; }
const std::shared_ptr<GpuModel>& HybridExecutor::model() const { return impl_->model; }
std::string HybridExecutor::placement_summary() const { return impl_->placement.describe(); }
HybridExecutor::Profile HybridExecutor::profile() const { return impl_->profile; }
void HybridExecutor::reset_profile() { impl_->profile = {}; }

}  // namespace hymoe
