// FP8 block-scaled GEMM for CPU prefill (tens to thousands of tokens):
//   C[m][n] = sum_k X[m][k] * W[n][k]   (X BF16 [M, K] row-major, W an Fp8MatrixView [N, K], C FP32)
// W is decoded per 128x128 block into a small per-call BF16 panel (L1/L2 sized, never a copy of
// the matrix) and multiplied with AVX512-BF16 dot products or AMX-BF16 tiles; each block's product
// is post-scaled by its scale_inv.
#pragma once

#include <cstdint>

#include "hymoe/kernels/isa.h"
#include "hymoe/kernels/fp8_matrix.h"

namespace hymoe::kernels {

// Computes output columns [n_begin, n_end) of C for all M rows (callers split N across threads).
struct Fp8GemmParams {
  Fp8MatrixView w;                  // [N, K]
  const uint16_t* x = nullptr;  // BF16 [M, x_stride], x_stride >= K
  int64_t x_stride = 0;
  int64_t m = 0;                // tokens
  float* c = nullptr;           // FP32 [M, c_stride], c_stride >= N; columns outside the range untouched
  int64_t c_stride = 0;
  int64_t n_begin = 0;          // multiple of 32
  int64_t n_end = 0;            // multiple of 32, or N
};

enum class GemmImpl {
  kReference,   // scalar, double accumulation
  kAvx512Bf16,  // vdpbf16ps micro-kernel 8 x 32
  kAmxBf16,     // AMX tiles 32 x 32 (Sapphire Rapids and later)
};

// The fastest implementation this machine can run (AMX > AVX512-BF16 > reference).
GemmImpl best_gemm_impl();
bool gemm_impl_supported(GemmImpl impl);
const char* gemm_impl_name(GemmImpl impl);

// Throws hymoe::Error (kInvalidArgument) naming the bad field.
void validate(const Fp8GemmParams& p);
// The AMX GEMM's compute ceiling for benchmarks: a register-only loop of four independent 16 x 16
// x 32 tdpbf16ps per step, iters steps, in the kernel's tile configuration; returns the FLOPs done
// (time it). Needs gemm_impl_supported(GemmImpl::kAmxBf16).
double amx_peak_loop_flops(int64_t iters);
void fp8_gemm(GemmImpl impl, const Fp8GemmParams& p);
inline void fp8_gemm(const Fp8GemmParams& p) { fp8_gemm(best_gemm_impl(), p); }

}  // namespace hymoe::kernels
