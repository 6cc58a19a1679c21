#include "hymoe/common/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace hymoe {
namespace {

uint64_t xgetbv0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

bool bit(uint32_t reg, int b) { return (reg >> b) & 1u; }

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  uint32_t eax, ebx, ecx, edx;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
    char id[13] = {};
    std::memcpy(id, &ebx, 4);
    std::memcpy(id + 4, &edx, 4);
    std::memcpy(id + 8, &ecx, 4);
    const std::string_view vendor(id, 12);
    if (vendor == "GenuineIntel") f.vendor = CpuVendor::kIntel;
    if (vendor == "AuthenticAMD") f.vendor = CpuVendor::kAmd;
  }
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = bit(ecx, 27);
  const bool fma = bit(ecx, 12), f16c = bit(ecx, 29), avx = bit(ecx, 28);
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;             // SSE + AVX state
  const bool os_avx512 = os_avx && (xcr0 & 0xE0) == 0xE0;  // opmask + ZMM_Hi256 + Hi16_ZMM
  const bool os_amx = (xcr0 & (3ull << 17)) == (3ull << 17);  // XTILECFG + XTILEDATA

  uint32_t max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const uint32_t ebx7 = ebx, ecx7 = ecx, edx7 = edx;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  const uint32_t eax71 = eax;

  f.fma = os_avx && avx && fma;
  f.f16c = os_avx && avx && f16c;
  f.avx2 = os_avx && avx && bit(ebx7, 5);
  f.avx512f = os_avx512 && bit(ebx7, 16);
  f.avx512dq = os_avx512 && bit(ebx7, 17);
  f.avx512bw = os_avx512 && bit(ebx7, 30);
  f.avx512vl = os_avx512 && bit(ebx7, 31);
  f.avx512_bf16 = os_avx512 && bit(eax71, 5);
  f.avx512_vbmi = os_avx512 && bit(ecx7, 1);
  f.amx_tile = os_amx && bit(edx7, 24);
  f.amx_bf16 = f.amx_tile && bit(edx7, 22);
  f.amx_int8 = f.amx_tile && bit(edx7, 25);
  return f;
}

void apply_feature_mask(CpuFeatures& f, std::string_view mask) {
  while (!mask.empty()) {
    auto comma = mask.find(',');
    std::string_view name = mask.substr(0, comma);
    mask = comma == std::string_view::npos ? std::string_view{} : mask.substr(comma + 1);
    if (name == "avx2") f.avx2 = false;
    if (name == "fma") f.fma = false;
    if (name == "avx512" || name == "avx512f") f.avx512f = false;
    if (name == "avx512_bf16") f.avx512_bf16 = false;
    if (name == "avx512_vbmi") f.avx512_vbmi = false;
    if (name == "amx" || name == "amx_bf16") f.amx_bf16 = false;
    if (name == "amx" || name == "amx_tile") f.amx_tile = false;
  }
  // Switching off a base feature switches off what builds on it.
  if (!f.avx512f) f.avx512bw = f.avx512vl = f.avx512dq = f.avx512_bf16 = f.avx512_vbmi = false;
  if (!f.amx_tile) f.amx_bf16 = f.amx_int8 = false;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f = detect_cpu_features();
    if (const char* mask = std::getenv("HYMOE_CPU_FEATURES_MASK")) apply_feature_mask(f, mask);
    return f;
  }();
  return features;
}

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_vbmi, "avx512_vbmi");
  add(amx_tile, "amx-tile");
  add(amx_bf16, "amx-bf16");
  add(amx_int8, "amx-int8");
  return s.empty() ? "baseline" : s;
}

}  // namespace hymoe
