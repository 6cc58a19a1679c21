// Helpers of the GPU tests: skip without a device, fresh random inputs, NaN-poisoned outputs,
// host<->device copies and normalised error.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/common/numeric.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/dtypes.h"
#include "hymoe/gpu/stream.h"
#include "../test_seed.h"

namespace hymoe::gpu::test {

#define HYMOE_REQUIRE_GPU()                                                   \
  do {                                                                        \
    if (::hymoe::gpu::device_count() == 0) GTEST_SKIP() << "no CUDA device";  \
  } while (0)

// A fresh seed per test run (never a fixed input), printed so a failure can be replayed
// (HYMOE_TEST_SEED: ../test_seed.h).
using ::hymoe::test::make_rng;

inline std::vector<Bf16> random_bf16(size_t n, std::mt19937_64& rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<Bf16> v(n);
  for (auto& x : v) x = Bf16::from_float(dist(rng));
  return v;
}

inline std::vector<float> random_f32(size_t n, std::mt19937_64& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Random finite FP8 codes (all 254 finite codes, subnormals included).
inline std::vector<Fp8E4M3> random_fp8(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> dist(0, 255);
  std::vector<Fp8E4M3> v(n);
  for (auto& x : v) {
    int code = dist(rng);
    while ((code & 0x7F) == 0x7F) code = dist(rng);
    x = Fp8E4M3{static_cast<uint8_t>(code)};
  }
  return v;
}

template <typename T>
DeviceBuffer to_device(const std::vector<T>& host, const Stream& stream) {
  DeviceBuffer buf(host.size() * sizeof(T));
  buf.copy_from_host(host.data(), host.size() * sizeof(T), stream);
  return buf;
}

// A device buffer of n elements filled with 0xFF bytes: NaN in F32, BF16 and FP8, -1 in int32.
template <typename T>
DeviceBuffer poisoned(size_t n, const Stream& stream) {
  DeviceBuffer buf(n * sizeof(T));
  buf.fill_bytes(0xFF, stream);
  return buf;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer& buf, size_t n, const Stream& stream) {
  std::vector<T> host(n);
  buf.copy_to_host(host.data(), n * sizeof(T), stream);
  stream.synchronize();
  return host;
}

inline std::vector<float> to_float(const std::vector<Bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].to_float();
  return out;
}

// ||out - ref|| / ||ref||; +inf when out holds a NaN or an infinity (an unwritten poisoned value).
inline double normalized_error(const std::vector<float>& out, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace hymoe::gpu::test
