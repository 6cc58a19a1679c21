#include "hymoe/engine/copy_pacer.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace hymoe {
namespace {

constexpr size_t kExpert = 44u << 20;  // about one DeepSeek-V3 routed expert

CopyPacerOptions fixed_objective(double objective_s) {
  CopyPacerOptions o;
  o.tpot_objective_s = objective_s;
  return o;
}

TEST(CopyPacer, UnpacedUntilADecodeStepIsTooSlow) {
  CopyPacer p(fixed_objective(0.1));
  double t = 100;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p.delay_for(kExpert, t += 0.0001), 0.0);
  p.on_decode_step(0.09, 2, 0, /*long_running=*/true, t);  // within the objective
  EXPECT_EQ(p.stats().rate, 0.0);
  EXPECT_EQ(p.delay_for(kExpert, t += 0.0001), 0.0);
  p.on_decode_step(0.15, 2, 0, true, t);
  const CopyPacer::Stats s = p.stats();
  EXPECT_GT(s.rate, 0.0);
  EXPECT_EQ(s.decreases, 1);
  // The first cut starts from the measured unpaced issue rate (44 MiB every 0.1 ms here, above
  // max_rate: capped there).
  EXPECT_DOUBLE_EQ(s.rate, CopyPacerOptions{}.max_rate * CopyPacerOptions{}.decrease);
}

TEST(CopyPacer, TheBucketSpacesCopiesAtTheRate) {
  CopyPacerOptions o = fixed_objective(0.1);
  o.min_rate = 1e9;
  o.max_rate = 1e9 / o.decrease;  // the first cut lands on 1 GB/s exactly
  CopyPacer p(o);
  double t = 0;
  p.on_decode_step(0.2, 1, 0, true, t);
  ASSERT_DOUBLE_EQ(p.stats().rate, 1e9);
  // Back-to-back requests of 100 MB at 1 GB/s: each may start 0.1 s after the previous.
  double delays[4];
  for (double& d : delays) d = p.delay_for(100'000'000, t);
  EXPECT_DOUBLE_EQ(delays[0], 0.0);
  EXPECT_NEAR(delays[1], 0.1, 1e-9);
  EXPECT_NEAR(delays[2], 0.2, 1e-9);
  EXPECT_NEAR(delays[3], 0.3, 1e-9);
  // After a pause no credit accumulates: the bucket does not let a burst through.
  t = 10;
  p.on_decode_step(0.09, 1, 0, true, t);  // within the objective, not under its slack
  EXPECT_DOUBLE_EQ(p.delay_for(100'000'000, t), 0.0);
  EXPECT_NEAR(p.delay_for(100'000'000, t), 0.1, 1e-9);
  EXPECT_EQ(p.stats().paced_copies, 4);
}

TEST(CopyPacer, DecreasesToTheFloorAndRecoversToUnpaced) {
  CopyPacerOptions o = fixed_objective(0.1);
  CopyPacer p(o);
  double t = 0;
  for (int i = 0; i < 40; ++i) p.on_decode_step(0.3, 4, 0, true, t += 0.3);
  EXPECT_DOUBLE_EQ(p.stats().rate, o.min_rate);
  // Fast steps grow the rate step by step until it is back at the unpaced rate: unpaced.
  int steps = 0;
  while (p.stats().rate > 0 && steps < 1000) {
    p.on_decode_step(0.05, 4, 0, true, t += 0.05);
    ++steps;
  }
  EXPECT_EQ(p.stats().rate, 0.0);
  EXPECT_GT(steps, 10);  // 2 -> 64 GB/s at x1.1 a step
  EXPECT_EQ(p.stats().increases, steps);
}

TEST(CopyPacer, StepsBesidePromptTokensAreNotJudged) {
  CopyPacer p(fixed_objective(0.1));
  p.on_decode_step(0.5, 2, 64, true, 1.0);  // a decode step with a short prompt's chunk beside
  EXPECT_EQ(p.stats().rate, 0.0);
  EXPECT_EQ(p.stats().decreases, 0);
}

TEST(CopyPacer, NoPacingWithoutALongPrefillOrWhenNothingDecodes) {
  CopyPacer p(fixed_objective(0.1));
  double t = 0;
  p.on_decode_step(0.3, 2, 0, true, t);
  ASSERT_GT(p.stats().rate, 0.0);
  // A step with no long prefill beside it: nothing to pace.
  p.on_decode_step(0.3, 2, 0, false, t += 0.3);
  EXPECT_EQ(p.stats().rate, 0.0);
  p.on_decode_step(0.3, 2, 0, true, t += 0.3);
  ASSERT_GT(p.stats().rate, 0.0);
  EXPECT_GT(p.delay_for(kExpert, t) + p.delay_for(kExpert, t), 0.0);
  // No decode step for longer than idle_after_s: the copies run unpaced.
  t += CopyPacerOptions{}.idle_after_s + 0.01;
  EXPECT_EQ(p.delay_for(kExpert, t), 0.0);
  EXPECT_EQ(p.stats().rate, 0.0);
}

TEST(CopyPacer, AutoObjectiveFollowsTheSoloStepPerBatchSize) {
  CopyPacerOptions o;
  o.auto_factor = 1.5;  // auto: 1.5 x the solo step
  CopyPacer p(o);
  EXPECT_EQ(p.objective_s(1), 0.0);
  double t = 0;
  // Unknown objective: a slow step beside a long prefill changes nothing.
  p.on_decode_step(1.0, 1, 0, true, t += 1);
  EXPECT_EQ(p.stats().rate, 0.0);
  p.on_decode_step(0.040, 1, 0, false, t += 1);
  p.on_decode_step(0.060, 4, 0, false, t += 1);
  EXPECT_DOUBLE_EQ(p.objective_s(1), 1.5 * 0.040);
  EXPECT_DOUBLE_EQ(p.objective_s(4), 1.5 * 0.060);
  EXPECT_DOUBLE_EQ(p.objective_s(2), 1.5 * 0.040);  // nearest measured size, the smaller on a tie
  EXPECT_DOUBLE_EQ(p.objective_s(3), 1.5 * 0.060);
  EXPECT_DOUBLE_EQ(p.objective_s(100), 1.5 * 0.060);
  // The EWMA moves a quarter of the way to a new sample.
  p.on_decode_step(0.080, 1, 0, false, t += 1);
  EXPECT_DOUBLE_EQ(p.objective_s(1), 1.5 * (0.040 + 0.25 * (0.080 - 0.040)));
  // Beside a long prefill: 0.07 s is within 1.5 x 0.05; 0.08 is not.
  p.on_decode_step(0.070, 1, 0, true, t += 1);
  EXPECT_EQ(p.stats().rate, 0.0);
  p.on_decode_step(0.080, 1, 0, true, t += 1);
  EXPECT_GT(p.stats().rate, 0.0);
  EXPECT_DOUBLE_EQ(p.stats().objective_s, 1.5 * 0.050);
}

TEST(CopyPacer, ThreadSafeUnderConcurrentUse) {
  CopyPacer p(fixed_objective(0.01));
  std::thread decoder([&] {
    for (int i = 0; i < 20000; ++i) p.on_decode_step(i % 3 == 0 ? 0.02 : 0.005, 1 + i % 8, 0, i % 5 != 0);
  });
  double waited = 0;
  for (int i = 0; i < 20000; ++i) {
    const double d = p.delay_for(1 << 20);
    ASSERT_GE(d, 0.0);
    waited += d > 1e-3 ? 1e-3 : d;
    p.on_waited(d > 1e-3 ? 1e-3 : d);
  }
  decoder.join();
  EXPECT_DOUBLE_EQ(p.stats().waited_s, waited);
}

}  // namespace
}  // namespace hymoe
