#include "hymoe/common/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace hymoe {
namespace {

TEST(CpuFeatures, ConsistentHierarchy) {
  CpuFeatures f = detect_cpu_features();
  // x86-64 machines we build for all have AVX2 in practice, but the rules must hold regardless.
  EXPECT_TRUE(!f.avx512_bf16 || f.avx512f);
  EXPECT_TRUE(!(f.avx512bw || f.avx512vl) || f.avx512f);
  EXPECT_TRUE(!f.amx_bf16 || f.amx_tile);
  EXPECT_FALSE(f.describe().empty());
  // The cached value equals a fresh read when no mask is set.
  if (!std::getenv("HYMOE_CPU_FEATURES_MASK")) {
    EXPECT_EQ(cpu_features().avx512f, f.avx512f);
    EXPECT_EQ(cpu_features().avx512_bf16, f.avx512_bf16);
  }
}

}  // namespace
}  // namespace hymoe
