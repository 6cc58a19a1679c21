#include "hymoe/gpu/cuda_check.h"

#include <cublasLt.h>

#include "hymoe/gpu/cublaslt.h"

namespace hymoe::gpu {

ErrorKind cuda_error_kind(cudaError_t error) {
  switch (error) {
    case cudaErrorMemoryAllocation:
      return ErrorKind::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
      return ErrorKind::kUnavailable;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidConfiguration:
      return ErrorKind::kInvalidArgument;
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return ErrorKind::kUnsupported;
    default:
      return ErrorKind::kInternal;
  }
}

void throw_cuda_error(cudaError_t error, const char* expression, std::source_location where) {
  throw_error_at(where, cuda_error_kind(error), "CUDA call failed: {}: {} ({})", expression,
                 cudaGetErrorName(error), cudaGetErrorString(error));
}

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

void throw_cublas_error(int status, const char* expression, std::source_location where) {
  const auto s = static_cast<cublasStatus_t>(status);
  const ErrorKind kind = s == CUBLAS_STATUS_ALLOC_FAILED     ? ErrorKind::kResourceExhausted
                         : s == CUBLAS_STATUS_INVALID_VALUE  ? ErrorKind::kInvalidArgument
                         : s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH
                             ? ErrorKind::kUnsupported
                             : ErrorKind::kInternal;
  throw_error_at(where, kind, "cuBLASLt call failed: {}: {} ({})", expression,
                 cublas_status_name(s), status);
}

}  // namespace hymoe::gpu
