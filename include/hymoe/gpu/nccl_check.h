// HYMOE_NCCL_CHECK(expr): an NCCL call whose failure raises hymoe::Error with file:line.
// Header-only so that only code that talks to NCCL includes nccl.h and links libnccl.
#pragma once

#include <nccl.h>

#include <source_location>

#include "hymoe/common/error.h"

namespace hymoe::gpu {

[[noreturn]] inline void throw_nccl_error(ncclResult_t result, const char* expression,
                                          std::source_location where) {
  const ErrorKind kind = result == ncclInvalidArgument || result == ncclInvalidUsage
                             ? ErrorKind::kInvalidArgument
                         : result == ncclSystemError || result == ncclRemoteError
                             ? ErrorKind::kUnavailable
                             : ErrorKind::kInternal;
  throw_error_at(where, kind, "NCCL call failed: {}: {} ({})", expression,
                 ncclGetErrorString(result), static_cast<int>(result));
}

}  // namespace hymoe::gpu

#define HYMOE_NCCL_CHECK(expr)                                                        \
  do {                                                                                \
    const ncclResult_t hymoe_nccl_status_ = (expr);                                   \
    if (hymoe_nccl_status_ != ncclSuccess) [[unlikely]] {                             \
      ::hymoe::gpu::throw_nccl_error(hymoe_nccl_status_, #expr,                       \
                                     std::source_location::current());                \
    }                                                                                 \
  } while (0)
