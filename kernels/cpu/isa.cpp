#include "hymoe/kernels/isa.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <vector>

#include "hymoe/common/cpu_features.h"

namespace hymoe::kernels {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512bf16";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return f.avx2 && f.fma && f.f16c;
    case Isa::kAvx512: return f.avx512();
    // The BF16 decode also needs VBMI byte permutes (Zen 4, Sapphire Rapids; not Cooper Lake,
    // which falls back to the AVX-512 FP32 variant).
    case Isa::kAvx512Bf16: return f.avx512() && f.avx512_bf16 && f.avx512_vbmi;
  }
  return false;
}

std::span<const Isa> supported_isas() {
  static const std::vector<Isa> isas = [] {
    std::vector<Isa> v;
    for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16})
      if (isa_supported(i)) v.push_back(i);
    return v;
  }();
  return isas;
}

Isa best_isa() {
  static const Isa best = supported_isas().back();
  return best;
}

bool amx_usable() {
  static const bool usable = [] {
    const CpuFeatures& f = cpu_features();
    if (!f.amx_tile || !f.amx_bf16) return false;
    // Linux keeps the 8 KB tile data state off until a process asks for it.
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

}  // namespace hymoe::kernels
