#include "hymoe/cpu/topology.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "hymoe/common/error.h"

namespace hymoe::cpu {
namespace {

TEST(Topology, DetectsThisMachine) {
  Topology t = Topology::detect();
  EXPECT_TRUE(t.is_this_system());
  EXPECT_GE(t.num_nodes(), 1);
  EXPECT_GE(t.num_cores(), 1);
  EXPECT_LE(t.num_cores(), static_cast<int>(std::thread::hardware_concurrency()));
  std::set<int> cpus;
  for (const NumaNode& n : t.nodes())
    for (int c : n.cpus) EXPECT_TRUE(cpus.insert(c).second) << "cpu " << c << " twice";
}

TEST(Topology, SyntheticTwoAndFourNodes) {
  Topology two = Topology::synthetic("pack:2 [numa] core:4 pu:2");
  EXPECT_FALSE(two.is_this_system());
  ASSERT_EQ(two.num_nodes(), 2);
  EXPECT_EQ(two.num_cores(), 8);
  // One CPU per core: the first hardware thread (PU os indices 0,2,4,.. with 2 PUs per core).
  EXPECT_EQ(two.nodes()[0].cpus, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(two.nodes()[1].cpus, (std::vector<int>{8, 10, 12, 14}));

  // Sub-NUMA clustering: one package, four nodes.
  Topology snc = Topology::synthetic("pack:1 l3:4 [numa] core:3 pu:1");
  ASSERT_EQ(snc.num_nodes(), 4);
  EXPECT_EQ(snc.nodes()[3].cpus, (std::vector<int>{9, 10, 11}));
  Topology four_flat = Topology::synthetic("pack:4 [numa] core:2 pu:1");
  ASSERT_EQ(four_flat.num_nodes(), 4);
  for (const NumaNode& n : four_flat.nodes()) EXPECT_EQ(n.cpus.size(), 2u);
  EXPECT_NE(four_flat.describe().find("4 NUMA nodes"), std::string::npos) << four_flat.describe();
}

TEST(Topology, BadSyntheticDescriptionThrows) {
  EXPECT_THROW(Topology::synthetic("banana:3"), Error);
}

}  // namespace
}  // namespace hymoe::cpu
