// Launchers of the upload kernels (upload.h).
#include <algorithm>
#include <cstring>

#include "kernel_launch.h"
#include "upload.cuh"

namespace hymoe::gpu::launch {

cudaError_t upload_inline(unsigned char* dst, const unsigned char* src, size_t bytes, cudaStream_t stream) {
  kernels::InlineUploadParams p;
  for (size_t at = 0; at < bytes; at += kInlineUploadBytes) {
    const size_t n = std::min(kInlineUploadBytes, bytes - at);
    p.dst = dst + at;
    p.bytes = static_cast<uint32_t>(n);
    std::memcpy(p.data, src + at, n);
    kernels::upload_inline_kernel<<<1, 256, 0, stream>>>(p);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t upload_mapped(unsigned char* dst, const unsigned char* src, size_t bytes, cudaStream_t stream) {
  const bool vec = (reinterpret_cast<uintptr_t>(dst) % 16) == 0 && (reinterpret_cast<uintptr_t>(src) % 16) == 0;
  // Each thread's loads cross the bus: enough of them in flight to keep it busy.
  const auto blocks = static_cast<unsigned>(std::clamp<size_t>((bytes + 4095) / 4096, 1, 128));
  kernels::upload_mapped_kernel<<<blocks, 256, 0, stream>>>(dst, src, bytes, vec);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
