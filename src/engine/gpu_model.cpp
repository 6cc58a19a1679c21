#include "hymoe/engine/gpu_model.h"

#include <chrono>

#include <fmt/format.h>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/common/numeric.h"
#include "hymoe/common/stopwatch.h"
#include "hymoe/engine/layer_prep.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/gemm.h"
#include "hymoe/gpu/moe.h"
#include "hymoe/gpu/router.h"
#include "hymoe/model/weight_store.h"

namespace hymoe {
namespace {

using Clock = SteadyClock;
double gb(size_t bytes) { return static_cast<double>(bytes) / 1e9; }

size_t fp8_bytes(const Fp8Matrix& m) {
  return m.bytes() + static_cast<size_t>(m.scale_rows() * m.scale_cols()) * sizeof(float);
}
size_t mlp_bytes(const MlpWeights& w) { return fp8_bytes(w.gate) + fp8_bytes(w.up) + fp8_bytes(w.down); }
// A resident matrix also keeps a padded copy of its scales where the GEMM's row length differs.
size_t resident_fp8_bytes(const Fp8Matrix& m) {
  const int64_t ld = gpu::block_scale_ld(static_cast<int>(m.cols));
  return fp8_bytes(m) + (ld != m.scale_cols() ? static_cast<size_t>(m.scale_rows() * ld) * sizeof(float) : 0);
}
size_t resident_mlp_bytes(const MlpWeights& w) {
  return resident_fp8_bytes(w.gate) + resident_fp8_bytes(w.up) + resident_fp8_bytes(w.down);
}

gpu::YarnTable yarn_of(const ModelConfig& c) {
  gpu::YarnConfig yc;
  yc.theta = c.rope_theta;
  if (c.rope_scaling) {
    yc.factor = c.rope_scaling->factor;
    yc.original_max_position = static_cast<double>(c.rope_scaling->original_max_position_embeddings);
    yc.beta_fast = c.rope_scaling->beta_fast;
    yc.beta_slow = c.rope_scaling->beta_slow;
    yc.mscale = c.rope_scaling->mscale;
    yc.mscale_all_dim = c.rope_scaling->mscale_all_dim;
  } else {
    yc.factor = 1.0;
  }
  return gpu::make_yarn_table(yc, static_cast<int>(c.qk_rope_head_dim));
}

}  // namespace

std::string GpuPlacement::describe() const {
  return fmt::format(
      "GPU placement on {}: budget {:.2f} GB; resident weights {:.2f} GB, KV pool {:.2f} GB ({} tokens), "
      "step buffers {:.2f} GB; routed experts of {} MoE layers on the GPU ({:.2f} GB), {:.2f} GB on the CPU",
      device_name, gb(budget_bytes), gb(resident_bytes), gb(kv_bytes), kv_tokens, gb(step_bytes), gpu_expert_layers,
      gb(gpu_expert_bytes), gb(cpu_expert_bytes));
}

GpuModel::GpuModel(const WeightStore& store, const GpuModelOptions& o)
    : config_(store.config()),
      weights_(ModelWeights::bind(store)),
      device_(o.device),
      budget_([&] {
        HYMOE_CHECK(gpu::device_count() > o.device && o.device >= 0, kUnavailable,
                    "GPU model: no CUDA device {} ({} present)", o.device, gpu::device_count());
        HYMOE_CUDA_CHECK(cudaSetDevice(o.device));
        return gpu::MemoryBudget::for_device(o.device, o.gpu_memory_limit).cap();
      }()) {
  weights_.config = &config_;
  prefill_weights_ = o.prefill_weights;
  const ModelConfig& c = config_;
  info_ = gpu::query_device(o.device);
  placement_.device_name = info_.name;
  placement_.budget_bytes = budget_.cap();
  HYMOE_CHECK(c.hidden_size % 16 == 0, kUnsupported, "GPU model: hidden_size {} is not a multiple of 16",
              c.hidden_size);
  HYMOE_CHECK(c.kv_lora_rank <= 1024 && c.num_experts_per_tok <= gpu::kRouterMaxTopK &&
                  c.n_routed_experts <= gpu::kRouterMaxExperts && c.qk_rope_head_dim <= gpu::kMaxRopeDim,
              kUnsupported, "GPU model: kv_lora_rank {}, top-k {}, experts {} or rope dim {} beyond the GPU kernels",
              c.kv_lora_rank, c.num_experts_per_tok, c.n_routed_experts, c.qk_rope_head_dim);

  // The KV pool's size and the resident set must fit the budget: refuse with the numbers.
  const KvCacheShape kv_shape{.layers = c.num_hidden_layers,
                              .kv_lora_rank = c.kv_lora_rank,
                              .rope_dim = c.qk_rope_head_dim,
                              .block_tokens = o.kv_block_tokens};
  if (o.mirror_kv) {
    const KvCacheShape& m = o.mirror_kv->shape();
    HYMOE_CHECK(m.layers == kv_shape.layers && m.kv_lora_rank == kv_shape.kv_lora_rank &&
                    m.rope_dim == kv_shape.rope_dim,
                kInvalidArgument, "GPU model: the KV pool to mirror has {} layers of {} + {}, the model {} of {} + {}",
                m.layers, m.kv_lora_rank, m.rope_dim, kv_shape.layers, kv_shape.kv_lora_rank, kv_shape.rope_dim);
  }
  const int64_t kv_blocks =
      o.mirror_kv ? o.mirror_kv->total_blocks() : KvCache::blocks_in(kv_shape, o.kv_cache_bytes);
  placement_.kv_bytes =
      static_cast<size_t>(kv_blocks) * (o.mirror_kv ? o.mirror_kv->shape() : kv_shape).bytes_per_block();
  placement_.resident_bytes = resident_bytes();
  for (const LayerWeights& w : weights_.layers)
    if (w.moe)
      for (const MlpWeights& e : w.moe->experts) placement_.cpu_expert_bytes += mlp_bytes(e);
  const size_t need = placement_.resident_bytes + placement_.kv_bytes;
  HYMOE_CHECK(need <= budget_.cap(), kResourceExhausted,
              "the GPU memory limit of {:.2f} GB cannot hold the resident weights ({:.2f} GB) and the "
              "KV pool ({:.2f} GB): {:.2f} GB are needed, plus step buffers; raise --gpu-memory-limit or lower "
              "--kv-cache-bytes",
              gb(budget_.cap()), gb(placement_.resident_bytes), gb(placement_.kv_bytes), gb(need));

  gemv_impl_ = gpu::fp8_block_gemm_supported() ? gpu::Fp8GemvImpl::kTensorCores : gpu::Fp8GemvImpl::kCudaCores;
  yarn_ = yarn_of(c);
  softmax_scale_ = static_cast<float>(c.softmax_scale());

  const auto t0 = Clock::now();
  embed_ = upload_dense_bf16(weights_.embed);
  lm_head_ = upload_dense_bf16(weights_.lm_head);
  final_norm_ = upload_f32(dense_to_float(weights_.final_norm));
  stream_.synchronize();
  layers_.reserve(weights_.layers.size());
  for (const LayerWeights& w : weights_.layers) {
    const PreparedLayer prep = prepare_layer(w, c);
    DevLayer l;
    l.input_norm = upload_f32(prep.input_norm);
    l.post_norm = upload_f32(prep.post_attn_norm);
    l.q_a_norm = upload_f32(prep.q_a_norm);
    l.kv_a_norm = upload_f32(prep.kv_a_norm);
    l.q_a = upload_fp8(w.attn.q_a, "q_a_proj");
    l.q_b = upload_fp8(w.attn.q_b, "q_b_proj");
    l.kv_a = upload_fp8(w.attn.kv_a_with_mqa, "kv_a_proj_with_mqa");
    l.o = upload_fp8(w.attn.o, "o_proj");
    l.w_uk = upload_bf16(prep.kv_b.w_uk);
    l.w_uv_t = upload_bf16(prep.kv_b.w_uv_t);
    if (prefill_weights_) l.kv_b = upload_fp8(w.attn.kv_b, "kv_b_proj");
    if (w.dense) l.dense = upload_mlp(*w.dense, "mlp");
    if (w.moe) {
      if (w.moe->shared) l.shared = upload_mlp(*w.moe->shared, "shared_experts");
      l.router_w = upload_dense_bf16(w.moe->router);
      l.router_bias = upload_f32(prep.router_bias);
    }
    stream_.synchronize();  // prep's host vectors go out of scope
    layers_.push_back(std::move(l));
  }
  kv_memory_ = gpu::DeviceBuffer(placement_.kv_bytes, &budget_);
  if (o.mirror_kv) {
    kv_mirrored_ = o.mirror_kv;  // its blocks, this device's rows
  } else {
    kv_ = std::make_unique<KvCache>(kv_shape, o.kv_cache_bytes, kv_memory_.as<uint16_t>());
  }
  placement_.kv_tokens = kv_cache().capacity_tokens();
  log::get("engine")->info("GPU model on {}: {:.2f} GB resident, KV pool {:.2f} GB, uploaded in {:.1f} s", info_.name,
                           gb(placement_.resident_bytes), gb(placement_.kv_bytes), seconds_since(t0));
}

int64_t GpuModel::place_experts(int max_layers, size_t headroom) {
  if (experts_placed_) return placement_.gpu_expert_layers;
  experts_placed_ = true;
  const ModelConfig& c = config_;
  const auto t0 = Clock::now();
  for (size_t li = 0; li < weights_.layers.size(); ++li) {
    const LayerWeights& w = weights_.layers[li];
    if (!w.moe || max_layers == 0) continue;
    if (max_layers > 0 && placement_.gpu_expert_layers >= max_layers) break;
    size_t bytes = 0;
    for (const MlpWeights& e : w.moe->experts) bytes += mlp_bytes(e);
    const size_t device_bytes = w.moe->experts.size() * ExpertSlotLayout::of(c).bytes;
    if (device_bytes + headroom + static_cast<size_t>(c.n_routed_experts) * 3 * sizeof(gpu::ExpertWeight) >
        budget_.available())
      break;
    layers_[li].experts = upload_experts(w.moe->experts);
    placement_.gpu_expert_bytes += bytes;
    placement_.cpu_expert_bytes -= bytes;
    ++placement_.gpu_expert_layers;
  }
  if (placement_.gpu_expert_layers > 0)
    log::get("engine")->info("routed experts of {} MoE layers uploaded in {:.1f} s", placement_.gpu_expert_layers,
                             seconds_since(t0));
  return placement_.gpu_expert_layers;
}

void GpuModel::route(int64_t li, const float* logits, int32_t* topk_ids, float* topk_weights, int tokens,
                     cudaStream_t stream) const {
  const ModelConfig& c = config_;
  const DevLayer& l = layer(li);
  gpu::RouterParams rp;
  rp.logits = logits;
  rp.bias = l.router_bias.as<float>();
  rp.topk_ids = topk_ids;
  rp.topk_weights = topk_weights;
  rp.tokens = tokens;
  rp.experts = static_cast<int>(c.n_routed_experts);
  rp.groups = static_cast<int>(c.n_group);
  rp.topk_group = static_cast<int>(c.topk_group);
  rp.top_k = static_cast<int>(c.num_experts_per_tok);
  rp.normalize = c.norm_topk_prob;
  rp.scaling = static_cast<float>(c.routed_scaling_factor);
  gpu::route_noaux_tc(rp, stream);
}

gpu::Bf16* GpuModel::cache_layer(int64_t li) const {
  const KvCache& kv = kv_mirrored_ ? *kv_mirrored_ : *kv_;
  return kv_memory_.as<gpu::Bf16>() + li * kv.capacity_tokens() * kv.shape().width();
}

size_t GpuModel::copy_kv_rows(const GpuModel& to, std::span<const KvRowRun> runs, cudaStream_t stream) const {
  const KvCache& kv = kv_mirrored_ ? *kv_mirrored_ : *kv_;
  const KvCache& other = to.kv_mirrored_ ? *to.kv_mirrored_ : *to.kv_;
  HYMOE_CHECK(&kv == &other && to.config_.num_hidden_layers == config_.num_hidden_layers, kInvalidArgument,
              "GPU model: copying KV rows to a model over another pool");
  const int64_t width = kv.shape().width();
  size_t bytes = 0;
  for (int64_t li = 0; li < config_.num_hidden_layers; ++li) {
    for (const KvRowRun& r : runs) {
      HYMOE_CHECK(r.row >= 0 && r.count >= 0 && r.row + r.count <= kv.capacity_tokens(), kInvalidArgument,
                  "GPU model: KV rows [{}, {}) past the pool's {}", r.row, r.row + r.count, kv.capacity_tokens());
      const size_t n = static_cast<size_t>(r.count * width) * sizeof(gpu::Bf16);
      if (n == 0) continue;
      HYMOE_CUDA_CHECK(cudaMemcpyPeerAsync(to.cache_layer(li) + r.row * width, to.device_,
                                           cache_layer(li) + r.row * width, device_, n, stream));
      bytes += n;
    }
  }
  return bytes;
}

gpu::DeviceBuffer GpuModel::upload(const void* src, size_t bytes) {
  gpu::DeviceBuffer b(bytes, &budget_);
  b.copy_from_host(src, bytes, stream_);
  return b;
}

gpu::DeviceBuffer GpuModel::upload_f32(const std::vector<float>& v) {
  gpu::DeviceBuffer d = upload(v.data(), v.size() * sizeof(float));
  stream_.synchronize();  // v may go out of scope
  return d;
}

gpu::DeviceBuffer GpuModel::upload_bf16(const std::vector<uint16_t>& v) {
  gpu::DeviceBuffer d = upload(v.data(), v.size() * 2);
  stream_.synchronize();
  return d;
}

// A dense tensor as BF16 on the device (converted where the checkpoint holds F16 / F32).
gpu::DeviceBuffer GpuModel::upload_dense_bf16(const DenseMatrix& m) {
  const size_t n = static_cast<size_t>(m.rows * m.cols);
  if (m.dtype == DType::kBF16) return upload(m.data, n * 2);
  std::vector<float> row(static_cast<size_t>(m.cols));
  std::vector<uint16_t> all(n);
  for (int64_t r = 0; r < m.rows; ++r) {
    dense_row_to_float(m, r, row.data());
    for (int64_t col = 0; col < m.cols; ++col)
      all[static_cast<size_t>(r * m.cols + col)] = float_to_bf16(row[static_cast<size_t>(col)]);
  }
  return upload_bf16(all);
}

DevFp8 GpuModel::upload_fp8(const Fp8Matrix& m, const char* what) {
  HYMOE_CHECK(m.cols >= 16 && m.cols % 16 == 0, kUnsupported,
              "GPU model: {} has {} input columns; the GPU GEMV needs a multiple of 16", what, m.cols);
  DevFp8 d;
  d.n = static_cast<int>(m.rows);
  d.k = static_cast<int>(m.cols);
  d.scale_ld = m.scale_cols();
  d.data = upload(m.data, m.bytes());
  d.scales = upload(m.scale_inv, static_cast<size_t>(m.scale_rows() * m.scale_cols()) * sizeof(float));
  const int64_t ld = gpu::block_scale_ld(static_cast<int>(m.cols));
  if (ld != m.scale_cols()) {
    std::vector<float> padded(static_cast<size_t>(m.scale_rows() * ld), 0.0f);
    for (int64_t r = 0; r < m.scale_rows(); ++r)
      for (int64_t c = 0; c < m.scale_cols(); ++c)
        padded[static_cast<size_t>(r * ld + c)] = m.scale_inv[r * m.scale_cols() + c];
    d.gemm_scales = upload_f32(padded);
  }
  return d;
}

DevMlp GpuModel::upload_mlp(const MlpWeights& w, const char* what) {
  return DevMlp{upload_fp8(w.gate, what), upload_fp8(w.up, what), upload_fp8(w.down, what)};
}

// A layer's routed experts into one device allocation (each tensor 256-byte aligned).
DevExperts GpuModel::upload_experts(const std::vector<MlpWeights>& experts) {
  DevExperts d;
  const auto n = static_cast<int>(experts.size());
  d.slots = std::make_unique<ExpertRing>(config_, n, &budget_);
  d.host_views.resize(3 * experts.size());
  for (int e = 0; e < n; ++e) {
    d.slots->load(e, experts[static_cast<size_t>(e)], stream_);
    d.host_views[static_cast<size_t>(e)] = d.slots->gate(e);
    d.host_views[static_cast<size_t>(n + e)] = d.slots->up(e);
    d.host_views[static_cast<size_t>(2 * n + e)] = d.slots->down(e);
  }
  d.views = upload(d.host_views.data(), d.host_views.size() * sizeof(gpu::ExpertWeight));
  stream_.synchronize();
  return d;
}

// Bytes of everything resident (what the constructor uploads), for the placement and refusals.
size_t GpuModel::resident_bytes() const {
  const ModelConfig& c = config_;
  size_t total = 2 * static_cast<size_t>(c.vocab_size * c.hidden_size) * 2 + static_cast<size_t>(c.hidden_size) * 4;
  for (const LayerWeights& w : weights_.layers) {
    total += static_cast<size_t>(2 * c.hidden_size) * 4 + static_cast<size_t>(c.q_lora_rank + c.kv_lora_rank) * 4;
    total += resident_fp8_bytes(w.attn.q_a) + resident_fp8_bytes(w.attn.q_b) +
             resident_fp8_bytes(w.attn.kv_a_with_mqa) + resident_fp8_bytes(w.attn.o);
    total += static_cast<size_t>(c.num_attention_heads * c.kv_lora_rank * (c.qk_nope_head_dim + c.v_head_dim)) * 2;
    if (prefill_weights_) total += resident_fp8_bytes(w.attn.kv_b);
    if (w.dense) total += resident_mlp_bytes(*w.dense);
    if (w.moe) {
      if (w.moe->shared) total += resident_mlp_bytes(*w.moe->shared);
      total += static_cast<size_t>(c.n_routed_experts) * (static_cast<size_t>(c.hidden_size) * 2 + 4);
    }
  }
  return total;
}

}  // namespace hymoe
