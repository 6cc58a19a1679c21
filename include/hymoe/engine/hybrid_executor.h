// HybridExecutor: the model on a GPU with the routed experts on the CPU. Per layer on the GPU:
// input norm, MLA attention over a paged latent KV cache in device memory, o_proj and residual,
// post-attention norm, router top-k, the shared expert and the dense MLP of dense layers; on the
// CPU: the routed experts (CpuRoutedExperts: the NUMA MoE executor for decode tokens, per-expert
// GEMMs for prompt tokens), their sum added back on the GPU. Embedding, final norm and lm_head on
// the GPU. The layer sequence is the one every executor runs (layer_sequence.h); with two or more
// decoding sequences the step runs as two micro-batches whose GPU and CPU parts overlap.
//
// Placement (GpuModel, gpu_model.h): everything but the routed experts is resident on the device,
// plus the KV pool, under a memory budget (gpu_memory_limit, which emulates a smaller card); a
// budget that cannot hold them is refused at construction with the bytes needed. Where room is
// left, the routed experts of whole MoE layers go to the device too and are computed there. The
// device model may be shared with other GPU executors (one copy of the weights, one KV pool).
//
// Precision as the CPU engine's: linear layers take BF16 activations and give FP32; norms, RoPE,
// absorption, softmax and the attention output stay FP32; values are rounded to BF16 only where a
// linear layer or the cache reads them.
//
// Built only with CUDA (HYMOE_HAVE_CUDA); the header itself needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "hymoe/cpu/thread_pool.h"
#include "hymoe/engine/executor.h"
#include "hymoe/engine/gpu_placement.h"

namespace hymoe {

class WeightStore;
class GpuModel;

struct HybridExecutorOptions {
  int device = 0;
  std::optional<size_t> gpu_memory_limit;  // bytes hymoe may allocate on the device; none: all
  size_t kv_cache_bytes = 1ull << 30;      // device memory of the latent KV pool
  int64_t kv_block_tokens = 64;
  int64_t max_step_tokens = 1024;          // step buffers sized for this many tokens (grow beyond)
  // The CPU experts' GEMVs decode FP8 by shifts (Fp8SpecialIndex; see CpuExecutorOptions).
  bool shift_decode = true;
  // With two or more tokens decoding, split the step into two micro-batches on their own CUDA
  // streams, interleaved so that one's GPU part runs while the CPU computes the other's routed
  // experts (run_layers_interleaved). Lane A takes the first half of the decode rows, lane B the
  // rest and the prompt rows, each with its own scratch and pinned hand-off buffers; the residual
  // stream and the plan are shared (disjoint rows). Results do not change (each row's arithmetic
  // is the same).
  bool dual_microbatch = true;
  // Routed experts of whole MoE layers on the GPU where the budget has room for them after the
  // resident set, the KV pool and the step buffers (those layers then need no hand-off and the
  // CPU reads fewer bytes per token): -1 as many as fit, 0 none, N at most N.
  int max_gpu_expert_layers = -1;
  // Decode rows' attention through the tuned MLA decode kernel (mla_decode.h) where the model has
  // its shapes (kv_lora_rank 512, rope 64, heads a multiple of 16): one launch a decode row with
  // the splits of its own length, so a row's result does not depend on the batch. Off (or other
  // shapes): the generic kernel (mla_attention_any), which reads the cache once per head.
  bool tuned_decode_attention = true;
};


class HybridExecutor final : public Executor {
 public:
  // Binds and uploads the weights. Throws hymoe::Error: kUnavailable without a CUDA device,
  // kResourceExhausted when the budget cannot hold the resident set and the KV pool (the message
  // says how much is needed), kUnsupported for shapes the GPU path cannot run.
  HybridExecutor(const WeightStore& store, cpu::ThreadPool& pool, const HybridExecutorOptions& options);
  // On a device model built already (maybe shared): options' device, gpu_memory_limit,
  // kv_cache_bytes and kv_block_tokens are the model's and not read here.
  HybridExecutor(std::shared_ptr<GpuModel> model, cpu::ThreadPool& pool, const HybridExecutorOptions& options);
  ~HybridExecutor() override;

  const ModelConfig& config() const override;
  KvCache& kv_cache() override;
  void forward(std::span<const StepItem> items, std::span<float> logits) override;
  const char* name() const override { return "hybrid"; }
  std::string placement_summary() const override;
  const GpuPlacement& placement() const;
  const std::shared_ptr<GpuModel>& model() const;

  // Wall time since construction or the last reset (benchmarks, hymoe-cli --profile).
  struct Profile {
    double step_s = 0;      // forward() in all
    double gpu_wait_s = 0;  // the CPU waiting for each MoE layer's GPU part (attention, router, ...)
    double cpu_moe_s = 0;   // the routed experts on the CPU
    double handoff_s = 0;   // enqueueing the copies of hidden state and results, both ways
    double head_s = 0;      // final norm, lm_head and the logits copy
    int64_t steps = 0;
    int64_t tokens = 0;
    int64_t moe_layer_runs = 0;
  };
  Profile profile() const;
  void reset_profile();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe
