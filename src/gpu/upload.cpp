#include "hymoe/gpu/upload.h"

#include "hymoe/common/error.h"
#include "hymoe/gpu/cuda_check.h"
#include "kernel_launch.h"

namespace hymoe::gpu {

void upload_inline(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  HYMOE_CHECK(dst && src, kInvalidArgument, "upload_inline: null pointer ({} bytes)", bytes);
  HYMOE_CUDA_CHECK(launch::upload_inline(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                                         bytes, stream));
}

void upload_mapped(void* dst, const void* pinned_src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  HYMOE_CHECK(dst && pinned_src, kInvalidArgument, "upload_mapped: null pointer ({} bytes)", bytes);
  void* mapped = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&mapped, const_cast<void*>(pinned_src), 0);
  if (err != cudaSuccess) (void)cudaGetLastError();
  HYMOE_CHECK(err == cudaSuccess, kInvalidArgument,
              "upload_mapped: the source ({} bytes) is not mapped page-locked host memory: {}", bytes,
              cudaGetErrorString(err));
  HYMOE_CUDA_CHECK(launch::upload_mapped(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(mapped),
                                         bytes, stream));
}

}  // namespace hymoe::gpu
