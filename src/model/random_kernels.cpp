// Each loop body is written once (always inlined) and instantiated for baseline x86-64 and AVX2.
#include "random_kernels.h"

#include "hymoe/common/numeric.h"

namespace hymoe {
namespace {

#define HYMOE_INLINE inline __attribute__((always_inline))

HYMOE_INLINE void normal_fill_body(float* out, int64_t n, uint64_t seed, int64_t first, float mean,
                                   float std_dev) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const uint32_t base = static_cast<uint32_t>(first) * 2u;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t c = base + static_cast<uint32_t>(i) * 2u;
    out[i] = mean + std_dev * normal_from_bits(keyed_bits(c, k0, k1), keyed_bits(c + 1u, k0, k1));
  }
}

HYMOE_INLINE uint32_t abs_max_bits_body(const float* x, int64_t n, uint32_t m) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = std::bit_cast<uint32_t>(x[i]) & 0x7FFFFFFFu;
    m = m > b ? m : b;
  }
  return m;
}

HYMOE_INLINE void encode_scaled_body(const float* x, int64_t n, float inv_scale, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = encode_e4m3_branchless(x[i] * inv_scale);
}

HYMOE_INLINE void to_bf16_body(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(x[i]);
}

// One set of entry points per target.
#define HYMOE_RANDOM_VARIANT(NAME, TARGET)                                                      \
  TARGET void NAME##_normal_fill(float* out, int64_t n, uint64_t seed, int64_t first, float mean, \
                                 float std_dev) {                                                \
    normal_fill_body(out, n, seed, first, mean, std_dev);                                       \
  }                                                                                              \
  TARGET uint32_t NAME##_abs_max_bits(const float* x, int64_t n, uint32_t m) {                   \
    return abs_max_bits_body(x, n, m);                                                           \
  }                                                                                              \
  TARGET void NAME##_encode_scaled(const float* x, int64_t n, float inv_scale, uint8_t* out) {   \
    encode_scaled_body(x, n, inv_scale, out);                                                    \
  }                                                                                              \
  TARGET void NAME##_to_bf16(const float* x, int64_t n, uint16_t* out) { to_bf16_body(x, n, out); }

HYMOE_RANDOM_VARIANT(base, )
HYMOE_RANDOM_VARIANT(avx2, __attribute__((target("avx2"))))

constexpr RandomKernels kBase{"x86-64", base_normal_fill, base_abs_max_bits, base_encode_scaled,
                              base_to_bf16};
constexpr RandomKernels kAvx2{"avx2", avx2_normal_fill, avx2_abs_max_bits, avx2_encode_scaled,
                              avx2_to_bf16};

}  // namespace

const RandomKernels& random_kernels(bool avx2) { return avx2 ? kAvx2 : kBase; }

}  // namespace hymoe
