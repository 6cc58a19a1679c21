// CPU instruction-set variants of the kernels and the runtime choice between them.
// Every kernel family is compiled once per variant, each in its own translation unit with its own
// -m flags; a variant is only called where cpu_features() says the machine can run it.
#pragma once

#include <span>
#include <string_view>

namespace hymoe::kernels {

enum class Isa {
  kScalar,      // plain C++, no -m flags beyond the baseline: runs anywhere
  kAvx2,        // AVX2 + FMA + F16C
  kAvx512,      // AVX-512 F/BW/VL/DQ without BF16 dot products
  kAvx512Bf16,  // AVX-512 with vdpbf16ps (Zen 4, Cooper Lake, Sapphire Rapids, ...)
};

std::string_view isa_name(Isa isa);

// True when this machine (cpu_features(), mask applied) can execute the variant.
bool isa_supported(Isa isa);

// The fastest supported variant (what the dispatching entry points use).
Isa best_isa();

// Every variant this machine can execute, fastest last (what tests iterate over).
std::span<const Isa> supported_isas();

// True when the CPU has AMX-BF16 tiles and the OS granted this process the tile state
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), requested once on first call).
bool amx_usable();

}  // namespace hymoe::kernels
