#include "hymoe/engine/gpu_linear.h"

#include "hymoe/common/error.h"
#include "hymoe/gpu/fp8_quant.h"

namespace hymoe {

GpuLinear::GpuLinear(const gpu::CublasLt& lt, int64_t max_tokens, int64_t max_k, gpu::MemoryBudget* budget)
    : lt_(lt), max_tokens_(max_tokens), max_k_(max_k) {
  HYMOE_CHECK(max_tokens >= 1 && max_k >= 16 && max_k % 16 == 0, kInvalidArgument,
              "GPU linear: {} tokens, {} columns (a multiple of 16)", max_tokens, max_k);
  xq_ = gpu::DeviceBuffer(static_cast<size_t>(max_tokens * max_k), budget);
  xq_scales_ = gpu::DeviceBuffer(static_cast<size_t>((max_k + 127) / 128 * max_tokens) * sizeof(float), budget);
}

void GpuLinear::run(const DevFp8& w, const gpu::Bf16* x, int64_t ldx, int64_t tokens, gpu::Bf16* y, int64_t ldy,
                    cudaStream_t stream) {
  HYMOE_CHECK(tokens >= 1 && tokens <= max_tokens_ && w.k <= max_k_ && ldx >= w.k && ldy >= w.n, kInvalidArgument,
              "GPU linear: {} tokens (1..{}), k {} (<= {}), ldx {}, ldy {} for a {}x{} matrix", tokens, max_tokens_, w.k,
              max_k_, ldx, ldy, w.n, w.k);
  const int m = static_cast<int>(tokens);
  // A's scales token-fastest with scale_ld = m, as the GEMM reads them (gemm.h).
  gpu::quantize_fp8_per_token_block({.x = x, .out = xq_.as<gpu::Fp8E4M3>(), .scales = xq_scales_.as<float>(),
                                     .tokens = m, .cols = w.k, .x_stride = ldx, .out_stride = w.k, .scale_ld = m},
                                    stream);
  const auto key = std::make_tuple(m, w.n, w.k, int64_t{w.k}, ldy);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    const gpu::GemmShape shape{.m = m, .n = w.n, .k = w.k, .lda = w.k, .ldb = w.k, .ldd = ldy};
    it = plans_.emplace(key, gpu::GemmPlan(lt_, gpu::GemmKind::kFp8BlockScale, shape)).first;
  }
  it->second.run({.a = xq_.data(), .a_scale = xq_scales_.as<float>(), .b = w.data.data(), .b_scale = w.gemm_scale_data(),
                  .d = y},
                 stream);
}

}  // namespace hymoe
