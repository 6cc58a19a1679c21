#include "hymoe/gpu/cublaslt.h"

#include <utility>

#include "hymoe/gpu/cuda_check.h"

namespace hymoe::gpu {

CublasLt::CublasLt(size_t workspace_bytes, MemoryBudget* budget)
    : workspace_(workspace_bytes, budget) {
  HYMOE_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLt::~CublasLt() {
  if (handle_) (void)cublasLtDestroy(handle_);
}

CublasLt::CublasLt(CublasLt&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), workspace_(std::move(other.workspace_)) {}

}  // namespace hymoe::gpu
