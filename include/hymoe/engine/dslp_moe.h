// SmallEP on the GPU (DSLP, issue 44): one MoE layer's routed experts for the rank of a
// two-GPU (or R-GPU) prefill that holds a share of the experts, the data movement of
// context_parallel.h's small_ep over device buffers:
//   1. the rank's rows (its two zig-zag stripes, post-attention norm, BF16) padded to the ranks'
//      largest share and all-gathered: every rank holds every prompt row, rank-major;
//   2. the caller's router over all of them (every rank computes the same routing);
//   3. this rank's experts (a contiguous block, expert_rank()) by SlpMoe, streamed through the
//      rank's ring, into an FP32 partial sum over every row;
//   4. the partials reduce-scattered: the rank receives the sum for its own rows.
// Each rank moves a padded N/R x D slice each way (BF16 out, FP32 back), whatever top-k is.
// The collectives run on the communicator's stream, ordered with the compute stream by events.
//
// Built only with CUDA (HYMOE_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "hymoe/engine/communicator.h"
#include "hymoe/engine/context_parallel.h"
#include "hymoe/engine/expert_stream.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/dtypes.h"
#include "hymoe/gpu/moe.h"

namespace hymoe {

class DslpMoe {
 public:
  // Buffers for ranks x max_local_rows rows, counted against budget (may be null).
  DslpMoe(const ModelConfig& config, const gpu::CublasLt& lt, int rank, int ranks, int64_t max_local_rows,
          gpu::MemoryBudget* budget);
  ~DslpMoe();
  DslpMoe(const DslpMoe&) = delete;
  DslpMoe& operator=(const DslpMoe&) = delete;

  // This rank's experts: [expert_begin(), expert_end()).
  int64_t expert_begin() const;
  int64_t expert_end() const;

  // route(all_x, rows, topk_ids, topk_weights, stream): the routing of the gathered rows
  // ([rows, hidden] BF16, rank r's rows at r * pad.., padding rows zero) into [rows, top_k]
  // device arrays, enqueued on stream (routed_scaling_factor applied).
  using Route = std::function<void(const gpu::Bf16* all_x, int64_t rows, int32_t* topk_ids, float* topk_weights,
                                   cudaStream_t stream)>;
  struct Params {
    const gpu::Bf16* x = nullptr;  // [local_rows, hidden]: this rank's rows
    int64_t local_rows = 0;
    int64_t pad = 0;               // the ranks' largest share (ZigzagStripes::max_local_rows)
    float* out = nullptr;          // [pad, hidden]: rows [0, local_rows) set to the routed sum
    // The rank's experts of this layer in its streamer's schedule from first_item on (SlpMoe's
    // Params), or resident on the device ([3][experts] views).
    size_t first_item = 0;
    const gpu::ExpertWeight* resident = nullptr;
  };
  // Every rank calls it together (comm: a device communicator, stream() non-null). Enqueues on
  // `stream` (SlpMoe's one host synchronisation for the expert offsets) and on comm's stream.
  SmallEpTraffic run(Communicator& comm, const Params& p, const Route& route, ExpertStreamer& streamer,
                     const ExpertRing& ring, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe
