// Scalar number formats used by checkpoints and kernels: FP8 E4M3FN, BF16, F16.
// These are the reference conversions; SIMD kernels are tested against them.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace hymoe {

// ---- FP8 E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinities; 0x7F and 0xFF are
// NaN; exponent 0 codes are subnormals (mantissa/8 * 2^-6); largest finite value 448 (0x7E).
inline constexpr float kFp8E4M3Max = 448.0f;

constexpr float fp8_e4m3_to_float(uint8_t code) {
  const int sign = code >> 7;
  const int exp = (code >> 3) & 0xF;
  const int mant = code & 0x7;
  float mag = 0.0f;
  if (exp == 0xF && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) {
    mag = static_cast<float>(mant) * 0.001953125f;  // mant * 2^-9
  } else {
    // (1 + mant/8) * 2^(exp-7), built without ldexp so it stays constexpr.
    float p = 1.0f;
    for (int e = exp - 7; e > 0; --e) p *= 2.0f;
    for (int e = exp - 7; e < 0; ++e) p *= 0.5f;
    mag = (1.0f + static_cast<float>(mant) * 0.125f) * p;
  }
  return sign ? -mag : mag;
}

// All 256 codes decoded, for table lookups in scalar code.
inline constexpr std::array<float, 256> kFp8E4M3Table = [] {
  std::array<float, 256> t{};
  for (int i = 0; i < 256; ++i) t[i] = fp8_e4m3_to_float(static_cast<uint8_t>(i));
  return t;
}();

// Round-to-nearest-even encode. Saturates: |x| beyond the largest finite value gives +-448
// (the quantiser scales into range, so saturation only meets rounding spill). NaN gives 0x7F.
inline uint8_t float_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  float a = std::fabs(x);
  if (a >= kFp8E4M3Max) return sign | 0x7E;
  if (a < 0.015625f) {  // below the smallest normal 2^-6: subnormal steps of 2^-9
    int q = static_cast<int>(std::nearbyint(a * 512.0f));
    return sign | static_cast<uint8_t>(q);  // q == 8 is exactly the smallest normal (0x08)
  }
  int e = 0;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;              // a = (2m) * 2^exp, 2m in [1, 2)
  int mant = static_cast<int>(std::nearbyint((2.0f * m - 1.0f) * 8.0f));
  if (mant == 8) {
    mant = 0;
    ++exp;
  }
  int field = exp + 7;
  if (field > 15 || (field == 15 && mant == 7)) return sign | 0x7E;
  return sign | static_cast<uint8_t>((field << 3) | mant);
}

// ---- BF16: the top 16 bits of an IEEE float.
constexpr float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Round-to-nearest-even; NaN stays NaN (quiet).
constexpr uint16_t float_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Rounds a float to the nearest BF16 value and back (what storing in BF16 does).
constexpr float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// ---- F16 (IEEE half).
constexpr float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3FFu) << 13;
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | (exp + 127 - 15) << 23 | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

// Round-to-nearest-even float -> IEEE half (overflow gives infinity, NaN stays NaN).
inline uint16_t float_to_f16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  float a = std::fabs(x);
  if (std::isnan(x)) return sign | 0x7E00;
  if (a >= 65520.0f) return sign | 0x7C00;
  if (a < 6.103515625e-05f) {  // subnormal half: steps of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  int e = 0;
  float m = std::frexp(a, &e);
  int exp = e - 1;
  int mant = static_cast<int>(std::nearbyint((2.0f * m - 1.0f) * 1024.0f));
  if (mant == 1024) {
    mant = 0;
    ++exp;
  }
  return sign | static_cast<uint16_t>(((exp + 15) << 10) | mant);
}

}  // namespace hymoe
