// NcclGroup (DSLP's ranks over NCCL, issue 44) on the devices present: one rank on one GPU
// (every machine with a GPU), two ranks where there are two. The checks every device
// communicator passes (communicator_checks.h); abort failing later calls; bad device lists.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "communicator_checks.h"
#include "hymoe/common/error.h"
#include "hymoe/engine/nccl_communicator.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/device.h"

namespace hymoe {
namespace {

TEST(NcclGroup, OneRankOnOneGpu) {
  if (gpu::device_count() < 1) GTEST_SKIP() << "no CUDA device";
  NcclGroup group({0}, 120.0);
  test::check_collectives(group, /*exact_sum=*/false);  // NCCL's summation order is its own
}

TEST(NcclGroup, TwoRanksOnTwoGpus) {
  if (gpu::device_count() < 2) GTEST_SKIP() << "fewer than two CUDA devices";
  NcclGroup group({0, 1}, 120.0);
  test::check_collectives(group, /*exact_sum=*/false);
}

TEST(NcclGroup, StripedRingPassesEveryRanksDeviceKv) {
  if (gpu::device_count() < 1) GTEST_SKIP() << "no CUDA device";
  NcclGroup group(gpu::device_count() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0}, 120.0);
  test::check_striped_ring(group);
}

TEST(NcclGroup, AbortFailsLaterCalls) {
  if (gpu::device_count() < 1) GTEST_SKIP() << "no CUDA device";
  NcclGroup group({0});
  group.abort("injected: the peer's GPU failed");
  gpu::DeviceBuffer b(64);
  try {
    group.rank(0).all_gather(b.data(), b.data(), 0);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
  }
  EXPECT_THROW(group.rank(0).synchronize(), Error);
}

TEST(NcclGroup, RefusesBadDeviceLists) {
  EXPECT_THROW(NcclGroup({}), Error);
  EXPECT_THROW(NcclGroup({0, 0}), Error);
  EXPECT_THROW(NcclGroup({gpu::device_count()}), Error);
}

}  // namespace
}  // namespace hymoe
