// Uploads as kernels (hymoe/gpu/upload.h): from the launch's parameters, or from mapped pinned
// host memory over the bus.
#pragma once

#include <cstdint>

#include "hymoe/gpu/upload.h"

namespace hymoe::gpu::kernels {

struct InlineUploadParams {
  unsigned char* dst;
  uint32_t bytes;  // <= kInlineUploadBytes
  alignas(16) unsigned char data[kInlineUploadBytes];
};
static_assert(sizeof(InlineUploadParams) <= 4096, "kernel parameters are limited to 4 KB");

// One block; each thread copies bytes at its stride.
__global__ void upload_inline_kernel(const __grid_constant__ InlineUploadParams p) {
  for (uint32_t i = threadIdx.x; i < p.bytes; i += blockDim.x) p.dst[i] = p.data[i];
}

// Grid-stride; 16-byte words where dst and src are both 16-byte aligned (the caller says), the
// tail and unaligned cases byte by byte.
__global__ void upload_mapped_kernel(unsigned char* dst, const unsigned char* src, uint64_t bytes, bool vec) {
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  const uint64_t first = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  uint64_t done = 0;
  if (vec) {
    const uint64_t words = bytes / 16;
    auto* d = reinterpret_cast<uint4*>(dst);
    const auto* s = reinterpret_cast<const uint4*>(src);
    for (uint64_t i = first; i < words; i += stride) d[i] = s[i];
    done = words * 16;
  }
  for (uint64_t i = done + first; i < bytes; i += stride) dst[i] = src[i];
}

}  // namespace hymoe::gpu::kernels
