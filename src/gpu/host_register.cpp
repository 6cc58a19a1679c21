#include "hymoe/gpu/host_register.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <utility>

#include "hymoe/common/error.h"

namespace hymoe::gpu {

HostRegistration::HostRegistration(std::span<const HostSpan> spans) {
  const auto t0 = std::chrono::steady_clock::now();
  int device = 0, read_only = 0;
  if (cudaGetDevice(&device) == cudaSuccess)
    (void)cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, device);
  const unsigned flags = cudaHostRegisterPortable | (read_only ? cudaHostRegisterReadOnly : 0u);
  for (const HostSpan& s : spans) {
    if (s.bytes == 0) continue;
    const cudaError_t e = cudaHostRegister(const_cast<void*>(s.data), s.bytes, flags);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      release();
      HYMOE_THROW(kResourceExhausted, "cudaHostRegister of {} bytes at {} failed: {} (pinning the weights for DMA)",
                  s.bytes, s.data, cudaGetErrorString(e));
    }
    spans_.push_back(s);
    bytes_ += s.bytes;
  }
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

HostRegistration::~HostRegistration() { release(); }

HostRegistration::HostRegistration(HostRegistration&& other) noexcept
    : spans_(std::move(other.spans_)), bytes_(std::exchange(other.bytes_, 0)), seconds_(other.seconds_) {
  other.spans_.clear();
}

HostRegistration& HostRegistration::operator=(HostRegistration&& other) noexcept {
  if (this != &other) {
    release();
    spans_ = std::move(other.spans_);
    other.spans_.clear();
    bytes_ = std::exchange(other.bytes_, 0);
    seconds_ = other.seconds_;
  }
  return *this;
}

void HostRegistration::release() noexcept {
  for (const HostSpan& s : spans_) (void)cudaHostUnregister(const_cast<void*>(s.data));
  spans_.clear();
  bytes_ = 0;
}

bool HostRegistration::covers(const void* p, size_t n) const {
  const auto* b = static_cast<const std::byte*>(p);
  for (const HostSpan& s : spans_) {
    const auto* lo = static_cast<const std::byte*>(s.data);
    if (b >= lo && b + n <= lo + s.bytes) return true;
  }
  return false;
}

}  // namespace hymoe::gpu
