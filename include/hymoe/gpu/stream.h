// RAII CUDA streams and events. Copy is deleted; moves transfer ownership.
#pragma once

#include <cuda_runtime_api.h>

namespace hymoe::gpu {

// The highest priority a stream can have on the current device (the numerically lowest value):
// decode steps' kernels get the SMs first while a long prefill runs beside them.
int highest_stream_priority();

class Stream {
 public:
  // A non-blocking stream on the current device; priority: lower number = higher priority.
  explicit Stream(int priority = 0);
  ~Stream();
  Stream(Stream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }  // NOLINT: used as a launch argument
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  // timing = false gives a lighter event for ordering only (cudaEventDisableTiming); blocking:
  // synchronize() sleeps instead of spinning (cudaEventBlockingSync), for host threads that wait
  // long beside CPU work, e.g. stream-loading prefill's beside the decode's CPU experts.
  explicit Event(bool timing = true, bool blocking = false);
  ~Event();
  Event(Event&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  void synchronize() const;
  bool done() const;  // cudaEventQuery: true when the recorded work has finished
  // Makes `stream` wait for this event's recorded work.
  void wait_on(cudaStream_t stream) const;
  // Milliseconds between two recorded timing events (start before end).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace hymoe::gpu
