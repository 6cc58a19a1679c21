#include "hymoe/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <stdexcept>
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

}  // namespace
}  // namespace hymoe::cpu
