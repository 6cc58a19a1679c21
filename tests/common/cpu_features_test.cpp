#include "hymoe/common/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace hymoe {
namespace {

TEST(CpuFeatures, ConsistentHierarchy) {
  CpuFeatures f = detect_cpu_features();
  // x86-64 machines we build for all have AVX2 in practice, but the rules must hold regardless.
  EXPECT_TRUE(!f.avx512_bf16 || f.avx512f);
  EXPECT_TRUE(!f.avx512_vbmi || f.avx512f);
  EXPECT_TRUE(!(f.avx512bw || f.avx512vl) || f.avx512f);
  EXPECT_TRUE(!f.amx_bf16 || f.amx_tile);
  EXPECT_FALSE(f.describe().empty());
  // The cached value equals a fresh read when no mask is set.
  if (!std::getenv("HYMOE_CPU_FEATURES_MASK")) {
    EXPECT_EQ(cpu_features().avx512f, f.avx512f);
    EXPECT_EQ(cpu_features().avx512_bf16, f.avx512_bf16);
    EXPECT_EQ(cpu_features().avx512_vbmi, f.avx512_vbmi);
  }
}

TEST(CpuFeatures, VbmiAgreesWithTheCompilerRuntime) {
  // GCC's own CPUID reading (it does not check the OS's ZMM state, so only where AVX-512 is on).
  const CpuFeatures f = detect_cpu_features();
  if (!f.avx512f) GTEST_SKIP() << "no AVX-512 on this machine";
  EXPECT_EQ(f.avx512_vbmi, __builtin_cpu_supports("avx512vbmi") != 0);
  EXPECT_EQ(f.avx512_bf16, __builtin_cpu_supports("avx512bf16") != 0);
  EXPECT_EQ(f.describe().find("avx512_vbmi") != std::string::npos, f.avx512_vbmi);
}

TEST(CpuFeatures, VendorAgreesWithTheCompilerRuntime) {
  const CpuFeatures f = detect_cpu_features();
  EXPECT_EQ(f.vendor == CpuVendor::kIntel, __builtin_cpu_is("intel") != 0);
  EXPECT_EQ(f.vendor == CpuVendor::kAmd, __builtin_cpu_is("amd") != 0);
}

CpuFeatures all_on() {
  CpuFeatures f;
  f.avx2 = f.fma = f.f16c = f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = true;
  f.avx512_bf16 = f.avx512_vbmi = f.amx_tile = f.amx_bf16 = f.amx_int8 = true;
  return f;
}

TEST(CpuFeatures, MaskSwitchesOffVbmiAlone) {
  CpuFeatures f = all_on();
  apply_feature_mask(f, "avx512_vbmi");
  EXPECT_FALSE(f.avx512_vbmi);
  EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512_bf16 && f.amx_bf16 && f.avx2);
  EXPECT_EQ(f.describe().find("avx512_vbmi"), std::string::npos);
}

TEST(CpuFeatures, MaskOfAvx512fSwitchesOffWhatBuildsOnIt) {
  CpuFeatures f = all_on();
  apply_feature_mask(f, "nonsense,avx512f");
  EXPECT_FALSE(f.avx512f || f.avx512bw || f.avx512vl || f.avx512dq || f.avx512_bf16 || f.avx512_vbmi);
  EXPECT_TRUE(f.avx2 && f.fma && f.amx_tile);
  CpuFeatures g = all_on();
  apply_feature_mask(g, "amx_tile,avx512_bf16");
  EXPECT_FALSE(g.amx_tile || g.amx_bf16 || g.amx_int8 || g.avx512_bf16);
  EXPECT_TRUE(g.avx512_vbmi && g.avx512f);
}

}  // namespace
}  // namespace hymoe
