// GpuModel: the model's device half, built once and shared by the GPU executors (the hybrid
// executor's decode and short prefill, stream-loading prefill): everything but the
// routed experts resident under a memory budget, the latent KV pool in device memory, and -
// where the budget has room left - whole MoE layers' routed experts. The host weights stay in the
// WeightStore, which must outlive the model.
//
// Built only with CUDA (HYMOE_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "hymoe/engine/expert_stream.h"
#include "hymoe/engine/gpu_placement.h"
#include "hymoe/engine/kv_cache.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/dtypes.h"
#include "hymoe/gpu/fp8_gemv.h"
#include "hymoe/gpu/rope.h"
#include "hymoe/gpu/stream.h"
#include "hymoe/model/model_weights.h"

namespace hymoe {

class WeightStore;

struct GpuModelOptions {
  int device = 0;
  std::optional<size_t> gpu_memory_limit{};  // bytes hymoe may allocate on the device; none: all
  size_t kv_cache_bytes = 1ull << 30;      // device memory of the latent KV pool
  int64_t kv_block_tokens = 64;
  // kv_b in FP8 as well (DevLayer::kv_b): stream-loading prefill expands the prompt's keys and
  // values with it (naive MLA); the decode paths use W_UK / W_UV only.
  bool prefill_weights = false;
  // Another model's KV pool (on another device) whose blocks this model mirrors: kv_cache() is
  // that pool's bookkeeping (block ids, tables, prefix cache), the rows are this device's own
  // memory of the same size (kv_cache_bytes unused). A second executor on this device writes a
  // prompt's KV here under the shared block ids; copy_kv_rows moves them to the other device.
  KvCache* mirror_kv = nullptr;
};

// An FP8 matrix on the device in the checkpoint's layout (scales [ceil(n/128), ceil(k/128)]).
// The block-scaled GEMM (gemm.h) reads scale rows of block_scale_ld(k) = ceil(k/128) rounded up
// to 4: where that differs (never for DeepSeek-V3 / Kimi-K2 shapes), gemm_scales holds a padded
// copy; gemm_scale_data() is what the GEMM reads either way.
struct DevFp8 {
  gpu::DeviceBuffer data, scales, gemm_scales;
  int n = 0, k = 0;
  int64_t scale_ld = 0;
  const float* gemm_scale_data() const { return gemm_scales.bytes() ? gemm_scales.as<float>() : scales.as<float>(); }
};

struct DevMlp {
  DevFp8 gate, up, down;
};

// A MoE layer's routed experts on the device, in the layout of stream-loading prefill's slots
// (one ExpertRing slot an expert: scales padded to gpu::block_scale_ld(k) a row, what the grouped
// GEMM reads; moe_gemv takes the same row lengths), so that SLP computes them where they are.
struct DevExperts {
  std::unique_ptr<ExpertRing> slots;
  gpu::DeviceBuffer views;                    // gpu::ExpertWeight [3][experts]: gate, up, down
  std::vector<gpu::ExpertWeight> host_views;  // the same on the host
};

struct DevLayer {
  gpu::DeviceBuffer input_norm, post_norm;  // FP32 [hidden]
  gpu::DeviceBuffer q_a_norm, kv_a_norm;    // FP32
  DevFp8 q_a, q_b, kv_a, o;
  gpu::DeviceBuffer w_uk, w_uv_t;           // BF16 (layer_prep.h)
  DevFp8 kv_b;                              // GpuModelOptions::prefill_weights only
  std::optional<DevMlp> dense, shared;
  gpu::DeviceBuffer router_w;               // BF16 [experts, hidden]
  gpu::DeviceBuffer router_bias;            // FP32 [experts]
  std::optional<DevExperts> experts;        // where place_experts put this layer's experts
};

class GpuModel {
 public:
  // Binds the store's weights, uploads the resident set and allocates the KV pool. Throws
  // hymoe::Error: kUnavailable without the CUDA device, kResourceExhausted when the budget cannot
  // hold the resident set and the KV pool (the message says how much is needed), kUnsupported for
  // shapes the GPU kernels cannot run.
  GpuModel(const WeightStore& store, const GpuModelOptions& options);
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  // Uploads whole MoE layers' routed experts, first layers first, while the budget keeps
  // `headroom` bytes free after them: at most max_layers (-1 as many as fit, 0 none). Once: a
  // second call does nothing. Returns the layers placed.
  int64_t place_experts(int max_layers, size_t headroom);

  const ModelConfig& config() const { return config_; }
  bool has_prefill_weights() const { return prefill_weights_; }
  const ModelWeights& weights() const { return weights_; }
  int device() const { return device_; }
  const gpu::DeviceInfo& device_info() const { return info_; }
  gpu::MemoryBudget& budget() { return budget_; }
  GpuPlacement& placement() { return placement_; }
  const GpuPlacement& placement() const { return placement_; }
  KvCache& kv_cache() { return kv_mirrored_ ? *kv_mirrored_ : *kv_; }
  // Layer li's part of this device's latent KV rows: [blocks * block_tokens, kv_lora_rank + rope]
  // BF16.
  gpu::Bf16* cache_layer(int64_t li) const;
  // Copies pool rows (kv_row_runs; every layer's) from this model's KV memory to `to`'s, the
  // other device's model over the same pool (one mirrors the other): one peer copy a run and
  // layer, enqueued on `stream`. Returns the bytes copied.
  size_t copy_kv_rows(const GpuModel& to, std::span<const KvRowRun> runs, cudaStream_t stream) const;

  const DevLayer& layer(int64_t li) const { return layers_[static_cast<size_t>(li)]; }
  // MoE layer li's grouped top-k (noaux_tc, the config's groups, normalisation and scaling) of
  // `tokens` rows of FP32 router scores; enqueued on stream.
  void route(int64_t li, const float* logits, int32_t* topk_ids, float* topk_weights, int tokens,
             cudaStream_t stream) const;
  const gpu::DeviceBuffer& embed() const { return embed_; }        // BF16 [vocab, hidden]
  const gpu::DeviceBuffer& lm_head() const { return lm_head_; }    // BF16 [vocab, hidden]
  const gpu::DeviceBuffer& final_norm() const { return final_norm_; }  // FP32 [hidden]
  const gpu::YarnTable& yarn() const { return yarn_; }
  float softmax_scale() const { return softmax_scale_; }
  // The FP8 GEMV implementation every executor uses for every row count (results then do not
  // depend on how rows are batched).
  gpu::Fp8GemvImpl gemv_impl() const { return gemv_impl_; }

 private:
  gpu::DeviceBuffer upload(const void* src, size_t bytes);
  gpu::DeviceBuffer upload_f32(const std::vector<float>& v);
  gpu::DeviceBuffer upload_bf16(const std::vector<uint16_t>& v);
  gpu::DeviceBuffer upload_dense_bf16(const DenseMatrix& m);
  DevFp8 upload_fp8(const Fp8Matrix& m, const char* what);
  DevMlp upload_mlp(const MlpWeights& w, const char* what);
  DevExperts upload_experts(const std::vector<MlpWeights>& experts);
  size_t resident_bytes() const;

  ModelConfig config_;
  ModelWeights weights_;
  int device_ = 0;
  gpu::DeviceInfo info_;
  gpu::MemoryBudget budget_;
  gpu::Stream stream_;  // uploads
  GpuPlacement placement_;
  gpu::Fp8GemvImpl gemv_impl_ = gpu::Fp8GemvImpl::kCudaCores;
  gpu::YarnTable yarn_;
  float softmax_scale_ = 1.0f;
  bool experts_placed_ = false;
  bool prefill_weights_ = false;
  std::vector<DevLayer> layers_;
  gpu::DeviceBuffer embed_, lm_head_, final_norm_;
  gpu::DeviceBuffer kv_memory_;
  std::unique_ptr<KvCache> kv_;      // the pool's bookkeeping, unless it is mirrored:
  KvCache* kv_mirrored_ = nullptr;   // GpuModelOptions::mirror_kv
};

}  // namespace hymoe
