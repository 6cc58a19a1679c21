// The model's head on the GPU, shared by the GPU executors: the final norm of the rows that
// produce logits (FP32 residual rows), lm_head as FP32 dense GEMVs of up to
// gpu::kDenseGemvMaxTokens rows a launch (a row's logits do not depend on the rows beside it),
// the logits copied to the host through pinned memory.
//
// Built only with CUDA (HYMOE_HAVE_CUDA). Not thread-safe: one per executor.
#pragma once

#include <cstdint>
#include <span>

#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/stream.h"

namespace hymoe {

class GpuModel;

class GpuHead {
 public:
  // Its buffers counted against budget (may be null).
  GpuHead(const GpuModel& model, gpu::MemoryBudget* budget);

  // logits[i] (vocab values) = lm_head(final_norm(h row rows[i])) for every i; h: [*, hidden]
  // FP32 on the device. Enqueued on `stream` after the work already there; returns when the
  // logits are on the host (the stream is synchronised).
  void run(const float* h, std::span<const int64_t> rows, std::span<float> logits, gpu::Stream& stream);

 private:
  const GpuModel& model_;
  gpu::DeviceBuffer x_bf16_, x_f32_, logits_;
  gpu::PinnedBuffer h_logits_;
};

}  // namespace hymoe
