// Checked calls into the CUDA runtime and cuBLASLt. A failure raises hymoe::Error with the failed
// expression, the library's own error name and the file:line of the call site.
//   HYMOE_CUDA_CHECK(cudaMemcpyAsync(...));
//   kernel<<<grid, block, 0, stream>>>(params); HYMOE_CUDA_CHECK_LAUNCH();
//   HYMOE_CUBLAS_CHECK(cublasLtMatmul(...));
// NCCL has its own header (nccl_check.h) so that code without NCCL never includes nccl.h.
#pragma once

#include <cuda_runtime_api.h>

#include <source_location>

#include "hymoe/common/error.h"

namespace hymoe::gpu {

// The ErrorKind a CUDA runtime error maps to: out of memory -> kResourceExhausted,
// no device / driver -> kUnavailable, invalid arguments -> kInvalidArgument, the rest kInternal.
ErrorKind cuda_error_kind(cudaError_t error);

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* expression,
                                   std::source_location where);
// status is a cublasStatus_t (0 is success); taken as int so this header needs no cuBLAS.
[[noreturn]] void throw_cublas_error(int status, const char* expression,
                                     std::source_location where);

}  // namespace hymoe::gpu

#define HYMOE_CUDA_CHECK(expr)                                                        \
  do {                                                                                \
    const cudaError_t hymoe_cuda_status_ = (expr);                                    \
    if (hymoe_cuda_status_ != cudaSuccess) [[unlikely]] {                             \
      ::hymoe::gpu::throw_cuda_error(hymoe_cuda_status_, #expr,                       \
                                     std::source_location::current());                \
    }                                                                                 \
  } while (0)

// After a kernel launch: raises the launch error (bad configuration, missing image for this GPU).
#define HYMOE_CUDA_CHECK_LAUNCH() HYMOE_CUDA_CHECK(cudaGetLastError())

#define HYMOE_CUBLAS_CHECK(expr)                                                      \
  do {                                                                                \
    const int hymoe_cublas_status_ = static_cast<int>(expr);                          \
    if (hymoe_cublas_status_ != 0) [[unlikely]] {                                     \
      ::hymoe::gpu::throw_cublas_error(hymoe_cublas_status_, #expr,                   \
                                       std::source_location::current());              \
    }                                                                                 \
  } while (0)
