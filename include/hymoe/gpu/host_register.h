// Host memory registered for DMA (cudaHostRegister): copies from it to the device run at the
// pinned rate instead of going through the driver's staging buffers. Used over the WeightStore's
// regions so that stream-loaded weights (SLP) copy at the measured pinned host-to-device rate.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace hymoe::gpu {

struct HostSpan {
  const void* data = nullptr;
  size_t bytes = 0;
};

class HostRegistration {
 public:
  HostRegistration() = default;
  // Registers every span (read-only where the device supports it, portable to every device).
  // Throws hymoe::Error (kResourceExhausted) naming the span and the CUDA error when one fails;
  // the spans registered before it are unregistered first. Empty spans are skipped.
  explicit HostRegistration(std::span<const HostSpan> spans);
  ~HostRegistration();
  HostRegistration(HostRegistration&& other) noexcept;
  HostRegistration& operator=(HostRegistration&& other) noexcept;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;

  size_t bytes() const { return bytes_; }
  double seconds() const { return seconds_; }  // what registering took
  // Whether [p, p + n) lies inside one registered span.
  bool covers(const void* p, size_t n) const;

 private:
  void release() noexcept;
  std::vector<HostSpan> spans_;
  size_t bytes_ = 0;
  double seconds_ = 0;
};

}  // namespace hymoe::gpu
