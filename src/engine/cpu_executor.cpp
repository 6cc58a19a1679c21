#include "hymoe/engine/cpu_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "cpu_ops.h"
#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/common/numeric.h"
#include "hymoe/kernels/fp8_gemv.h"
#include "hymoe/kernels/isa.h"
#include "hymoe/kernels/mla_attention.h"
#include "hymoe/kernels/moe_router.h"
#include "hymoe/kernels/rmsnorm.h"
#include "hymoe/kernels/silu_mul.h"
#include "hymoe/engine/layer_prep.h"
#include "hymoe/model/weight_store.h"

namespace hymoe {

using engine::room;

struct CpuExecutor::Buffers {
  std::vector<float> h, xf, qa, q, kva, attn, proj, gate, up, router, rweights, tmp, ckv;
  std::vector<uint16_t> xb, qab, attnb, act;
  std::vector<int32_t> rids;
  // The step's sequences for the attention (runs of tokens, their page lists of the current
  // layer, flat) and each worker's attention scratch.
  std::vector<kernels::MlaSequence> sequences;
  std::vector<const uint16_t*> pages;
  std::vector<kernels::MlaHeadsScratch> attn_scratch;
};

CpuExecutor::CpuExecutor(const WeightStore& store, cpu::ThreadPool& pool, const CpuExecutorOptions& options)
    : config_(store.config()),
      weights_(ModelWeights::bind(store)),
      pool_(pool),
      kv_(KvCacheShape{.layers = config_.num_hidden_layers,
                       .kv_lora_rank = config_.kv_lora_rank,
                       .rope_dim = config_.qk_rope_head_dim,
                       .block_tokens = options.kv_block_tokens},
          options.kv_cache_bytes),
      rope_(kernels::RopeTable::make(static_cast<int>(config_.qk_rope_head_dim), config_.rope_theta,
                                     config_.rope_scaling)),
      softmax_scale_(static_cast<float>(config_.softmax_scale())),
      buf_(std::make_unique<Buffers>()) {
  weights_.config = &config_;
  if (options.amx_decode_gemv) {
    amx_gemv_ = kernels::fp8_gemv_amx_supported();
    if (amx_gemv_)
      log::get("engine")->info("decode GEMVs of the dense weights on AMX (amx_decode_gemv)");
    else
      log::get("engine")->warn(
          "amx_decode_gemv: this CPU has no usable AMX-BF16 (or the kernel is not built): the dense "
          "weights' decode GEMVs stay on {}", kernels::isa_name(kernels::best_isa()));
  }
  if (options.shift_decode && kernels::best_isa() == kernels::Isa::kAvx512Bf16) {
    const auto t0 = std::chrono::steady_clock::now();
    specials_ = Fp8SpecialIndex::attach(weights_, pool_);
    log::get("engine")->info(
        "FP8 special codes: {} of {} matrices decode by shifts, {} codes ({:.2e} of {:.2f} GB scanned), "
        "{:.1f} MB, {:.2f} s", specials_.attached(), specials_.matrices(), specials_.codes(),
        static_cast<double>(specials_.codes()) / static_cast<double>(std::max<size_t>(specials_.scanned_codes(), 1)),
        static_cast<double>(specials_.scanned_codes()) / 1e9, static_cast<double>(specials_.bytes()) / 1e6,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const int64_t heads = config_.num_attention_heads, nope = config_.qk_nope_head_dim, vd = config_.v_head_dim;
  const int64_t lora = config_.kv_lora_rank;
  HYMOE_CHECK(lora % 64 == 0 && config_.qk_rope_head_dim % 32 == 0, kUnsupported,
              "cpu executor: MLA attention needs kv_lora_rank % 64 == 0 and qk_rope_head_dim % 32 == 0 (got {}, {})",
              lora, config_.qk_rope_head_dim);
  layers_.reserve(static_cast<size_t>(config_.num_hidden_layers));
  for (const LayerWeights& w : weights_.layers) layers_.push_back(prepare_layer(w, config_));
  final_norm_ = dense_to_float(weights_.final_norm);
  if (config_.n_routed_experts > 0 && config_.num_hidden_layers > config_.first_k_dense_replace)
    routed_ = std::make_unique<CpuRoutedExperts>(pool_, config_);
  {
    // Sized for a chunk of its heads up front (steps allocate nothing).
    const size_t rows = static_cast<size_t>((heads + pool_.size() - 1) / pool_.size() * kernels::kMlaTokenChunk);
    buf_->attn_scratch.resize(static_cast<size_t>(pool_.size()));
    for (kernels::MlaHeadsScratch& sc : buf_->attn_scratch) {
      sc.qlat.resize(rows * static_cast<size_t>(lora));
      sc.olat.resize(rows * static_cast<size_t>(lora));
    }
    buf_->pages.resize(static_cast<size_t>(kv_.total_blocks()));
  }
  // Size the step buffers up front so that steps up to max_step_tokens allocate nothing.
  {
    const size_t T = static_cast<size_t>(std::max<int64_t>(options.max_step_tokens, 1));
    const size_t hidden = static_cast<size_t>(config_.hidden_size);
    const size_t inter = static_cast<size_t>(std::max(config_.intermediate_size,
                                                      config_.moe_intermediate_size * std::max<int64_t>(config_.n_shared_experts, 1)));
    Buffers& b = *buf_;
    for (auto* v : {&b.h, &b.xf, &b.proj, &b.tmp}) v->resize(T * hidden);
    b.qa.resize(T * static_cast<size_t>(config_.q_lora_rank));
    b.q.resize(T * static_cast<size_t>(heads * (nope + config_.qk_rope_head_dim)));
    b.kva.resize(T * static_cast<size_t>(lora + config_.qk_rope_head_dim));
    b.attn.resize(T * static_cast<size_t>(heads * vd));
    for (auto* v : {&b.gate, &b.up}) v->resize(T * inter);
    b.router.resize(T * static_cast<size_t>(std::max<int64_t>(config_.n_routed_experts, 1)));
    b.rweights.resize(T * static_cast<size_t>(config_.num_experts_per_tok));
    b.rids.resize(T * static_cast<size_t>(config_.num_experts_per_tok));
    b.xb.resize(T * hidden);
    b.qab.resize(T * static_cast<size_t>(config_.q_lora_rank));
    b.attnb.resize(T * static_cast<size_t>(heads * vd));
    b.act.resize(T * inter);
    b.sequences.reserve(T);
    plan_.token_item.reserve(T);
    plan_.token_pos.reserve(T);
    plan_.token_id.reserve(T);
    plan_.logit_rows.reserve(T);
  }
  log::get("engine")->info("cpu executor: {} layers, {} threads, KV cache {} tokens in {} blocks",
                           config_.num_hidden_layers, pool_.size(), kv_.capacity_tokens(), kv_.total_blocks());
}

CpuExecutor::~CpuExecutor() = default;

void CpuExecutor::forward(std::span<const StepItem> items, std::span<float> logits) {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size;
  StepPlan& plan = plan_;
  plan.build(items, kv_, c.vocab_size);
  decode_rows_ = plan.decode_rows;
  const int64_t T = plan.tokens();
  if (T == 0) return;
  Buffers& b = *buf_;
  float* h = room(b.h, static_cast<size_t>(T * hidden));
  for (int64_t t = 0; t < T; ++t) dense_row_to_float(weights_.embed, plan.token_id[static_cast<size_t>(t)], h + t * hidden);

  using Clock = std::chrono::steady_clock;
  LayerTimes times;
  run_layers(weights_, *this, &times);
  profile_.attention_s += times.attention_s;
  profile_.dense_s += times.dense_s;
  profile_.moe_s += times.moe_s;
  const auto t_head = Clock::now();
  ++profile_.steps;
  profile_.tokens += T;
  StepPlan::advance(items);

  // Logits of the last token of each item that wants them, in item order.
  const std::vector<int64_t>& rows = plan.logit_rows;
  const int64_t R = static_cast<int64_t>(rows.size());
  HYMOE_CHECK(static_cast<int64_t>(logits.size()) == R * c.vocab_size, kInternal,
              "logits buffer holds {} values, {} rows of {} needed", logits.size(), R, c.vocab_size);
  float* xf = room(b.xf, static_cast<size_t>(R * hidden));
  for (int64_t r = 0; r < R; ++r) {
    kernels::rmsnorm(h + rows[static_cast<size_t>(r)] * hidden, final_norm_.data(), hidden,
                     static_cast<float>(c.rms_norm_eps), xf + r * hidden);
  }
  engine::dense_linear(pool_, weights_.lm_head, xf, R, logits.data());
  profile_.lm_head_s += std::chrono::duration<double>(Clock::now() - t_head).count();
}

void CpuExecutor::attention(int64_t li) {
  const PreparedLayer& layer = layers_[static_cast<size_t>(li)];
  const std::vector<const StepItem*>& token_item = plan_.token_item;
  const std::vector<int64_t>& token_pos = plan_.token_pos;
  const int64_t T = plan_.tokens();
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(li)];
  const int64_t hidden = c.hidden_size, heads = c.num_attention_heads, nope = c.qk_nope_head_dim,
                rope = c.qk_rope_head_dim, vd = c.v_head_dim, lora = c.kv_lora_rank, qlora = c.q_lora_rank;
  const int64_t qk = nope + rope;
  const float eps = static_cast<float>(c.rms_norm_eps);
  Buffers& b = *buf_;
  float* h = b.h.data();
  uint16_t* xb = room(b.xb, static_cast<size_t>(T * hidden));
  for (int64_t t = 0; t < T; ++t) {
    kernels::rmsnorm_bf16(h + t * hidden, layer.input_norm.data(), hidden, eps, xb + t * hidden);
  }
  // q = q_b(rmsnorm(q_a(x))); [c_kv | k_pe] = kv_a_with_mqa(x).
  float* qa = room(b.qa, static_cast<size_t>(T * qlora));
  engine::fp8_linear(pool_, w.attn.q_a, xb, hidden, T, decode_rows_, qa, amx_gemv_);
  uint16_t* qab = room(b.qab, static_cast<size_t>(T * qlora));
  for (int64_t t = 0; t < T; ++t) kernels::rmsnorm_bf16(qa + t * qlora, layer.q_a_norm.data(), qlora, eps, qab + t * qlora);
  float* q = room(b.q, static_cast<size_t>(T * heads * qk));
  engine::fp8_linear(pool_, w.attn.q_b, qab, qlora, T, decode_rows_, q, amx_gemv_);
  float* kva = room(b.kva, static_cast<size_t>(T * (lora + rope)));
  engine::fp8_linear(pool_, w.attn.kv_a_with_mqa, xb, hidden, T, decode_rows_, kva, amx_gemv_);

  // Rope q_pe and k_pe; write this step's latent rows into the cache.
  float* ckv = room(b.ckv, static_cast<size_t>(lora));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = token_pos[static_cast<size_t>(t)];
    kernels::rope_apply(rope_, pos, q + t * heads * qk + nope, heads, qk);
    float* kv = kva + t * (lora + rope);
    kernels::rope_apply(rope_, pos, kv + lora, 1, rope);
    kernels::rmsnorm(kv, layer.kv_a_norm.data(), lora, eps, ckv);
    uint16_t* row = kv_.row(*token_item[static_cast<size_t>(t)]->table, li, pos);
    kernels::to_bf16(ckv, lora, row);
    kernels::to_bf16(kv + lora, rope, row + lora);
  }

  // Absorbed attention: the step's sequences (runs of tokens of one item) with their page lists of
  // this layer; each worker takes a contiguous block of heads of all of them (W_UK absorption,
  // attention, W_UV stay within its heads: no synchronisation between).
  std::vector<kernels::MlaSequence>& seqs = b.sequences;
  seqs.clear();
  size_t n_pages = 0;
  for (int64_t ta = 0; ta < T;) {
    const StepItem& item = *token_item[static_cast<size_t>(ta)];
    int64_t tb = ta + 1;
    while (tb < T && token_item[static_cast<size_t>(tb)] == &item) ++tb;
    kernels::MlaSequence sq;
    sq.first_position = token_pos[static_cast<size_t>(ta)];
    sq.tokens = tb - ta;
    sq.pages = b.pages.data() + n_pages;
    for (int32_t block : item.table->blocks) b.pages[n_pages++] = kv_.block_rows(block, li);
    seqs.push_back(sq);
    ta = tb;
  }
  float* attn = room(b.attn, static_cast<size_t>(T * heads * vd));
  const int64_t workers = pool_.size();
  pool_.run([&](const cpu::WorkerInfo& wi) {
    kernels::MlaHeadsParams ap;
    ap.heads = heads;
    ap.nope = nope;
    ap.rope = rope;
    ap.v_dim = vd;
    ap.lora = lora;
    ap.head_begin = heads * wi.index / workers;
    ap.head_end = heads * (wi.index + 1) / workers;
    ap.sequences = seqs.data();
    ap.n_sequences = static_cast<int64_t>(seqs.size());
    ap.q = q;
    ap.w_uk = layer.kv_b.w_uk.data();
    ap.w_uv_t = layer.kv_b.w_uv_t.data();
    ap.page_tokens = kv_.shape().block_tokens;
    ap.scale = softmax_scale_;
    ap.out = attn;
    kernels::mla_attention_heads(ap, b.attn_scratch[static_cast<size_t>(wi.index)]);
  });
  uint16_t* attnb = room(b.attnb, static_cast<size_t>(T * heads * vd));
  kernels::to_bf16(attn, T * heads * vd, attnb);
  float* proj = room(b.proj, static_cast<size_t>(T * hidden));
  engine::fp8_linear(pool_, w.attn.o, attnb, heads * vd, T, decode_rows_, proj, amx_gemv_);
  for (int64_t i = 0; i < T * hidden; ++i) h[i] += proj[i];
}

void CpuExecutor::mlp(const MlpWeights& w, const uint16_t* x, int64_t T, int64_t D, float* out,
                      bool accumulate) {
  const int64_t inter = w.gate.rows, hidden = w.down.rows;
  Buffers& b = *buf_;
  float* gate = room(b.gate, static_cast<size_t>(T * inter));
  float* up = room(b.up, static_cast<size_t>(T * inter));
  engine::fp8_linear(pool_, w.gate, x, w.gate.cols, T, D, gate, amx_gemv_);
  engine::fp8_linear(pool_, w.up, x, w.up.cols, T, D, up, amx_gemv_);
  uint16_t* act = room(b.act, static_cast<size_t>(T * inter));
  for (int64_t t = 0; t < T; ++t) kernels::silu_mul_bf16(gate + t * inter, up + t * inter, inter, act + t * inter);
  if (!accumulate) {
    engine::fp8_linear(pool_, w.down, act, inter, T, D, out, amx_gemv_);
    return;
  }
  float* tmp = room(b.tmp, static_cast<size_t>(T * hidden));
  engine::fp8_linear(pool_, w.down, act, inter, T, D, tmp, amx_gemv_);
  for (int64_t i = 0; i < T * hidden; ++i) out[i] += tmp[i];
}

void CpuExecutor::ffn_input(int64_t li) {
  const ModelConfig& c = config_;
  const PreparedLayer& layer = layers_[static_cast<size_t>(li)];
  const int64_t hidden = c.hidden_size, T = plan_.tokens();
  Buffers& b = *buf_;
  float* h = b.h.data();
  uint16_t* xb = room(b.xb, static_cast<size_t>(T * hidden));
  float* xf = room(b.xf, static_cast<size_t>(T * hidden));
  for (int64_t t = 0; t < T; ++t) {
    kernels::rmsnorm(h + t * hidden, layer.post_attn_norm.data(), hidden, static_cast<float>(c.rms_norm_eps),
                     xf + t * hidden);
  }
  kernels::to_bf16(xf, T * hidden, xb);
  room(b.proj, static_cast<size_t>(T * hidden));
}

void CpuExecutor::dense_mlp(int64_t li) {
  mlp(*weights_.layers[static_cast<size_t>(li)].dense, buf_->xb.data(), plan_.tokens(), decode_rows_,
      buf_->proj.data(), false);
}

void CpuExecutor::ffn_residual(int64_t /*li*/) {
  const int64_t n = plan_.tokens() * config_.hidden_size;
  float* h = buf_->h.data();
  const float* proj = buf_->proj.data();
  for (int64_t i = 0; i < n; ++i) h[i] += proj[i];
}

void CpuExecutor::router(int64_t li) {
  const ModelConfig& c = config_;
  const PreparedLayer& layer = layers_[static_cast<size_t>(li)];
  const MoeWeights& w = *weights_.layers[static_cast<size_t>(li)].moe;
  const int64_t E = c.n_routed_experts, K = c.num_experts_per_tok, T = plan_.tokens();
  Buffers& b = *buf_;
  // Router: sigmoid scores + bias choice, group-limited top-k.
  float* router = room(b.router, static_cast<size_t>(T * E));
  engine::dense_linear(pool_, w.router, b.xf.data(), T, router);
  int32_t* ids = room(b.rids, static_cast<size_t>(T * K));
  float* weights = room(b.rweights, static_cast<size_t>(T * K));
  kernels::RouterParams rp;
  rp.n_experts = static_cast<int>(E);
  rp.n_group = static_cast<int>(c.n_group);
  rp.topk_group = static_cast<int>(c.topk_group);
  rp.top_k = static_cast<int>(K);
  rp.norm_topk_prob = c.norm_topk_prob;
  rp.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  rp.bias = layer.router_bias.data();
  for (int64_t t = 0; t < T; ++t) kernels::route_noaux_tc(rp, router + t * E, ids + t * K, weights + t * K);
}

void CpuExecutor::shared_expert(int64_t li) {
  const MoeWeights& w = *weights_.layers[static_cast<size_t>(li)].moe;
  const int64_t T = plan_.tokens();
  float* proj = buf_->proj.data();
  // Shared expert writes proj; routed experts add onto it.
  if (w.shared) {
    mlp(*w.shared, buf_->xb.data(), T, decode_rows_, proj, false);
  } else {
    std::fill(proj, proj + T * config_.hidden_size, 0.0f);
  }
}

void CpuExecutor::routed_experts(int64_t li) {
  const MoeWeights& w = *weights_.layers[static_cast<size_t>(li)].moe;
  Buffers& b = *buf_;
  routed_->run(w.experts, b.xb.data(), plan_.tokens(), decode_rows_, b.rids.data(), b.rweights.data(),
               static_cast<int>(config_.num_experts_per_tok), b.proj.data());
}

}  // namespace hymoe
