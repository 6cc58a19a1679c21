#include "hymoe/engine/cpu_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>

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
#include "hymoe/model/weight_store.h"

namespace hymoe {
namespace {

void dense_row(const DenseMatrix& m, int64_t row, float* out) {
  switch (m.dtype) {
    case DType::kBF16: {
      const auto* p = static_cast<const uint16_t*>(m.data) + row * m.cols;
      for (int64_t j = 0; j < m.cols; ++j) out[j] = bf16_to_float(p[j]);
      return;
    }
    case DType::kF16: {
      const auto* p = static_cast<const uint16_t*>(m.data) + row * m.cols;
      for (int64_t j = 0; j < m.cols; ++j) out[j] = f16_to_float(p[j]);
      return;
    }
    case DType::kF32: {
      const auto* p = static_cast<const float*>(m.data) + row * m.cols;
      std::copy(p, p + m.cols, out);
      return;
    }
    default:
      HYMOE_THROW(kUnsupported, "dtype {} is not supported for a dense tensor", dtype_name(m.dtype));
  }
}

std::vector<float> dense_vector(const DenseMatrix& m) {
  std::vector<float> v(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) dense_row(m, r, v.data() + r * m.cols);
  return v;
}

// Grows a buffer to at least n elements (a no-op once sized: steps do not allocate).
template <typename T>
T* room(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

struct CpuExecutor::Layer {
  std::vector<float> input_norm, post_attn_norm, q_a_norm, kv_a_norm;
  std::vector<uint16_t> w_uk;    // [heads][qk_nope][kv_lora] BF16
  std::vector<uint16_t> w_uv_t;  // [heads][kv_lora][v_head] BF16 (W_UV transposed)
  std::vector<float> router_bias;
};

struct CpuExecutor::Buffers {
  std::vector<float> h, xf, qa, q, kva, attn, proj, gate, up, router, rweights, tmp, ckv, expert_out;
  // Prefill MoE: the prompt tokens' (token, weight) slots sorted by expert, with offsets.
  std::vector<int64_t> expert_off, expert_cur;
  std::vector<std::pair<int64_t, float>> expert_slots;
  std::vector<uint16_t> xb, qab, attnb, act, gather;
  std::vector<int32_t> rids;
  // The step's tokens: their item, position and id; the rows that produce logits.
  std::vector<const StepItem*> token_item;
  std::vector<int64_t> token_pos, logit_rows, item_last_row;
  std::vector<size_t> item_order;  // decode items first, then prompt chunks
  std::vector<int32_t> token_id;
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
  layers_.resize(static_cast<size_t>(config_.num_hidden_layers));
  for (size_t li = 0; li < layers_.size(); ++li) {
    const LayerWeights& w = weights_.layers[li];
    Layer& l = layers_[li];
    l.input_norm = dense_vector(w.input_norm);
    l.post_attn_norm = dense_vector(w.post_attn_norm);
    l.q_a_norm = dense_vector(w.attn.q_a_norm);
    l.kv_a_norm = dense_vector(w.attn.kv_a_norm);
    // kv_b rows per head: qk_nope rows of W_UK, then v_head rows of W_UV, each kv_lora wide.
    const Fp8Matrix& kvb = w.attn.kv_b;
    l.w_uk.resize(static_cast<size_t>(heads * nope * lora));
    l.w_uv_t.resize(static_cast<size_t>(heads * vd * lora));
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t r = 0; r < nope + vd; ++r) {
        const int64_t row = h * (nope + vd) + r;
        for (int64_t c = 0; c < lora; ++c) {
          const uint16_t v = float_to_bf16(fp8_e4m3_to_float(kvb.data[row * kvb.cols + c]) * kvb.scale(row, c));
          if (r < nope) {
            l.w_uk[static_cast<size_t>((h * nope + r) * lora + c)] = v;
          } else {
            l.w_uv_t[static_cast<size_t>((h * lora + c) * vd + r - nope)] = v;
          }
        }
      }
    }
    if (w.moe) l.router_bias = dense_vector(w.moe->router_bias);
  }
  final_norm_ = dense_vector(weights_.final_norm);
  if (config_.n_routed_experts > 0 && config_.num_hidden_layers > config_.first_k_dense_replace) {
    cpu::MoeShape shape;
    shape.num_experts = config_.n_routed_experts;
    shape.hidden = config_.hidden_size;
    shape.intermediate = config_.moe_intermediate_size;
    shape.max_top_k = static_cast<int>(config_.num_experts_per_tok);
    moe_ = std::make_unique<cpu::MoeExecutor>(pool_, shape);
  }
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
    b.token_item.reserve(T);
    b.sequences.reserve(T);
    b.token_pos.reserve(T);
    b.token_id.reserve(T);
    b.logit_rows.reserve(T);
  }
  log::get("engine")->info("cpu executor: {} layers, {} threads, KV cache {} tokens in {} blocks",
                           config_.num_hidden_layers, pool_.size(), kv_.capacity_tokens(), kv_.total_blocks());
}

CpuExecutor::~CpuExecutor() = default;

void CpuExecutor::forward(std::span<const StepItem> items, std::span<float> logits) {
  const ModelConfig& c = config_;
  const int64_t hidden = c.hidden_size;
  // Flatten the step into tokens, each with its item and position.
  // Flat per-token views of the step, in buffers reused across steps (no allocation per token).
  std::vector<const StepItem*>& token_item = buf_->token_item;
  std::vector<int64_t>& token_pos = buf_->token_pos;
  std::vector<int32_t>& token_id = buf_->token_id;
  token_item.clear();
  token_pos.clear();
  token_id.clear();
  // Decode items first, then prompt chunks (each in step order): rows [0, decode_rows_) of every
  // buffer are decode tokens, which take their own kernel path (see fp8_linear).
  std::vector<size_t>& order = buf_->item_order;
  order.clear();
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].decode) order.push_back(i);
  decode_rows_ = static_cast<int64_t>(order.size());
  for (size_t i = 0; i < items.size(); ++i)
    if (!items[i].decode) order.push_back(i);
  for (const size_t i : order) {
    const StepItem& it = items[i];
    HYMOE_CHECK(!it.decode || it.tokens.size() == 1, kInternal, "decode item with {} tokens", it.tokens.size());
    HYMOE_CHECK(it.table && it.start == it.table->tokens, kInternal, "step item out of sync with its KV table");
    HYMOE_CHECK(kv_.blocks_for(it.start + static_cast<int64_t>(it.tokens.size())) <=
                    static_cast<int64_t>(it.table->blocks.size()),
                kInternal, "step item without reserved KV blocks");
    for (size_t k = 0; k < it.tokens.size(); ++k) {
      HYMOE_CHECK(it.tokens[k] >= 0 && it.tokens[k] < c.vocab_size, kInvalidArgument, "token id {} out of range",
                  it.tokens[k]);
      token_item.push_back(&it);
      token_pos.push_back(it.start + static_cast<int64_t>(k));
      token_id.push_back(it.tokens[k]);
    }
  }
  const int64_t T = static_cast<int64_t>(token_id.size());
  if (T == 0) return;
  Buffers& b = *buf_;
  float* h = room(b.h, static_cast<size_t>(T * hidden));
  for (int64_t t = 0; t < T; ++t) dense_row(weights_.embed, token_id[static_cast<size_t>(t)], h + t * hidden);

  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double>(to - from).count(); };
  for (size_t li = 0; li < layers_.size(); ++li) {
    const auto t0 = Clock::now();
    attention(layers_[li], static_cast<int64_t>(li), token_item, token_pos, T);
    const auto t1 = Clock::now();
    ffn(layers_[li], static_cast<int64_t>(li), T);
    const auto t2 = Clock::now();
    profile_.attention_s += seconds(t0, t1);
    (weights_.layers[li].dense ? profile_.dense_s : profile_.moe_s) += seconds(t1, t2);
  }
  const auto t_head = Clock::now();
  ++profile_.steps;
  profile_.tokens += T;
  for (const StepItem& it : items) it.table->tokens = it.start + static_cast<int64_t>(it.tokens.size());

  // Logits of the last token of each item that wants them, in item order.
  std::vector<int64_t>& last_row = buf_->item_last_row;
  last_row.assign(items.size(), 0);
  int64_t t = 0;
  for (const size_t i : order) {
    t += static_cast<int64_t>(items[i].tokens.size());
    last_row[i] = t - 1;
  }
  std::vector<int64_t>& rows = buf_->logit_rows;
  rows.clear();
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].want_logits) rows.push_back(last_row[i]);
  const int64_t R = static_cast<int64_t>(rows.size());
  HYMOE_CHECK(static_cast<int64_t>(logits.size()) == R * c.vocab_size, kInternal,
              "logits buffer holds {} values, {} rows of {} needed", logits.size(), R, c.vocab_size);
  float* xf = room(b.xf, static_cast<size_t>(R * hidden));
  for (int64_t r = 0; r < R; ++r) {
    kernels::rmsnorm(h + rows[static_cast<size_t>(r)] * hidden, final_norm_.data(), hidden,
                     static_cast<float>(c.rms_norm_eps), xf + r * hidden);
  }
  engine::dense_linear(pool_, weights_.lm_head, xf, R, logits.data());
  profile_.lm_head_s += seconds(t_head, Clock::now());
}

void CpuExecutor::attention(const Layer& layer, int64_t li, const std::vector<const StepItem*>& token_item,
                            const std::vector<int64_t>& token_pos, int64_t T) {
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
    ap.w_uk = layer.w_uk.data();
    ap.w_uv_t = layer.w_uv_t.data();
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

void CpuExecutor::ffn(const Layer& layer, int64_t li, int64_t T) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(li)];
  const int64_t hidden = c.hidden_size;
  Buffers& b = *buf_;
  float* h = b.h.data();
  uint16_t* xb = room(b.xb, static_cast<size_t>(T * hidden));
  float* xf = room(b.xf, static_cast<size_t>(T * hidden));
  for (int64_t t = 0; t < T; ++t) {
    kernels::rmsnorm(h + t * hidden, layer.post_attn_norm.data(), hidden, static_cast<float>(c.rms_norm_eps),
                     xf + t * hidden);
  }
  kernels::to_bf16(xf, T * hidden, xb);
  float* proj = room(b.proj, static_cast<size_t>(T * hidden));
  if (w.dense) {
    mlp(*w.dense, xb, T, decode_rows_, proj, false);
  } else {
    moe(layer, T);
  }
  for (int64_t i = 0; i < T * hidden; ++i) h[i] += proj[i];
}

void CpuExecutor::moe(const Layer& layer, int64_t T) {
  const ModelConfig& c = config_;
  const int64_t li = &layer - layers_.data();
  const MoeWeights& w = *weights_.layers[static_cast<size_t>(li)].moe;
  const int64_t hidden = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
  Buffers& b = *buf_;
  const uint16_t* xb = b.xb.data();
  float* proj = b.proj.data();

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

  // Shared expert writes proj; routed experts add onto it.
  if (w.shared) {
    mlp(*w.shared, xb, T, decode_rows_, proj, false);
  } else {
    std::fill(proj, proj + T * hidden, 0.0f);
  }
  // Decode tokens through the NUMA MoE executor, up to kMaxMoeTokens at a time; prompt tokens
  // (rows D..T) through per-expert GEMMs below. Each kind always takes its own path (batch
  // invariance: see fp8_linear).
  const int64_t D = decode_rows_;
  for (int64_t t0 = 0; t0 < D; t0 += cpu::kMaxMoeTokens) {
    cpu::MoeBatch mb;
    mb.tokens = static_cast<int>(std::min<int64_t>(cpu::kMaxMoeTokens, D - t0));
    mb.hidden = xb + t0 * hidden;
    mb.top_k = static_cast<int>(K);
    mb.ids = ids + t0 * K;
    mb.weights = weights + t0 * K;
    mb.out = proj + t0 * hidden;
    mb.accumulate = true;
    moe_->run(w.experts, mb);
  }
  if (D == T) return;
  // Prefill: per expert, its tokens gathered into one GEMM batch (a counting sort by expert into
  // the step buffers: tokens ascending within an expert, experts ascending for a token).
  std::vector<int64_t>& off = b.expert_off;
  off.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t i = D * K; i < T * K; ++i) ++off[static_cast<size_t>(ids[i]) + 1];
  for (int64_t e = 0; e < E; ++e) off[static_cast<size_t>(e + 1)] += off[static_cast<size_t>(e)];
  std::vector<int64_t>& cur = b.expert_cur;
  cur.assign(off.begin(), off.end() - 1);
  std::vector<std::pair<int64_t, float>>& slots = b.expert_slots;
  slots.resize(static_cast<size_t>((T - D) * K));
  for (int64_t t = D; t < T; ++t) {
    for (int64_t k = 0; k < K; ++k)
      slots[static_cast<size_t>(cur[static_cast<size_t>(ids[t * K + k])]++)] = {t, weights[t * K + k]};
  }
  for (int64_t e = 0; e < E; ++e) {
    const std::span<const std::pair<int64_t, float>> toks(slots.data() + off[static_cast<size_t>(e)],
                                                          static_cast<size_t>(off[static_cast<size_t>(e + 1)] - off[static_cast<size_t>(e)]));
    if (toks.empty()) continue;
    const int64_t n = static_cast<int64_t>(toks.size());
    uint16_t* g = room(b.gather, static_cast<size_t>(n * hidden));
    for (int64_t i = 0; i < n; ++i) {
      std::copy(xb + toks[static_cast<size_t>(i)].first * hidden, xb + (toks[static_cast<size_t>(i)].first + 1) * hidden,
                g + i * hidden);
    }
    float* expert_out = room(b.expert_out, static_cast<size_t>(n * hidden));
    mlp(w.experts[static_cast<size_t>(e)], g, n, 0, expert_out, false);
    for (int64_t i = 0; i < n; ++i) {
      const auto [t, wt] = toks[static_cast<size_t>(i)];
      float* dst = proj + t * hidden;
      const float* src = expert_out + i * hidden;
      for (int64_t j = 0; j < hidden; ++j) dst[j] += wt * src[j];
    }
  }
}

}  // namespace hymoe
