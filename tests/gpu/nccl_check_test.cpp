// HYMOE_NCCL_CHECK raises hymoe::Error with NCCL's message and the call site (no device needed:
// the macro is exercised on returned status codes).
#include <gtest/gtest.h>

#include "hymoe/gpu/nccl_check.h"

namespace hymoe::gpu {
namespace {

TEST(GpuHost, NcclFailuresRaiseErrors) {
  EXPECT_NO_THROW(HYMOE_NCCL_CHECK(ncclSuccess));
  try {
    HYMOE_NCCL_CHECK(ncclInvalidArgument);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.where().find("nccl_check_test.cpp:"), std::string::npos) << e.where();
    EXPECT_NE(e.message().find("ncclInvalidArgument"), std::string::npos) << e.message();
  }
  try {
    HYMOE_NCCL_CHECK(ncclSystemError);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
  }
}

}  // namespace
}  // namespace hymoe::gpu
