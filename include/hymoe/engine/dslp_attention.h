// Striped context-parallel MLA attention on the GPU (DSLP, issue 44): one rank's causal attention
// over a whole long prompt whose rows the ranks hold in zig-zag stripes (context_parallel.h),
// over device buffers. The ranks pass latent KV rows around the ring (576 values a token for
// DeepSeek-V3, not expanded keys); each rank expands every source's rows by kv_b (GpuLinear and
// mla_assemble_kv, as stream-loading prefill does) in windows of at most `window` keys and runs
// the tensor-core prefill kernel over each of ZigzagStripes::attention_blocks' blocks, the
// partial outputs merged by log-sum-exp (mla_merge_attention; a row gets at most a few merges).
// Exact up to those merges' BF16 rounding against one causal attention over the whole prompt.
//
// Streams: the communicator's own (the ring's send/recv) beside the caller's; a received source
// is attended after its transfer, and the caller's stream is ordered after the ring at the end.
//
// Built only with CUDA (HYMOE_HAVE_CUDA).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "hymoe/engine/communicator.h"
#include "hymoe/engine/context_parallel.h"
#include "hymoe/engine/gpu_model.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/dtypes.h"

namespace hymoe {

class DslpAttention {
 public:
  // Buffers for a rank's share of up to max_local_rows rows and windows of `window` keys
  // (80 KB a key for DeepSeek-V3), counted against budget (may be null). kUnsupported for
  // attention shapes other than DeepSeek-V3's (the prefill kernel's: nope 128, rope 64, v 128).
  DslpAttention(const ModelConfig& config, const gpu::CublasLt& lt, int64_t max_local_rows, int64_t window,
                gpu::MemoryBudget* budget);
  ~DslpAttention();
  DslpAttention(const DslpAttention&) = delete;
  DslpAttention& operator=(const DslpAttention&) = delete;

  // kv_sink(rows, source_rank, stream): every source's latent rows (this rank's first), in
  // source-local order (ZigzagStripes::row_of gives their prompt rows), valid on `stream` until
  // the call returns: the caller writes them into its KV pool, so that each rank ends holding the
  // whole prompt's KV. May be empty.
  using KvSink = std::function<void(const gpu::Bf16* rows, int source_rank, cudaStream_t stream)>;
  struct Params {
    const ZigzagStripes* stripes = nullptr;
    const gpu::Bf16* q = nullptr;       // [local_rows, heads, 192]: q_nope | q_pe, roped at the rows' positions
    const gpu::Bf16* latent = nullptr;  // [local_rows, lora + rope]: kv_a normed, k_pe roped (the KV pool's rows)
    const DevFp8* kv_b = nullptr;       // the layer's kv_b (GpuModelOptions::prefill_weights)
    float softmax_scale = 0.0f;
    gpu::Bf16* out = nullptr;           // [local_rows, heads, 128]
    KvSink kv_sink;
  };
  // Every rank calls it together (comm: a device communicator, stream() non-null).
  void run(Communicator& comm, const Params& p, cudaStream_t stream);

  // Latent bytes this rank received by the ring's passes in its last run (the traffic model:
  // (R - 1) x N/R x 1152 bytes a rank for DeepSeek-V3).
  size_t received_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hymoe
