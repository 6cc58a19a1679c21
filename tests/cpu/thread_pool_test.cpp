#include "hymoe/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "hymoe/common/error.h"

namespace hymoe::cpu {
namespace {

TEST(ThreadPool, GroupsFollowSyntheticNodes) {
  for (const char* desc : {"pack:2 [numa] core:3 pu:2", "pack:4 [numa] core:2 pu:1"}) {
    Topology topo = Topology::synthetic(desc);
    ThreadPool pool(topo);
    ASSERT_EQ(pool.num_groups(), topo.num_nodes()) << desc;
    EXPECT_EQ(pool.size(), topo.num_cores());
    std::vector<std::atomic<int>> calls(pool.size());
    std::vector<int> node_of(pool.size(), -1);
    for (int rep = 0; rep < 100; ++rep) {
      pool.run([&](const WorkerInfo& w) {
        calls[w.index].fetch_add(1);
        node_of[w.index] = w.node;
        EXPECT_LT(w.index_in_node, w.threads_in_node);
        EXPECT_EQ(w.threads_in_node, pool.group_size(w.node));
      });
    }
    for (int i = 0; i < pool.size(); ++i) {
      EXPECT_EQ(calls[i].load(), 100);
      EXPECT_EQ(node_of[i], pool.worker(i).node);
      EXPECT_EQ(pool.worker_cpu(i), -1);  // synthetic CPUs are never pinned
    }
  }
}

TEST(ThreadPool, FewerThreadsAreSpreadOverEveryNode) {
  Topology topo = Topology::synthetic("pack:4 [numa] core:4 pu:1");
  ThreadPool pool(topo, {.threads = 6});
  ASSERT_EQ(pool.num_groups(), 4);
  EXPECT_EQ(pool.group_size(0), 2);
  EXPECT_EQ(pool.group_size(1), 2);
  EXPECT_EQ(pool.group_size(2), 1);
  EXPECT_EQ(pool.group_size(3), 1);
  EXPECT_THROW(ThreadPool(topo, {.threads = 17}), Error);
}

TEST(ThreadPool, PinsWorkersOnThisMachine) {
  Topology topo = Topology::detect();
  ThreadPool pool(topo);
  std::vector<int> ran_on(pool.size(), -1);
  pool.run([&](const WorkerInfo& w) { ran_on[w.index] = sched_getcpu(); });
  for (int i = 0; i < pool.size(); ++i) EXPECT_EQ(ran_on[i], pool.worker_cpu(i));
}

TEST(ThreadPool, RethrowsAWorkersException) {
  ThreadPool pool(Topology::synthetic("pack:2 [numa] core:2 pu:1"));
  EXPECT_THROW(pool.run([](const WorkerInfo& w) {
                 if (w.index == 3) throw std::runtime_error("boom");
               }),
               std::runtime_error);
  std::atomic<int> n{0};
  pool.run([&](const WorkerInfo&) { n.fetch_add(1); });  // still usable
  EXPECT_EQ(n.load(), 4);
}

// Busy work of about n iterations that the compiler keeps.
void busy(int n) {
  volatile int sink = 0;
  for (int i = 0; i < n; ++i) sink = sink + i;
}

// Many generations with random job sizes per worker and random idle gaps (so workers and caller
// take both the spinning and the sleeping paths): every run calls every worker exactly once and
// returns only after all of them finished.
TEST(ThreadPool, ManyGenerationsRandomJobsEveryWaitMode) {
  struct Mode {
    CallerWait wait;
    int spin_us;
  };
  for (const Mode mode : {Mode{CallerWait::kSpin, 50}, Mode{CallerWait::kSleep, 50}, Mode{CallerWait::kSleep, 0},
                          Mode{CallerWait::kSpin, 0}, Mode{CallerWait::kAuto, 5}}) {
    ThreadPool pool(Topology::synthetic("pack:2 [numa] core:3 pu:1"),
                    {.threads = 0, .pin = false, .spin_us = mode.spin_us, .caller_spin_us = 20, .caller_wait = mode.wait});
    std::mt19937 rng(1234 + mode.spin_us + static_cast<int>(mode.wait));
    std::vector<int> last_run(pool.size(), -1);
    std::vector<int> work(pool.size());
    std::atomic<int> done{0};
    constexpr int kRuns = 1500;
    for (int r = 0; r < kRuns; ++r) {
      for (int& w : work) w = rng() % 4 == 0 ? 0 : static_cast<int>(rng() % 20000);
      done.store(0);
      pool.run([&](const WorkerInfo& w) {
        EXPECT_EQ(last_run[w.index], r - 1);  // exactly once per run, runs in order
        last_run[w.index] = r;
        busy(work[w.index]);
        done.fetch_add(1);
      });
      ASSERT_EQ(done.load(), pool.size()) << "run " << r;
      if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
    }
    for (int i = 0; i < pool.size(); ++i) EXPECT_EQ(last_run[i], kRuns - 1);
    EXPECT_EQ(pool.stats().runs, static_cast<uint64_t>(kRuns));
  }
}

// Idle workers go to sleep (counted) and a sleeping pool still runs and wakes every worker.
TEST(ThreadPool, SleepingWorkersWakeForTheNextRun) {
  ThreadPool pool(Topology::synthetic("pack:1 [numa] core:4 pu:1"),
                  {.threads = 0, .pin = false, .spin_us = 0, .caller_spin_us = 0, .caller_wait = CallerWait::kSleep});
  EXPECT_EQ(pool.caller_spin_limit_us(), 0);
  uint64_t asleep = 0;  // the count when every worker last slept
  for (int round = 0; round < 20; ++round) {
    // Wait (bounded) until every worker has entered its futex wait once more since the last run.
    const uint64_t want = asleep + static_cast<uint64_t>(pool.size());
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (pool.stats().worker_sleeps < want && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ASSERT_GE(pool.stats().worker_sleeps, want) << "round " << round;
    asleep = pool.stats().worker_sleeps;
    std::atomic<int> n{0};
    pool.run([&](const WorkerInfo&) { n.fetch_add(1); });
    EXPECT_EQ(n.load(), pool.size());
  }
}

TEST(ThreadPool, CallerWaitModes) {
  const Topology synthetic = Topology::synthetic("pack:1 [numa] core:2 pu:1");
  EXPECT_EQ(ThreadPool(synthetic, {.threads = 0, .pin = true, .spin_us = 50, .caller_spin_us = 1000,
                                   .caller_wait = CallerWait::kAuto})
                .caller_spin_limit_us(),
            1000);  // synthetic: nothing pinned, the caller has a core
  EXPECT_EQ(ThreadPool(synthetic, {.threads = 0, .pin = false, .spin_us = 50, .caller_spin_us = 1000,
                                   .caller_wait = CallerWait::kSleep})
                .caller_spin_limit_us(),
            0);
  EXPECT_EQ(ThreadPool(synthetic, {.threads = 0, .pin = false, .spin_us = 50, .caller_spin_us = 700,
                                   .caller_wait = CallerWait::kSpin})
                .caller_spin_limit_us(),
            700);
  // The default is kSpin (measured faster at the Xeon's full pool): up to caller_spin_us even
  // for the full pinned pool, whose caller shares a worker's CPU.
  const Topology topo = Topology::detect();
  EXPECT_EQ(ThreadPoolOptions{}.caller_wait, CallerWait::kSpin);
  EXPECT_STREQ(caller_wait_name(CallerWait::kAuto), "auto");  // bench record suffixes
  EXPECT_STREQ(caller_wait_name(CallerWait::kSpin), "spin");
  EXPECT_STREQ(caller_wait_name(CallerWait::kSleep), "sleep");
  EXPECT_EQ(ThreadPool(topo).caller_spin_limit_us(), ThreadPoolOptions{}.caller_spin_us);
  // kAuto on this machine: a full pinned pool leaves the caller no free CPU exactly when the
  // process may run only on the pool's CPUs.
  ThreadPool full(topo, {.threads = 0, .pin = true, .spin_us = 50, .caller_spin_us = 1000,
                         .caller_wait = CallerWait::kAuto});
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  bool free_cpu = false;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    bool used = false;
    for (int i = 0; i < full.size(); ++i) used = used || full.worker_cpu(i) == c;
    free_cpu = free_cpu || (CPU_ISSET(c, &allowed) && !used);
  }
  const bool pinned = full.worker_cpu(0) >= 0;
  EXPECT_EQ(full.caller_spin_limit_us(), pinned && !free_cpu ? kSharedCallerSpinUs : 1000);
  if (topo.num_cores() > 1) {
    ThreadPool one(topo, {.threads = 1, .pin = true, .spin_us = 50, .caller_spin_us = 1000, .caller_wait = CallerWait::kAuto});
    EXPECT_EQ(one.caller_spin_limit_us(), 1000);
  }
}

// The caller on a pinned worker's CPU (kAuto then spins only briefly, then sleeps): every run
// still completes, in order.
TEST(ThreadPool, CallerOnAWorkersCpu) {
  ThreadPool pool(Topology::detect(), {.threads = 1, .pin = true, .spin_us = 50, .caller_spin_us = 1000,
                                       .caller_wait = CallerWait::kAuto});
  if (pool.worker_cpu(0) < 0) GTEST_SKIP() << "workers are not pinned here";
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(pool.worker_cpu(0), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  std::mt19937 rng(7);
  int last = -1;
  for (int r = 0; r < 500; ++r) {
    const int work = static_cast<int>(rng() % 50000);
    pool.run([&](const WorkerInfo&) {
      EXPECT_EQ(last, r - 1);
      busy(work);
      last = r;
    });
    ASSERT_EQ(last, r);
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
}

TEST(ThreadPool, RethrowsWhileTheCallerSleeps) {
  ThreadPool pool(Topology::synthetic("pack:1 [numa] core:3 pu:1"),
                  {.threads = 0, .pin = false, .spin_us = 0, .caller_spin_us = 0, .caller_wait = CallerWait::kSleep});
  for (int rep = 0; rep < 50; ++rep) {
    EXPECT_THROW(pool.run([&](const WorkerInfo& w) {
                   busy(1000 * w.index);
                   if (w.index == rep % 3) throw std::runtime_error("boom");
                 }),
                 std::runtime_error);
    std::atomic<int> n{0};
    pool.run([&](const WorkerInfo&) { n.fetch_add(1); });
    EXPECT_EQ(n.load(), 3);
  }
}

}  // namespace
}  // namespace hymoe::cpu
