#include "hymoe/gpu/buffer.h"

#include <atomic>
#include <utility>

#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"

namespace hymoe::gpu {
namespace {
std::atomic<size_t> g_live_bytes{0};
}  // namespace

size_t DeviceBuffer::live_bytes() { return g_live_bytes.load(std::memory_order_relaxed); }

DeviceBuffer::DeviceBuffer(size_t bytes, MemoryBudget* budget) : bytes_(bytes), budget_(budget) {
  if (bytes == 0) return;
  if (budget_) budget_->reserve(bytes, "device buffer");
  const cudaError_t status = cudaMalloc(&data_, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (budget_) budget_->release(bytes);
    data_ = nullptr;
    HYMOE_THROW(kResourceExhausted, "cudaMalloc of {} bytes failed: {}", bytes,
                cudaGetErrorString(status));
  }
  g_live_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

DeviceBuffer::~DeviceBuffer() { reset(); }

void DeviceBuffer::reset() noexcept {
  if (data_) {
    (void)cudaFree(data_);
    g_live_bytes.fetch_sub(bytes_, std::memory_order_relaxed);
    if (budget_) budget_->release(bytes_);
  }
  data_ = nullptr;
  bytes_ = 0;
  budget_ = nullptr;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      budget_(std::exchange(other.budget_, nullptr)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    budget_ = std::exchange(other.budget_, nullptr);
  }
  return *this;
}

void DeviceBuffer::copy_from_host(const void* src, size_t bytes, cudaStream_t stream,
                                  size_t offset) {
  HYMOE_CHECK(offset <= bytes_ && bytes <= bytes_ - offset, kInvalidArgument,
              "copy of {} bytes at {} overruns a device buffer of {}", bytes, offset, bytes_);
  HYMOE_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(data_) + offset, src, bytes,
                                   cudaMemcpyHostToDevice, stream));
}

void DeviceBuffer::copy_to_host(void* dst, size_t bytes, cudaStream_t stream,
                                size_t offset) const {
  HYMOE_CHECK(offset <= bytes_ && bytes <= bytes_ - offset, kInvalidArgument,
              "copy of {} bytes at {} overruns a device buffer of {}", bytes, offset, bytes_);
  HYMOE_CUDA_CHECK(cudaMemcpyAsync(dst, static_cast<const char*>(data_) + offset, bytes,
                                   cudaMemcpyDeviceToHost, stream));
}

void DeviceBuffer::fill_bytes(int value, cudaStream_t stream) {
  if (bytes_) HYMOE_CUDA_CHECK(cudaMemsetAsync(data_, value, bytes_, stream));
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t status = cudaHostAlloc(&data_, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    data_ = nullptr;
    HYMOE_THROW(kResourceExhausted, "cudaHostAlloc of {} bytes failed: {}", bytes,
                cudaGetErrorString(status));
  }
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) (void)cudaFreeHost(data_);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) (void)cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace hymoe::gpu
