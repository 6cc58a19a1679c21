// The SM clock of the current device, as it runs: the H200's moves between ~1.0 and 1.98 GHz with
// its power state (docs/experiments.md, MLA decode), and every compute-bound figure moves
// with it. Measured by a one-warp kernel that counts clock cycles across the GPU's global timer
// (kernels/cuda/sm_clock.cuh), so it needs nothing beyond the CUDA runtime.
#pragma once

#include <cuda_runtime_api.h>

#include "hymoe/gpu/buffer.h"

namespace hymoe::gpu {

class SmClockProbe {
 public:
  SmClockProbe();  // 4 bytes of device memory for the result

  // MHz of the SM that runs the probe, over `spin_us` microseconds (1 .. 1e6) of the global
  // timer, enqueued on `stream` after whatever is queued there; synchronizes the stream. Throws
  // hymoe::Error (kInvalidArgument for spin_us, else the CUDA failure).
  double measure_mhz(cudaStream_t stream, double spin_us = 200.0);

 private:
  DeviceBuffer out_;
};

}  // namespace hymoe::gpu
