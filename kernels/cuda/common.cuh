// Device helpers shared by the kernels: BF16/FP8 conversions, 16-byte vectors, warp and block
// reductions. Header-only device code; every kernel .cuh includes it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace hymoe::gpu::kernels {

inline constexpr int kWarpSize = 32;

__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// Round-to-nearest-even, NaN preserved (same as hymoe::float_to_bf16 on the host).
__device__ __forceinline__ uint16_t float_to_bf16_bits(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

__device__ __forceinline__ float round_bf16(float x) {
  return bf16_bits_to_float(float_to_bf16_bits(x));
}

// float -> FP8 E4M3FN, round-to-nearest-even, saturating to +-448 (NaN stays NaN).
__device__ __forceinline__ uint8_t float_to_fp8_bits(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds >= 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

// Eight BF16 values in one 16-byte load/store.
struct alignas(16) Bf16x8 {
  uint16_t v[8];
};

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// The tensor-core GEMVs' 16-row tiles (fp8_gemv_mma.cuh, fp8_gemv_q8*.cuh): a warp's m16n8 C
// fragment (rows g and g + 8, tokens 2c and 2c + 1 of lane (g, c)) into part `part` of red
// ([parts][16 rows][8 tokens] in shared memory) ...
__device__ __forceinline__ void store_gemv_fragment(float (*red)[16][8], int part, int g, int c,
                                                    const float (&acc)[4]) {
  red[part][g][2 * c] = acc[0];
  red[part][g][2 * c + 1] = acc[1];
  red[part][g + 8][2 * c] = acc[2];
  red[part][g + 8][2 * c + 1] = acc[3];
}
// ... and, after a block barrier, threads 0..127 add parts 0..kParts-1 in order and store rows
// row0 + r < n of tokens t < tokens as BF16 into y[t * ldy + row0 + r] (or as FP32 into
// y_f32[t * ldy + row0 + r] when y_f32 is set).
template <int kParts>
__device__ __forceinline__ void store_gemv_tile_sums(const float (*red)[16][8], void* y, int64_t ldy, int row0,
                                                     int n, int tokens, float* y_f32 = nullptr) {
  if (threadIdx.x < 128) {
    const int r = threadIdx.x / 8, t = threadIdx.x % 8;
    if (row0 + r < n && t < tokens) {
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kParts; ++j) sum += red[j][r][t];
      if (y_f32) {
        y_f32[t * ldy + row0 + r] = sum;
      } else {
        static_cast<uint16_t*>(y)[t * ldy + row0 + r] = float_to_bf16_bits(sum);
      }
    }
  }
}

}  // namespace hymoe::gpu::kernels
