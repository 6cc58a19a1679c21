// Tensor-core and async-copy building blocks shared by the mma.sync kernels (sm_80+ unless noted).
//   mma_16816      m16n8k16 BF16 x BF16 -> FP32, accumulating in place
//   mma_fp8_16832  m16n8k32 E4M3 x E4M3 -> FP32 (sm_89+), accumulating in place
//   ldmatrix_x4    four 8x8 BF16 matrices from shared memory (lane l: a row address of matrix
//                  l / 8), .trans variant for token-major operands used as B with k = token;
//                  stmatrix_x4 (sm_90) the inverse store, to a shared-state-space address
//   cp_async16     16-byte global -> shared copy, zero-filled when !valid (src then unread);
//                  cp_async16_shared: the same to a shared-state-space address;
//                  cp_async4_shared: 4 bytes
//   pack_bf16x2, fast_exp2: one-instruction conversions for softmax weights
// Fragment layouts (PTX ISA, m16n8k16), g = lane / 4, c = lane % 4:
//   A (row g / g+8, k 2c.. / 2c+8..), B (k 2c.. / 2c+8.., col g), C (row g / g+8, col 2c, 2c+1).
#pragma once

#include <cstdint>

namespace hymoe::gpu::kernels {

__device__ __forceinline__ void mma_16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                          uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// m16n8k32 E4M3 fragments (PTX ISA): A a0/a2 row g, a1/a3 row g + 8, bytes i at k 4c + i (a0, a1)
// and 16 + 4c + i (a2, a3); B b0 k 4c + i, b1 k 16 + 4c + i, col g; C as m16n8k16.
__device__ __forceinline__ void mma_fp8_16832(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                              uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // the launcher refuses devices below sm_89
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_addr) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row_addr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row_addr) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row_addr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// Four 8x8 b16 matrices to shared memory (sm_90+): register i of each thread holds its pair of
// matrix i (row lane / 4, columns 2 (lane % 4), + 1; low half first), lane l gives the shared
// address of row l % 8 of matrix l / 8 (16 contiguous bytes).
__device__ __forceinline__ void stmatrix_x4(uint32_t row_addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n"
               :: "r"(row_addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  (void)row_addr;
  (void)r;
  __trap();
#endif
}

// Two floats -> packed BF16x2 (round to nearest even, low half first): one cvt instruction.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// 2^x by the special-function unit (ex2.approx: ~2 ulp, -inf -> 0): for softmax weights that are
// rounded to BF16 next.
__device__ __forceinline__ float fast_exp2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(valid ? 16 : 0));
}
// The same to a shared-memory address (cvta'd already: the warp-specialised producer keeps one).
__device__ __forceinline__ void cp_async16_shared(uint32_t smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
               "r"(valid ? 16 : 0));
}
// 4 bytes (one float), zero-filled when !valid (the grouped kernel's block scales into its ring).
__device__ __forceinline__ void cp_async4_shared(uint32_t smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem), "l"(gmem),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight. A compiler memory
// barrier too: shared-memory reads of the landed bytes stay after it.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace hymoe::gpu::kernels
