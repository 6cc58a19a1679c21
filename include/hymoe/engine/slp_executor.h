// SlpExecutor: stream-loading prefill (SLP, issue 42). A long prompt computed wholly on the GPU,
// layer by layer, every routed expert included, the routed experts streamed from host memory into
// a ring of device slots just ahead of use (ExpertStreamer: loader, model and unloader threads on
// their own streams) while the attention and the experts before them compute. Everything else is
// the shared device model's resident set (GpuModel, built with prefill_weights for kv_b), and the
// prompt's latent KV rows go to the model's device KV pool, where the hybrid executor's decode
// continues from them with no copy.
//
// Per layer, over all of the step's tokens, through the layer sequence every executor runs
// (layer_sequence.h), in chunks of chunk_tokens rows where the work is per token:
//   attention      input norm, q_a / q_b / kv_a by the block-scaled FP8 GEMM (GpuLinear), the
//                  latent rows into the KV pool (mla_latent_rows, as the hybrid path), then per
//                  sequence its cached latent rows gathered and expanded by kv_b (keys and values
//                  of every head, naive MLA, laid out k_nope | k_pe | v per head so that cuDNN
//                  reads K in place) and causal flash attention over blocks of query rows (cuDNN's
//                  fused attention, or mla_prefill's tensor-core kernel), in windows of keys
//                  merged by log-sum-exp where the sequence is longer than one, o_proj;
//   dense / shared the SiLU-gated MLP by FP8 GEMMs;
//   router         FP32 scores (dense_gemm_f32: the hybrid path's FP32 product, tiled for many
//                  tokens) and grouped top-k;
//   routed experts SlpMoe: tokens grouped by expert, grouped FP8 GEMMs over the ring's slots.
// The residual stream stays FP32 between stages (GEMM outputs, BF16, are widened).
//
// Built only with CUDA (HYMOE_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hymoe/engine/executor.h"
#include "hymoe/gpu/host_register.h"

namespace hymoe {

class CopyPacer;
class GpuModel;

struct SlpExecutorOptions {
  // Tokens a step may hold (the activation buffers and the MoE's grouped buffers are sized for it).
  int64_t max_tokens = 8192;
  // Rows a chunk of the per-token stages (projections, attention queries, dense MLPs) and of the
  // kv_b expansion; bounds their scratch.
  int64_t chunk_tokens = 2048;
  // Query rows of one attention call (a sequence's rows of a step in blocks of this many): bounds
  // the queries' and outputs' buffers (80 KB a row for DeepSeek-V3); cuDNN builds a plan per
  // (rows, keys) shape, about 0.1 s each, so fewer, larger calls build fewer.
  int64_t attention_tokens = 8192;
  // Keys expanded at once (80 KB each for DeepSeek-V3): a sequence with more attends them in
  // windows of this many, merged by log-sum-exp, so that memory stays bounded at any length.
  int64_t attention_window = 16384;
  // The attention kernel: cuDNN's fused flash attention where it is available and takes the
  // shapes (about twice the tensor-core kernel's rate on Hopper), else the tensor-core kernel.
  enum class Attention { kAuto, kCudnn, kTensorCores };
  Attention attention = Attention::kAuto;
  // Expert ring slots: 0 chooses from the budget left after the buffers (at most one layer's
  // experts, at least 2), keeping ring_headroom bytes free.
  int ring_slots = 0;
  size_t ring_headroom = size_t{512} << 20;
  // Synchronise the GPU after each stage so that Profile's stage times are the GPU's (costs the
  // overlap of a stage's tail with the next one's launch; benchmarks only).
  bool profile_stages = false;
  // Host memory to register for DMA at construction (the WeightStore's regions), held while the
  // executor lives, so that the experts copy at the pinned rate; empty where the caller pinned it.
  std::vector<gpu::HostSpan> pin;
};

class SlpExecutor final : public Executor {
 public:
  // On a device model built with GpuModelOptions::prefill_weights (kInvalidArgument otherwise),
  // which must outlive nothing: the executor shares it. Throws hymoe::Error: kResourceExhausted
  // when the budget cannot hold the buffers and a two-slot ring (the message says how much is
  // needed), kUnsupported for attention shapes other than DeepSeek-V3's (nope 128, rope 64,
  // v 128: the prefill kernel's).
  SlpExecutor(std::shared_ptr<GpuModel> model, const SlpExecutorOptions& options);
  ~SlpExecutor() override;
  // The same, with options.max_tokens halved while the budget cannot hold the buffers
  // (kResourceExhausted) and the half is still >= min_tokens; other errors, and the last
  // refusal, propagate. max_tokens() says what fit.
  static std::unique_ptr<SlpExecutor> create_fitting(std::shared_ptr<GpuModel> model, SlpExecutorOptions options,
                                                      int64_t min_tokens);

  const ModelConfig& config() const override;
  KvCache& kv_cache() override;
  // Any mix of items (decode tokens are single-token prompts here); at most max_tokens tokens a
  // step (kInvalidArgument beyond).
  void forward(std::span<const StepItem> items, std::span<float> logits) override;
  const char* name() const override { return "slp"; }
  std::string placement_summary() const override;

  int ring_slots() const;
  // "cudnn" or "tensor-cores": what the attention runs on.
  const char* attention_kernel() const;
  int64_t max_tokens() const;

  // Wall time and streaming since construction or the last reset (benchmarks).
  struct Profile {
    double step_s = 0;
    // Per stage class (layer_sequence.h's LayerTimes): host time, the GPU's with profile_stages.
    double attention_s = 0;
    double dense_s = 0;       // dense layers' FFN
    double moe_s = 0;         // MoE layers' FFN: router, shared expert, the streamed routed experts
    // With profile_stages, the MoE FFN's parts: router, shared expert, and the routed experts'
    // (SlpMoe::Times: grouping, waiting for copies, GEMMs, un-permutes).
    double router_s = 0, shared_s = 0, routed_prep_s = 0, routed_wait_s = 0, routed_gemm_s = 0, routed_combine_s = 0;
    double head_s = 0;
    size_t streamed_bytes = 0;
    double model_wait_s = 0;  // compute waiting for an expert's copy (loading is behind)
    double slot_wait_s = 0;   // the loader waiting for a free slot (compute is behind)
    double paced_s = 0;       // the loader holding copies back for the pacer (decodes beside)
    int64_t steps = 0, tokens = 0;
  };
  Profile profile() const;
  void reset_profile();
  void set_profile_stages(bool on);  // SlpExecutorOptions::profile_stages, between steps
  // Paces the expert copies while decodes run beside (the runtime's --tpot-slo-ms; nullptr: none).
  // The pacer must outlive the executor or be reset first. Without a ring (every expert resident)
  // nothing streams and nothing is paced.
  void set_copy_pacer(CopyPacer* pacer);
  // Between steps (benchmarks): the tensor-core kernel, or back to cuDNN where it was set up.
  void set_attention_tensor_cores(bool on);

  // Benchmarks: with the timeline on, the next steps record timing events (no synchronisation)
  // and timeline() gives the last step's, per MoE layer in milliseconds since the step began on
  // the GPU: its attention, its routed experts, and the copies of its experts on the copy stream.
  struct TimelineRow {
    int64_t layer = 0;
    float attention_begin = 0, attention_end = 0, routed_begin = 0, routed_end = 0;
    float copy_begin = -1, copy_end = -1;  // -1: nothing streamed (experts resident)
  };
  void set_timeline(bool on);
  std::vector<TimelineRow> timeline() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe
