#include "bench_fill.h"

#include <cuda_bf16.h>

namespace hymoe::gpu::bench {
namespace {

__device__ __forceinline__ uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

__device__ __forceinline__ float unit(uint64_t h) {  // [0, 1)
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

__global__ void fill_fp8_kernel(uint8_t* dst, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    uint8_t code = static_cast<uint8_t>(mix(seed ^ (i * 0x9e3779b97f4a7c15ull)));
    if ((code & 0x7F) == 0x7F) code ^= 0x01;
    dst[i] = code;
  }
}

__global__ void fill_bf16_kernel(uint16_t* dst, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const float v = unit(mix(seed ^ (i * 0x9e3779b97f4a7c15ull))) * 2.0f - 1.0f;
    dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
}

__global__ void fill_f32_kernel(float* dst, size_t count, float lo, float hi, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = lo + (hi - lo) * unit(mix(seed ^ (i * 0x9e3779b97f4a7c15ull)));
}

__global__ void fill_i32_kernel(int32_t* dst, size_t count, int32_t bound, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = static_cast<int32_t>(mix(seed ^ (i * 0x9e3779b97f4a7c15ull)) % uint64_t(bound));
}

constexpr int kBlocks = 4096, kThreads = 256;

}  // namespace

cudaError_t fill_fp8(void* dst, size_t count, uint64_t seed, cudaStream_t stream) {
  fill_fp8_kernel<<<kBlocks, kThreads, 0, stream>>>(static_cast<uint8_t*>(dst), count, seed);
  return cudaGetLastError();
}

cudaError_t fill_bf16(void* dst, size_t count, uint64_t seed, cudaStream_t stream) {
  fill_bf16_kernel<<<kBlocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(dst), count, seed);
  return cudaGetLastError();
}

cudaError_t fill_f32(float* dst, size_t count, float lo, float hi, uint64_t seed,
                     cudaStream_t stream) {
  fill_f32_kernel<<<kBlocks, kThreads, 0, stream>>>(dst, count, lo, hi, seed);
  return cudaGetLastError();
}

cudaError_t fill_i32(int32_t* dst, size_t count, int32_t bound, uint64_t seed, cudaStream_t stream) {
  fill_i32_kernel<<<kBlocks, kThreads, 0, stream>>>(dst, count, bound, seed);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::bench

namespace hymoe::gpu::bench {
namespace {

// kPdl: launched as a programmatic dependent (PDL): lets the next launch start at once, reads its
// bytes, then waits for the previous kernel (griddepcontrol.wait) before writing out, as a PDL
// GEMV streams its weights early but writes its output after the wait.
template <bool kPdl>
__global__ void read_probe_kernel(const uint4* __restrict__ src, size_t n, uint32_t* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kPdl) asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
  uint32_t acc = 0;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {  // four loads in flight per thread
    const uint4 a = __ldcs(src + i), b = __ldcs(src + i + stride);
    const uint4 c = __ldcs(src + i + 2 * stride), d = __ldcs(src + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^
           d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(src + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kPdl) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  if (threadIdx.x % 32 == 0) atomicXor(out + blockIdx.x, acc);
}

__global__ void __launch_bounds__(128, 4) read_probe_gemv_tiles_kernel(const uint8_t* __restrict__ w, int n, int k,
                                                                       uint32_t* out) {
  constexpr int kWarps = 4, kUnroll = 4;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int row0 = static_cast<int>(blockIdx.x) * 16;
  const uint8_t* lo = w + int64_t{row0 + g < n ? row0 + g : 0} * k;
  const uint8_t* hi = w + int64_t{row0 + g + 8 < n ? row0 + g + 8 : 0} * k;
  const int blocks = k / 128;
  uint32_t acc = 0;
  for (int b0 = warp; b0 < blocks; b0 += kWarps * kUnroll) {
    uint4 v[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int col = (b0 + u * kWarps) * 128 + c * 16;
      const bool in = col < k;
      v[u][0] = in ? __ldcs(reinterpret_cast<const uint4*>(lo + col)) : make_uint4(0, 0, 0, 0);
      v[u][1] = in ? __ldcs(reinterpret_cast<const uint4*>(lo + col + 64)) : make_uint4(0, 0, 0, 0);
      v[u][2] = in ? __ldcs(reinterpret_cast<const uint4*>(hi + col)) : make_uint4(0, 0, 0, 0);
      v[u][3] = in ? __ldcs(reinterpret_cast<const uint4*>(hi + col + 64)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc ^= v[u][j].x ^ v[u][j].y ^ v[u][j].z ^ v[u][j].w;
  }
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) atomicXor(out + blockIdx.x, acc);
}

}  // namespace

cudaError_t read_probe_gemv_tiles(const void* w, int n, int k, uint32_t* out, cudaStream_t stream) {
  read_probe_gemv_tiles_kernel<<<(n + 15) / 16, 128, 0, stream>>>(static_cast<const uint8_t*>(w), n, k, out);
  return cudaGetLastError();
}

cudaError_t read_probe(const void* src, size_t bytes, uint32_t* out, int blocks,
                       cudaStream_t stream, bool pdl) {
  if (!pdl) {
    read_probe_kernel<false><<<blocks, 256, 0, stream>>>(static_cast<const uint4*>(src), bytes / 16, out);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(256);
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, read_probe_kernel<true>, static_cast<const uint4*>(src),
                            bytes / 16, out);
}

}  // namespace hymoe::gpu::bench
