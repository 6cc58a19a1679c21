// The loops of the random weight generator (internal to hymoe_model), built per ISA.
// Every variant gives bit-identical results: integer hashing, and float arithmetic without
// contraction (ISO C++ mode has -ffp-contract=off), so a checkpoint is the same on every machine.
#pragma once

#include <bit>
#include <cstdint>

namespace hymoe {

// murmur3's 32-bit finaliser: a bijection that mixes every input bit into every output bit.
inline uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// Counter-based stream keyed by (k0, k1): 32 random bits for counter i, with no dependency from
// one element to the next (so loops over it vectorise).
inline uint32_t keyed_bits(uint32_t i, uint32_t k0, uint32_t k1) { return fmix32(fmix32(i ^ k0) ^ k1); }

// Approximately standard normal: the sum of four 16-bit uniforms, centred and scaled to unit
// variance (Irwin-Hall; plenty for random weights).
inline float normal_from_bits(uint32_t a, uint32_t b) {
  const uint32_t s = (a & 0xFFFFu) + (a >> 16) + (b & 0xFFFFu) + (b >> 16);
  constexpr float kMean = 131070.0f;            // 4 * 32767.5
  constexpr float kInvStd = 1.0f / 37837.23f;   // 1 / sqrt(4 * (65536^2 - 1) / 12)
  return (static_cast<float>(static_cast<int32_t>(s)) - kMean) * kInvStd;
}

// Branch-free float -> E4M3FN: round to nearest even, saturating at +-448 (NaN not expected).
inline uint8_t encode_e4m3_branchless(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  u &= 0x7FFFFFFFu;
  const uint32_t r = u + 0x7FFFFu + ((u >> 20) & 1u);  // round the mantissa to 3 bits
  const uint32_t normal = (((r >> 23) - 120u) << 3) | ((r >> 20) & 7u);
  // Below 2^-6: steps of 2^-9; adding 2^23 rounds a*512 to an integer (ties to even).
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(u) * 512.0f + 8388608.0f) -
                       0x4B000000u;
  // Selects as masks rather than ?: so that GCC vectorises the loops that call this.
  const uint32_t is_sub = 0u - static_cast<uint32_t>(u < 0x3C800000u);
  const uint32_t is_sat = 0u - static_cast<uint32_t>(u >= 0x43E00000u);
  const uint32_t code = (sub & is_sub) | (normal & ~is_sub);
  return static_cast<uint8_t>(sign | (0x7Eu & is_sat) | (code & ~is_sat));
}

// One ISA's build of the loops.
struct RandomKernels {
  const char* isa;
  // out[i] = mean + std_dev * N(0,1) for i < n; element i uses counters 2(first+i), 2(first+i)+1
  // of the stream keyed by seed's two halves.
  void (*normal_fill)(float* out, int64_t n, uint64_t seed, int64_t first, float mean, float std_dev);
  // max(m, bits of |x[i]|): for finite floats the magnitude bits order like the values.
  uint32_t (*abs_max_bits)(const float* x, int64_t n, uint32_t m);
  // out[i] = e4m3(x[i] * inv_scale)
  void (*encode_scaled)(const float* x, int64_t n, float inv_scale, uint8_t* out);
  // out[i] = bf16(x[i]), round to nearest even
  void (*to_bf16)(const float* x, int64_t n, uint16_t* out);
};

// The AVX2 build when `avx2` (the CPU must have it), else the baseline x86-64 one.
const RandomKernels& random_kernels(bool avx2);

}  // namespace hymoe
