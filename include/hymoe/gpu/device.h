// Device discovery and a memory budget. device_count() never throws, so code (and tests) can ask
// "is there a GPU?" on machines without a driver. MemoryBudget caps what hymoe allocates on one
// device, which emulates a smaller card (e.g. a 32 GB RTX 5090) on a large one.
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hymoe::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0;            // compute capability, e.g. 9.0 for H100/H200, 12.0 for RTX 5090
  int sm_minor = 0;
  int multiprocessors = 0;
  size_t total_memory = 0;     // bytes of device memory
  size_t free_memory = 0;      // bytes free when queried
  size_t l2_bytes = 0;
  size_t smem_per_block_optin = 0;  // most shared memory one block may opt into
  int memory_bus_bits = 0;

  int sm() const { return sm_major * 10 + sm_minor; }  // 90, 120, ...
};

// Number of CUDA devices; 0 when there is no device or no (usable) driver.
int device_count();

// Compute capability (major * 10 + minor) of the calling thread's current device; 0 when there is
// none or the driver cannot tell.
int current_device_sm();

// Whether this build carries sm_90a kernels (Hopper's wgmma and TMA) and the current device can
// run them: sm_90a code runs on compute capability 9.0 only.
bool hopper_kernels_usable();

// Properties of device `index`. Throws hymoe::Error (kInvalidArgument) for a bad index.
DeviceInfo query_device(int index);
std::vector<DeviceInfo> query_devices();

// "32G", "32GiB", "32GB" (all 2^30), "512M", "4096K", "123" (bytes). Throws kInvalidArgument.
size_t parse_byte_size(std::string_view text);

// A byte budget for one device. Thread-safe. DeviceBuffer/CublasLt reserve from it when given one;
// exceeding it throws kResourceExhausted before cudaMalloc is called.
class MemoryBudget {
 public:
  explicit MemoryBudget(size_t cap_bytes) : cap_(cap_bytes) {}
  // The budget of `device`: min(cap, its total memory); no cap means the whole card.
  static MemoryBudget for_device(int device, std::optional<size_t> cap);

  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  void reserve(size_t bytes, std::string_view what);
  void release(size_t bytes);
  size_t cap() const { return cap_; }
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  size_t available() const;

 private:
  size_t cap_;
  std::atomic<size_t> used_{0};
};

// Makes `device` current for the scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace hymoe::gpu
