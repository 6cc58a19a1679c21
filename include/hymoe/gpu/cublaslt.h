// RAII cuBLASLt handle with its own device workspace (cuBLASLt needs one for split-K and
// block-scaled kernels; 32 MiB is enough for every algorithm we ask for on Hopper).
#pragma once

#include <cublasLt.h>

#include "hymoe/gpu/buffer.h"

namespace hymoe::gpu {

const char* cublas_status_name(cublasStatus_t status);

class CublasLt {
 public:
  static constexpr size_t kDefaultWorkspace = size_t{32} << 20;

  explicit CublasLt(size_t workspace_bytes = kDefaultWorkspace, MemoryBudget* budget = nullptr);
  ~CublasLt();
  CublasLt(CublasLt&& other) noexcept;
  CublasLt& operator=(CublasLt&&) = delete;
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  cublasLtHandle_t get() const { return handle_; }
  void* workspace() const { return workspace_.data(); }
  size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
};

}  // namespace hymoe::gpu
