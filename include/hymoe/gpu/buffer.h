// RAII device and pinned host memory. Sizes are in bytes; as<T>() views the memory as T.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

namespace hymoe::gpu {

class MemoryBudget;

// cudaMalloc'd memory on the current device, optionally counted against a MemoryBudget
// (which must outlive the buffer).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes, MemoryBudget* budget = nullptr);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Bytes held by every live DeviceBuffer of the process (leak checks that other processes on
  // the same device cannot disturb, as cudaMemGetInfo's free memory can).
  static size_t live_bytes();
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }

  // Stream-ordered copies; the host side must stay valid until the stream reaches them.
  void copy_from_host(const void* src, size_t bytes, cudaStream_t stream, size_t offset = 0);
  void copy_to_host(void* dst, size_t bytes, cudaStream_t stream, size_t offset = 0) const;
  // Fills every byte with `value` (tests poison outputs with 0xFF: NaN in F32, BF16 and FP8).
  void fill_bytes(int value, cudaStream_t stream);

 private:
  void reset() noexcept;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemoryBudget* budget_ = nullptr;
};

// Page-locked host memory (cudaHostAlloc, portable and mapped): full-speed DMA to and from any device,
// and readable by kernels (upload_mapped).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  std::span<T> as() const { return {static_cast<T*>(data_), bytes_ / sizeof(T)}; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace hymoe::gpu
