// The routed experts of one MoE layer for a long prompt on the GPU (SLP, issue 42), the experts
// streamed into ring slots by an ExpertStreamer while the previous ones compute:
//   1. the tokens quantised to FP8 (1 x 128 blocks), grouped by expert (moe.h's offsets and
//      permute; the offsets come to the host once a layer);
//   2. per batch of experts, half the ring (consecutive items of the streamer's schedule, in
//      expert order, so that the loader fills the other half meanwhile) or fewer where their rows
//      would pass the batch buffers (2 x max_tokens rows): gate and up by the grouped block-scaled
//      FP8 GEMM over the batch's slots, SiLU(gate) * up, quantised, down by the grouped GEMM, and
//      the batch's share of the weighted un-permute added to the FP32 output
//      (moe_unpermute_add); the batch's slots are released behind it.
// Memory: the quantised and permuted tokens for the whole layer (~8 x hidden bytes a token), the
// gate/up, activation and output buffers for one batch only.
// Per batch the grouped GEMMs see every expert, those outside the batch with no rows (their
// offsets collapsed onto the batch's bounds), so the activations' grouped scale layout is the one
// of the whole layer. A row's result depends only on its own token and expert, up to the grouped
// GEMM's accumulation order, which may change with a batch's row count (its tile shape): rings of
// other lengths agree to rounding, not bitwise (an H100 run showed one BF16 output 7% apart
// where the sum cancels).
//
// Built only with CUDA (HYMOE_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hymoe/engine/expert_stream.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/dtypes.h"
#include "hymoe/gpu/moe.h"

namespace hymoe {

// The offsets of one batch of experts [e0, e1) (offsets: [experts + 1], non-decreasing):
// absolute[g] = clamp(offsets[g], offsets[e0], offsets[e1]) - every expert outside the batch
// empty, the batch's rows where they are - and relative[g] = absolute[g] - offsets[e0], the same
// rows numbered from the batch's first. Pure (tested without a GPU).
void slp_batch_offsets(std::span<const int32_t> offsets, int64_t e0, int64_t e1, std::span<int32_t> absolute,
                       std::span<int32_t> relative);

class SlpMoe {
 public:
  // Buffers for up to max_tokens prompt tokens, counted against budget (may be null).
  SlpMoe(const ModelConfig& config, const gpu::CublasLt& lt, int64_t max_tokens, gpu::MemoryBudget* budget);
  ~SlpMoe();
  SlpMoe(const SlpMoe&) = delete;
  SlpMoe& operator=(const SlpMoe&) = delete;

  struct Params {
    const gpu::Bf16* x = nullptr;        // [tokens, hidden]: the post-attention norm's output
    const int32_t* topk_ids = nullptr;   // [tokens, top_k] on the device
    const float* topk_weights = nullptr; // [tokens, top_k] (routed_scaling_factor applied)
    float* out = nullptr;                // [tokens, hidden]: set to sum_k w_k expert_k(x), FP32
    int64_t tokens = 0;                  // 1..max_tokens
    // The experts computed: [expert_begin, expert_end) (-1: to the last). The others' rows add
    // nothing to out (a DSLP rank's share of the experts; SmallEP sums the ranks' outputs).
    int64_t expert_begin = 0, expert_end = -1;
    // This layer's experts in the streamer's schedule: item first_item + (e - expert_begin) is
    // expert e of this layer for e in the range (every one, in order; the ones without tokens
    // are acquired and released unused).
    size_t first_item = 0;
    // Where the layer's experts are resident on the device (GpuModel's DevExperts::host_views,
    // [3][experts]: gate, up, down): computed there, nothing streamed or acquired.
    const gpu::ExpertWeight* resident = nullptr;
  };
  // Enqueues the layer on `stream` (one host synchronisation, for the expert offsets). The
  // streamer's schedule must hold the layer's items as Params::first_item says; the ring's slots
  // bound a batch (resident experts: only the batch buffers' rows).
  void run(const Params& p, ExpertStreamer& streamer, const ExpertRing& ring, cudaStream_t stream);

  int64_t max_tokens() const { return max_tokens_; }

  // With timing on, run() synchronises after each part and adds its time here (benchmarks: the
  // parts' overlap with the copies is lost).
  struct Times {
    double prep_s = 0;     // quantise, group by expert, offsets to the host
    double wait_s = 0;     // acquiring the batches' slots: the copies not yet done
    double gemm_s = 0;     // gate / up / SiLU / quantise / down of the batches
    double combine_s = 0;  // the weighted un-permutes
    int64_t batches = 0;
  };
  void set_timing(bool on);
  const Times& times() const;
  void reset_times();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t max_tokens_ = 0;
};

}  // namespace hymoe
