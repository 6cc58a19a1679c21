// What the CPU we run on can do, read once from CPUID and XGETBV (instruction set and OS state
// support both). Kernels pick their variant from this at start-up.
#pragma once

#include <string>
#include <string_view>

namespace hymoe {

enum class CpuVendor { kOther, kIntel, kAmd };

struct CpuFeatures {
  CpuVendor vendor = CpuVendor::kOther;  // CPUID leaf 0: GenuineIntel, AuthenticAMD
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;  // vdpbf16ps, vcvtne2ps2bf16
  bool avx512_vbmi = false;  // vpermb, vpermi2b / vpermt2b (byte permutes: the FP8 -> BF16 decode)
  bool amx_tile = false;     // CPU has AMX tiles and the OS saves their state (XCR0 bits 17/18)
  bool amx_bf16 = false;
  bool amx_int8 = false;

  // All of AVX-512 F/BW/VL/DQ with OS support for ZMM state.
  bool avx512() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  // "avx2 fma avx512f ... amx-bf16": the flags that are set, for logs.
  std::string describe() const;
};

// Detected once, then cached. HYMOE_CPU_FEATURES_MASK (debug only) may switch features off by
// name, comma separated, e.g. "avx512_bf16,amx_bf16", to test fallbacks on a capable machine
// (see apply_feature_mask).
const CpuFeatures& cpu_features();

// Reads the CPU directly, ignoring the cache and the mask.
CpuFeatures detect_cpu_features();

// What HYMOE_CPU_FEATURES_MASK does to the detected features: each name switches its flag off
// (avx2, fma, avx512 or avx512f, avx512_bf16, avx512_vbmi, amx, amx_tile, amx_bf16; unknown names
// are ignored), and a base feature off switches off what builds on it (avx512f: the other AVX-512
// flags; amx_tile: the AMX ones).
void apply_feature_mask(CpuFeatures& f, std::string_view mask);

}  // namespace hymoe
