// The FP8 GEMV variants the kernel tests run: every ISA's of this machine, the AMX one where it
// runs, and the AVX512-BF16 one given the matrix's special codes (its shift decode), with its
// batch-1 rows in turn (GemvPrefetch::row_blocks, row_streams) under both decodes.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "hymoe/kernels/fp8_gemv.h"
#include "hymoe/kernels/fp8_special_codes.h"

namespace hymoe::test {

struct GemvVariant {
  std::optional<kernels::Isa> isa;  // nullopt: the AMX variant
  bool shifts = false;
  // GemvPrefetch::row_blocks and row_streams for the call, then the setting before it again.
  int row_blocks = 0;
  int row_streams = 1;

  void run(const kernels::Fp8GemvParams& p) const {
    if (!isa) return kernels::fp8_gemv_amx(p);
    const kernels::GemvPrefetch saved = kernels::gemv_prefetch();
    kernels::GemvPrefetch setting = saved;
    setting.row_blocks = row_blocks;
    setting.row_streams = row_streams;
    kernels::set_gemv_prefetch(setting);
    kernels::Fp8GemvParams q = p;
    Fp8SpecialCodes specials;
    if (shifts) {
      specials = kernels::find_fp8_special_codes(p.w);
      q.w.specials = &specials;
    }
    kernels::fp8_gemv(*isa, q);
    kernels::set_gemv_prefetch(saved);
  }
  std::string name() const {
    if (!isa) return "amx";
    return std::string(kernels::isa_name(*isa)) + (shifts ? "_shifts" : "") +
           (row_blocks ? "_rows" + std::to_string(row_blocks) + "x" + std::to_string(row_streams) : "");
  }
};

// gtest prints a variant by its name.
inline void PrintTo(const GemvVariant& v, std::ostream* os) { *os << v.name(); }

inline std::vector<GemvVariant> gemv_variants() {
  using kernels::Isa;
  std::vector<GemvVariant> v;
  for (const Isa isa : kernels::supported_isas()) v.push_back({isa});
  if (kernels::fp8_gemv_amx_supported()) v.push_back({std::nullopt});
  if (kernels::isa_supported(Isa::kAvx512Bf16)) {
    v.push_back({Isa::kAvx512Bf16, true});
    // Each (blocks, streams) pair once under each decode.
    for (const auto& [blocks, streams] : {std::pair{4, 1}, {8, 1}, {4, 2}, {2, 4}}) {
      v.push_back({Isa::kAvx512Bf16, false, blocks, streams});
      v.push_back({Isa::kAvx512Bf16, true, blocks, streams});
    }
  }
  return v;
}

}  // namespace hymoe::test
