// Internal: the per-ISA entry points behind the dispatching functions of include/hymoe/kernels/.
// Each *_<isa>.cpp file is compiled with that ISA's -m flags and defines only its own functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hymoe/kernels/fp8_gemm.h"
#include "hymoe/kernels/fp8_gemv.h"

namespace hymoe::kernels::detail {

void fp8_gemv_scalar(const Fp8GemvParams& p);
void fp8_gemv_avx2(const Fp8GemvParams& p);
void fp8_gemv_avx512(const Fp8GemvParams& p);
void fp8_gemv_avx512bf16(const Fp8GemvParams& p);

void fp8_to_bf16_scalar(const uint8_t* src, uint16_t* dst, size_t n);
void fp8_to_bf16_avx2(const uint8_t* src, uint16_t* dst, size_t n);
void fp8_to_bf16_avx512(const uint8_t* src, uint16_t* dst, size_t n);
void fp8_to_bf16_avx512bf16(const uint8_t* src, uint16_t* dst, size_t n);

void fp8_gemm_reference(const Fp8GemmParams& p);
void fp8_gemm_avx512bf16(const Fp8GemmParams& p);
void fp8_gemm_amx(const Fp8GemmParams& p);

// The GEMV row-group height for a batch size: more rows per pass at small batches keeps several
// weight streams in flight while the accumulators still fit in registers (R * B <= 8).
constexpr int gemv_rows_per_pass(int batch) { return batch <= 2 ? 4 : batch <= 4 ? 2 : 1; }

}  // namespace hymoe::kernels::detail
