#include "hymoe/gpu/stream.h"

#include <utility>

#include "hymoe/gpu/cuda_check.h"

namespace hymoe::gpu {

int highest_stream_priority() {
  int least = 0, greatest = 0;
  HYMOE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return greatest;
}

Stream::Stream(int priority) {
  HYMOE_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
}

Stream::~Stream() {
  if (stream_) (void)cudaStreamDestroy(stream_);
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_) (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const { HYMOE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event(bool timing, bool blocking) {
  const unsigned flags = (timing ? cudaEventDefault : cudaEventDisableTiming) | (blocking ? cudaEventBlockingSync : 0u);
  HYMOE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
}

Event::~Event() {
  if (event_) (void)cudaEventDestroy(event_);
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(cudaStream_t stream) { HYMOE_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void Event::synchronize() const { HYMOE_CUDA_CHECK(cudaEventSynchronize(event_)); }

bool Event::done() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  HYMOE_CUDA_CHECK(status);
  return true;
}

void Event::wait_on(cudaStream_t stream) const {
  HYMOE_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0.0f;
  HYMOE_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

}  // namespace hymoe::gpu
