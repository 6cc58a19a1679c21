// CpuExecutor: the whole model on the CPU with the optimised kernels. FP8 linears (GEMV for up
// to 8 tokens, GEMM beyond), MLA in the absorbed form over the paged latent KV cache, the
// noaux_tc router, shared expert, routed experts through the NUMA-aware MoE executor (decode
// micro-batches) or per-expert GEMMs (prefill), dense layers, lm_head.
// The embedded default and the fallback on machines without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "hymoe/cpu/thread_pool.h"
#include "hymoe/engine/fp8_special_index.h"
#include "hymoe/engine/cpu_routed_experts.h"
#include "hymoe/engine/executor.h"
#include "hymoe/engine/layer_prep.h"
#include "hymoe/engine/layer_sequence.h"
#include "hymoe/engine/step_plan.h"
#include "hymoe/kernels/rope.h"
#include "hymoe/model/model_weights.h"

namespace hymoe {

class WeightStore;

struct CpuExecutorOptions {
  size_t kv_cache_bytes = 1ull << 30;
  int64_t kv_block_tokens = 64;
  int64_t max_step_tokens = 1024;  // step buffers are sized for this many tokens up front (larger
                                   // steps still work: buffers grow once)
  // Find every FP8 matrix's special codes at startup (Fp8SpecialIndex: one read of every weight,
  // on the pool) so that the AVX512-BF16 GEMVs decode by shifts; where that variant does not run,
  // nothing is scanned. The server turns it off for --load-mode mmap (it would page everything in).
  bool shift_decode = true;
  // Decode GEMVs of the dense weights (attention projections, dense and shared-expert MLPs) on
  // the AMX tile unit where the CPU has it (kernels::fp8_gemv_amx); the routed experts keep the
  // AVX512-BF16 GEMV (one token an expert, mostly). Off by default: on the 16-core Xeon the AMX
  // GEMV reads 0.89-0.94x the shift decode's bandwidth at 1-2 tokens and 1.45-2.6x it at 4-8
  // (vdpbf16ps per token bounds the AVX512-BF16 kernel there); in the engine the attention and
  // dense parts ran 1.05-1.5x slower for one sequence and 1.45-2.0x faster for 8 (docs/
  // experiments.md, CPU GEMV): worth it on a server that usually decodes 4+ sequences.
  // Fixed for the executor's life, so batch invariance holds either way. Where AMX is not usable
  // the option is ignored (a warning at construction).
  bool amx_decode_gemv = false;
};

class CpuExecutor final : public Executor, private LayerOps {
 public:
  // Binds the weights (throws hymoe::Error naming a bad tensor) and prepares per-layer data:
  // norms as FP32, kv_b split into W_UK / W_UV (BF16) for the absorbed attention.
  CpuExecutor(const WeightStore& store, cpu::ThreadPool& pool, const CpuExecutorOptions& options);
  ~CpuExecutor() override;

  const ModelConfig& config() const override { return config_; }
  KvCache& kv_cache() override { return kv_; }
  void forward(std::span<const StepItem> items, std::span<float> logits) override;
  const char* name() const override { return "cpu"; }
  // Whether the dense weights' decode GEMVs run on AMX (CpuExecutorOptions::amx_decode_gemv where
  // the CPU has it).
  bool amx_decode_gemv() const { return amx_gemv_; }

  // Wall time spent per stage since construction or the last reset (for benchmarks).
  struct Profile {
    double attention_s = 0;  // norms, q/kv projections, cache writes, attention, o_proj
    double dense_s = 0;      // dense MLP layers
    double moe_s = 0;        // router, shared and routed experts
    double lm_head_s = 0;    // final norm and lm_head
    int64_t steps = 0;
    int64_t tokens = 0;
  };
  Profile profile() const { return profile_; }
  void reset_profile() { profile_ = {}; }

 private:
  struct Buffers;
  // The stages of the layer sequence (layer_sequence.h), on the CPU kernels.
  void attention(int64_t layer) override;
  void ffn_input(int64_t layer) override;
  void dense_mlp(int64_t layer) override;
  void router(int64_t layer) override;
  void shared_expert(int64_t layer) override;
  void routed_experts(int64_t layer) override;
  void ffn_residual(int64_t layer) override;
  // Rows [0, decode_rows) of x are decode tokens (see fp8_linear).
  void mlp(const MlpWeights& w, const uint16_t* x, int64_t tokens, int64_t decode_rows, float* out,
           bool accumulate);

  ModelConfig config_;
  ModelWeights weights_;
  Fp8SpecialIndex specials_;  // what weights_' Fp8Matrix::specials point into
  cpu::ThreadPool& pool_;
  KvCache kv_;
  kernels::RopeTable rope_;
  float softmax_scale_ = 1.0f;
  std::vector<PreparedLayer> layers_;
  StepPlan plan_;
  std::vector<float> final_norm_;
  std::unique_ptr<CpuRoutedExperts> routed_;
  std::unique_ptr<Buffers> buf_;
  bool amx_gemv_ = false;    // CpuExecutorOptions::amx_decode_gemv, where AMX is usable
  int64_t decode_rows_ = 0;  // this step's decode tokens: rows [0, decode_rows_) of every buffer
  Profile profile_;
};

}  // namespace hymoe
