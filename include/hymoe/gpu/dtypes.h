// Element types of device tensors, as plain 1- and 2-byte values so host code (tests, the engine)
// needs no CUDA math headers. Layout-compatible with __nv_bfloat16 and __nv_fp8_e4m3; the device
// code reinterprets them. Convert on the host with hymoe/common/numeric.h.
#pragma once

#include <cstdint>

#include "hymoe/common/numeric.h"

namespace hymoe::gpu {

struct Bf16 {
  uint16_t bits;
  static Bf16 from_float(float x) { return Bf16{float_to_bf16(x)}; }
  float to_float() const { return bf16_to_float(bits); }
};

struct Fp8E4M3 {
  uint8_t bits;
  static Fp8E4M3 from_float(float x) { return Fp8E4M3{float_to_fp8_e4m3(x)}; }
  float to_float() const { return fp8_e4m3_to_float(bits); }
};

static_assert(sizeof(Bf16) == 2 && alignof(Bf16) == 2);
static_assert(sizeof(Fp8E4M3) == 1);

}  // namespace hymoe::gpu
