// Seeds of the tests that draw fresh random inputs (never fixed ones): each draw prints its seed,
// so a failure can be replayed. HYMOE_TEST_SEED=<seed> replays one: every draw of the run then
// takes that seed. For gtest tests (the seed is also recorded as the test's "seed" property).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace hymoe::test {

// HYMOE_TEST_SEED when set (decimal, or hex with 0x), else a fresh one from std::random_device.
inline uint64_t test_seed() {
  uint64_t seed = 0;
  if (const char* env = std::getenv("HYMOE_TEST_SEED"); env != nullptr && *env != '\0') {
    seed = std::strtoull(env, nullptr, 0);
  } else {
    seed = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  }
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::printf("[ seed     ] %llu (replay: HYMOE_TEST_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

// A generator seeded by test_seed().
inline std::mt19937_64 make_rng() { return std::mt19937_64(test_seed()); }

}  // namespace hymoe::test
