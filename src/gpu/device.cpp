#include "hymoe/gpu/device.h"

#include <cctype>
#include <charconv>

#include "hymoe/gpu/cuda_check.h"

namespace hymoe::gpu {

int current_device_sm() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return 0;
  return major * 10 + minor;
}

bool hopper_kernels_usable() {
#if defined(HYMOE_HAVE_SM90A)
  return current_device_sm() == 90;
#else
  return false;  // no sm_90a code in this build (CMAKE_CUDA_ARCHITECTURES lacks 90a)
#endif
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

DeviceInfo query_device(int index) {
  const int count = device_count();
  HYMOE_CHECK(index >= 0 && index < count, kInvalidArgument,
              "CUDA device {} does not exist ({} devices)", index, count);
  cudaDeviceProp prop{};
  HYMOE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.total_memory = prop.totalGlobalMem;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  info.memory_bus_bits = prop.memoryBusWidth;
  DeviceGuard guard(index);
  size_t free_bytes = 0, total_bytes = 0;
  HYMOE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  info.free_memory = free_bytes;
  return info;
}

std::vector<DeviceInfo> query_devices() {
  std::vector<DeviceInfo> out;
  for (int i = 0, n = device_count(); i < n; ++i) out.push_back(query_device(i));
  return out;
}

size_t parse_byte_size(std::string_view text) {
  const std::string_view original = text;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  size_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  HYMOE_CHECK(ec == std::errc() && ptr != text.data(), kInvalidArgument,
              "bad byte size '{}': expected e.g. 32G, 512M, 1024", original);
  std::string unit(ptr, text.data() + text.size());
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB") shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB") shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB") shift = 30;
  else if (unit == "T" || unit == "TB" || unit == "TIB") shift = 40;
  HYMOE_CHECK(shift >= 0, kInvalidArgument, "bad byte size '{}': unknown unit '{}'", original, unit);
  HYMOE_CHECK(shift == 0 || value <= (SIZE_MAX >> shift), kInvalidArgument,
              "byte size '{}' overflows", original);
  return value << shift;
}

MemoryBudget MemoryBudget::for_device(int device, std::optional<size_t> cap) {
  const DeviceInfo info = query_device(device);
  return MemoryBudget(cap ? std::min(*cap, info.total_memory) : info.total_memory);
}

void MemoryBudget::reserve(size_t bytes, std::string_view what) {
  size_t used = used_.load(std::memory_order_relaxed);
  do {
    HYMOE_CHECK(bytes <= cap_ && used <= cap_ - bytes, kResourceExhausted,
                "GPU memory budget exceeded allocating {} ({} bytes): {} of {} bytes in use", what,
                bytes, used, cap_);
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
}

void MemoryBudget::release(size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

size_t MemoryBudget::available() const {
  const size_t used = used_.load(std::memory_order_relaxed);
  return used >= cap_ ? 0 : cap_ - used;
}

DeviceGuard::DeviceGuard(int device) {
  HYMOE_CUDA_CHECK(cudaGetDevice(&previous_));
  if (device != previous_) HYMOE_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() { (void)cudaSetDevice(previous_); }

}  // namespace hymoe::gpu
