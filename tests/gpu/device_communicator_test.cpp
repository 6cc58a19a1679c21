// DeviceGroup (DSLP's ranks without NCCL, issue 44): two and three ranks on one GPU (every
// machine with a GPU), two GPUs where there are two. The checks every device communicator passes
// (communicator_checks.h), the reduce-scatter bitwise the rank-order sum; a rank left waiting in a
// collective woken by abort and by the timeout; mismatched sizes failing every rank.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "communicator_checks.h"
#include "hymoe/common/error.h"
#include "hymoe/engine/device_communicator.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/device.h"

namespace hymoe {
namespace {

#define NEED_GPU() \
  if (gpu::device_count() < 1) GTEST_SKIP() << "no CUDA device"

TEST(DeviceGroup, TwoRanksOnOneGpu) {
  NEED_GPU();
  DeviceGroup group({0, 0}, 120.0);
  test::check_collectives(group, /*exact_sum=*/true);
  test::check_striped_ring(group);
}

TEST(DeviceGroup, ThreeRanksOnOneGpu) {
  NEED_GPU();
  DeviceGroup group({0, 0, 0}, 120.0);
  test::check_collectives(group, /*exact_sum=*/true);
  test::check_striped_ring(group);
}

TEST(DeviceGroup, TwoRanksOnTwoGpus) {
  if (gpu::device_count() < 2) GTEST_SKIP() << "fewer than two CUDA devices";
  DeviceGroup group({0, 1}, 120.0);
  test::check_collectives(group, /*exact_sum=*/true);
  test::check_striped_ring(group);
}

// Rank 0 waits in a collective rank 1 never calls: abort wakes it at once with the reason.
TEST(DeviceGroup, AbortWakesARankWaitingInACollective) {
  NEED_GPU();
  DeviceGroup group({0, 0}, 60.0);
  gpu::DeviceBuffer send(64), recv(128);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    group.abort("injected: rank 1's GPU failed");
  });
  const auto t0 = std::chrono::steady_clock::now();
  try {
    group.rank(0).all_gather(send.data(), recv.data(), 64);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
  }
  aborter.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_THROW(group.rank(1).synchronize(), Error);
  EXPECT_THROW(group.rank(1).send_recv(send.data(), 4, 0, recv.data(), 4, 0), Error);
}

TEST(DeviceGroup, TimeoutFailsTheGroup) {
  NEED_GPU();
  DeviceGroup group({0, 0}, 0.3);
  gpu::DeviceBuffer send(64), recv(128);
  try {
    group.rank(0).all_gather(send.data(), recv.data(), 64);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("did not arrive"), std::string::npos) << e.what();
  }
  EXPECT_THROW(group.rank(1).all_gather(send.data(), recv.data(), 64), Error);
}

// Rank 1 sends 8 bytes where rank 0 expects 4: both ranks throw, neither hangs.
TEST(DeviceGroup, MismatchedSizesFailEveryRank) {
  NEED_GPU();
  DeviceGroup group({0, 0}, 30.0);
  std::vector<int> kinds(2, -1);
  test::on_ranks(2, [&](int r) {
    gpu::DeviceGuard guard(group.device(r));
    gpu::DeviceBuffer send(64), recv(64);
    try {
      group.rank(r).send_recv(send.data(), r == 1 ? 8 : 4, 1 - r, recv.data(), 4, 1 - r);
      group.rank(r).synchronize();
    } catch (const Error& e) {
      kinds[static_cast<size_t>(r)] = static_cast<int>(e.kind());
    }
  });
  for (int k : kinds) EXPECT_NE(k, -1);
}

TEST(DeviceGroup, RefusesBadDeviceLists) {
  EXPECT_THROW(DeviceGroup({}), Error);
  EXPECT_THROW(DeviceGroup({gpu::device_count()}), Error);
  EXPECT_THROW(DeviceGroup({-1}), Error);
}

}  // namespace
}  // namespace hymoe
