// Prompt-sized linear layers on the GPU (SLP's projections and shared expert): y [T, n] BF16 =
// x [T, k] BF16 times a resident FP8 matrix (DevFp8) transposed, the activations quantised to FP8
// in 1 x 128 blocks (DeepSeek-V3's recipe) and multiplied by the block-scaled GEMM (gemm.h:
// cuBLASLt where it has an algorithm, hymoe's kernels elsewhere). One GemmPlan per (matrix shape,
// row count), built on first use and kept. Decode-sized rows stay on the FP8 GEMV (fp8_gemv.h).
//
// Built only with CUDA (HYMOE_HAVE_CUDA). Not thread-safe: one per stream.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>

#include "hymoe/engine/gpu_model.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/gemm.h"

namespace hymoe {

class GpuLinear {
 public:
  // Scratch for up to max_tokens rows of up to max_k columns, counted against budget (may be null).
  GpuLinear(const gpu::CublasLt& lt, int64_t max_tokens, int64_t max_k, gpu::MemoryBudget* budget);

  // y[t] = W x[t] for t < tokens (1..max_tokens); x rows at x + t * ldx (ldx >= w.k, a multiple of
  // 8), y rows at y + t * ldy (ldy >= w.n). Enqueued on stream.
  void run(const DevFp8& w, const gpu::Bf16* x, int64_t ldx, int64_t tokens, gpu::Bf16* y, int64_t ldy,
           cudaStream_t stream);

  int64_t max_tokens() const { return max_tokens_; }

 private:
  const gpu::CublasLt& lt_;
  int64_t max_tokens_, max_k_;
  gpu::DeviceBuffer xq_, xq_scales_;
  std::map<std::tuple<int, int, int, int64_t, int64_t>, gpu::GemmPlan> plans_;  // (m, n, k, lda, ldd)
};

}  // namespace hymoe
