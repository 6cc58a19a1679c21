#include "hymoe/engine/gpu_head.h"

#include <algorithm>
#include <cstring>

#include "hymoe/common/error.h"
#include "hymoe/engine/gpu_model.h"
#include "hymoe/gpu/layer_kernels.h"

namespace hymoe {

GpuHead::GpuHead(const GpuModel& model, gpu::MemoryBudget* budget) : model_(model) {
  const auto rows = static_cast<size_t>(gpu::kDenseGemvMaxTokens);
  const auto hidden = static_cast<size_t>(model.config().hidden_size), vocab = static_cast<size_t>(model.config().vocab_size);
  x_bf16_ = gpu::DeviceBuffer(rows * hidden * 2, budget);
  x_f32_ = gpu::DeviceBuffer(rows * hidden * 4, budget);
  logits_ = gpu::DeviceBuffer(rows * vocab * 4, budget);
  h_logits_ = gpu::PinnedBuffer(rows * vocab * 4);
}

void GpuHead::run(const float* h, std::span<const int64_t> rows, std::span<float> logits, gpu::Stream& stream) {
  const ModelConfig& c = model_.config();
  const int64_t hidden = c.hidden_size, vocab = c.vocab_size, R = static_cast<int64_t>(rows.size());
  HYMOE_CHECK(static_cast<int64_t>(logits.size()) == R * vocab, kInternal, "GPU head: {} logits for {} rows of {}",
              logits.size(), R, vocab);
  for (int64_t r0 = 0; r0 < R; r0 += gpu::kDenseGemvMaxTokens) {
    const int64_t n = std::min<int64_t>(gpu::kDenseGemvMaxTokens, R - r0);
    for (int64_t r = 0; r < n; ++r) {
      // The BF16 output is unused; the FP32 one is the lm_head's input.
      gpu::rmsnorm_f32({.x = h + rows[static_cast<size_t>(r0 + r)] * hidden, .weight = model_.final_norm().as<float>(),
                        .out = x_bf16_.as<gpu::Bf16>() + r * hidden, .out_f32 = x_f32_.as<float>() + r * hidden, .rows = 1,
                        .cols = static_cast<int>(hidden), .eps = static_cast<float>(c.rms_norm_eps)},
                       stream);
    }
    gpu::dense_gemv_f32({.w = model_.lm_head().as<gpu::Bf16>(), .x = x_f32_.as<float>(), .y = logits_.as<float>(),
                         .tokens = static_cast<int>(n), .n = static_cast<int>(vocab), .k = static_cast<int>(hidden),
                         .ldy = vocab},
                        stream);
    logits_.copy_to_host(h_logits_.data(), static_cast<size_t>(n * vocab) * 4, stream);
    stream.synchronize();
    std::memcpy(logits.data() + r0 * vocab, h_logits_.data(), static_cast<size_t>(n * vocab) * 4);
  }
  stream.synchronize();
}

}  // namespace hymoe
