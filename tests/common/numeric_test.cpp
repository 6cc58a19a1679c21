#include "hymoe/common/numeric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace hymoe {
namespace {

TEST(Fp8E4M3, KnownCodes) {
  EXPECT_EQ(fp8_e4m3_to_float(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_float(0x80)));
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);           // exp 7, mant 0
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.0f);         // largest finite
  EXPECT_EQ(fp8_e4m3_to_float(0xFE), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_float(0x07), 7.0f * std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xFF)));
}

TEST(Fp8E4M3, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;  // NaN
    float v = kFp8E4M3Table[c];
    EXPECT_EQ(float_to_fp8_e4m3(v), static_cast<uint8_t>(c)) << "code " << c << " value " << v;
  }
  EXPECT_EQ(float_to_fp8_e4m3(NAN) & 0x7F, 0x7F);
}

TEST(Fp8E4M3, EncodeRoundsToNearestEvenAndSaturates) {
  // Between 1.0 (0x38) and 1.125 (0x39): the midpoint goes to the even mantissa (1.0).
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3(1.0626f), 0x39);
  EXPECT_EQ(float_to_fp8_e4m3(1000.0f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(-1e9f), 0xFE);
  // Random values: the encoded value is the nearest representable one.
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> u(-500.0f, 500.0f);
  for (int i = 0; i < 20000; ++i) {
    float x = u(rng) * std::ldexp(1.0f, -static_cast<int>(rng() % 16));
    float got = fp8_e4m3_to_float(float_to_fp8_e4m3(x));
    float best = INFINITY;
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7F) == 0x7F) continue;
      best = std::min(best, std::fabs(kFp8E4M3Table[c] - x));
    }
    EXPECT_EQ(std::fabs(got - x), best) << x;
  }
}

TEST(Bf16, RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), float_to_bf16(1.0f));  // tie to even
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 10.0f);
  for (int i = 0; i < 10000; ++i) {
    float x = n(rng);
    float r = round_to_bf16(x);
    EXPECT_LE(std::fabs(r - x), std::fabs(x) * std::ldexp(1.0f, -8)) << x;
  }
}

TEST(F16, RoundTripNormalsAndSubnormals) {
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    float f = f16_to_float(static_cast<uint16_t>(h));
    ASSERT_EQ(float_to_f16(f), h) << h;
    ASSERT_EQ(float_to_f16(-f), h | 0x8000) << h;
  }
  EXPECT_EQ(f16_to_float(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_float(0x7C00)));
}

}  // namespace
}  // namespace hymoe
