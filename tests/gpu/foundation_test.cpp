// The GPU foundation: byte sizes, memory budget, error mapping (no device needed), and the RAII
// wrappers and device query (skipped without a device).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "gpu_test_util.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/sm_clock.h"

namespace hymoe::gpu {
namespace {

TEST(GpuHost, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("32G"), size_t{32} << 30);
  EXPECT_EQ(parse_byte_size("32GiB"), size_t{32} << 30);
  EXPECT_EQ(parse_byte_size("512m"), size_t{512} << 20);
  EXPECT_EQ(parse_byte_size("4096K"), size_t{4096} << 10);
  EXPECT_EQ(parse_byte_size("123"), 123u);
  EXPECT_THROW(parse_byte_size("G"), Error);
  EXPECT_THROW(parse_byte_size("12X"), Error);
  EXPECT_THROW(parse_byte_size("99999999999999T"), Error);
}

TEST(GpuHost, MemoryBudgetRefusesOverCap) {
  MemoryBudget budget(1000);
  budget.reserve(600, "a");
  EXPECT_EQ(budget.used(), 600u);
  EXPECT_EQ(budget.available(), 400u);
  try {
    budget.reserve(500, "b");
    FAIL() << "reserve over the cap did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResourceExhausted);
    EXPECT_NE(e.message().find("budget"), std::string::npos);
  }
  budget.release(600);
  budget.reserve(1000, "c");
  EXPECT_EQ(budget.available(), 0u);
}

TEST(GpuHost, CudaErrorsMapToKinds) {
  EXPECT_EQ(cuda_error_kind(cudaErrorMemoryAllocation), ErrorKind::kResourceExhausted);
  EXPECT_EQ(cuda_error_kind(cudaErrorNoDevice), ErrorKind::kUnavailable);
  EXPECT_EQ(cuda_error_kind(cudaErrorInvalidValue), ErrorKind::kInvalidArgument);
  EXPECT_EQ(cuda_error_kind(cudaErrorNoKernelImageForDevice), ErrorKind::kUnsupported);
  try {
    HYMOE_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.where().find("foundation_test.cpp:"), std::string::npos) << e.where();
    EXPECT_NE(e.message().find("cudaErrorInvalidValue"), std::string::npos) << e.message();
  }
  try {
    HYMOE_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(e.message().find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos);
  }
}

TEST(Gpu, QueriesDevices) {
  HYMOE_REQUIRE_GPU();
  const auto devices = query_devices();
  ASSERT_EQ(static_cast<int>(devices.size()), device_count());
  for (const DeviceInfo& d : devices) {
    std::printf("[ device   ] %d: %s sm_%d, %d SMs, %.1f GiB (%.1f free), L2 %zu KiB\n", d.index,
                d.name.c_str(), d.sm(), d.multiprocessors, d.total_memory / 1073741824.0,
                d.free_memory / 1073741824.0, d.l2_bytes >> 10);
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.sm_major, 7);
    EXPECT_GT(d.multiprocessors, 0);
    EXPECT_GT(d.total_memory, d.free_memory / 2);
  }
  EXPECT_THROW(query_device(device_count()), Error);
}

TEST(Gpu, BuffersRoundTripThroughStreams) {
  HYMOE_REQUIRE_GPU();
  auto rng = test::make_rng();
  Stream stream;
  const auto host = test::random_f32(100003, rng, -1.0f, 1.0f);
  PinnedBuffer pinned(host.size() * sizeof(float));
  std::memcpy(pinned.data(), host.data(), pinned.bytes());
  DeviceBuffer a(pinned.bytes()), b(pinned.bytes());
  a.copy_from_host(pinned.data(), pinned.bytes(), stream);
  b.fill_bytes(0xFF, stream);
  HYMOE_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), a.bytes(), cudaMemcpyDeviceToDevice, stream));
  Event done;
  done.record(stream);
  std::vector<float> back(host.size());
  b.copy_to_host(back.data(), b.bytes(), stream);
  stream.synchronize();
  EXPECT_TRUE(done.done());
  EXPECT_EQ(std::memcmp(back.data(), host.data(), pinned.bytes()), 0);
  EXPECT_THROW(b.copy_to_host(back.data(), b.bytes() + 4, stream), Error);

  DeviceBuffer moved = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_NE(moved.data(), nullptr);
}

TEST(Gpu, MemoryBudgetCapsDeviceBuffers) {
  HYMOE_REQUIRE_GPU();
  // A 32 GiB card emulated on whatever this device is (or the whole card if smaller).
  MemoryBudget budget = MemoryBudget::for_device(0, parse_byte_size("32G"));
  EXPECT_LE(budget.cap(), size_t{32} << 30);
  {
    DeviceBuffer a(size_t{1} << 20, &budget);
    EXPECT_EQ(budget.used(), size_t{1} << 20);
    EXPECT_THROW(DeviceBuffer(budget.cap(), &budget), Error);
    EXPECT_EQ(budget.used(), size_t{1} << 20);  // the refused buffer reserved nothing
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(Gpu, EventsTimeWork) {
  HYMOE_REQUIRE_GPU();
  Stream stream;
  Event start, stop;
  DeviceBuffer buf(size_t{64} << 20);
  start.record(stream);
  buf.fill_bytes(0x5A, stream);
  stop.record(stream);
  stop.synchronize();
  EXPECT_GT(Event::elapsed_ms(start, stop), 0.0f);
}

// The probe reads the clock the SMs run at: above a floor no running GPU drops under and at most
// the device's rated peak (+5%), and a probe of 4x the span reads within 25% of a short one (the
// clock may move between them, not by more).
TEST(Gpu, SmClockProbeReadsTheRunningClock) {
  HYMOE_REQUIRE_GPU();
  Stream stream;
  SmClockProbe probe;
  int peak_khz = 0;
  HYMOE_CUDA_CHECK(cudaDeviceGetAttribute(&peak_khz, cudaDevAttrClockRate, 0));
  const double short_mhz = probe.measure_mhz(stream, 100.0);
  const double long_mhz = probe.measure_mhz(stream, 400.0);
  for (const double mhz : {short_mhz, long_mhz}) {
    EXPECT_GT(mhz, 100.0);
    if (peak_khz > 0) {
      EXPECT_LE(mhz, 1.05 * peak_khz / 1e3);
    }
  }
  EXPECT_NEAR(long_mhz / short_mhz, 1.0, 0.25);
  EXPECT_ANY_THROW(probe.measure_mhz(stream, 0.5));
}

TEST(Gpu, CreatesCublasLtHandle) {
  HYMOE_REQUIRE_GPU();
  CublasLt lt;
  EXPECT_NE(lt.get(), nullptr);
  EXPECT_EQ(lt.workspace_bytes(), CublasLt::kDefaultWorkspace);
}

}  // namespace
}  // namespace hymoe::gpu
