// The pinned host-to-device copy ceiling of the GPU commands (stream-bench, slp-bench): one 1 GiB
// copy (or the largest span, if smaller) out of registered host memory, best of 3. Header-only,
// CUDA builds (HYMOE_CLI_HAS_HYBRID) only.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/host_register.h"
#include "hymoe/gpu/stream.h"

namespace hymoe::cli {

// GB/s of the copy from the largest span (registered for DMA by the caller) to the device.
inline double pinned_copy_ceiling(const std::vector<gpu::HostSpan>& spans, gpu::Stream& s) {
  const std::byte* src = nullptr;
  size_t src_bytes = 0;
  for (const auto& sp : spans)
    if (sp.bytes > src_bytes) {
      src = static_cast<const std::byte*>(sp.data);
      src_bytes = sp.bytes;
    }
  const size_t probe = std::min<size_t>(size_t{1} << 30, src_bytes);
  gpu::DeviceBuffer dst(probe);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    gpu::Event e0, e1;
    e0.record(s);
    HYMOE_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, probe, cudaMemcpyHostToDevice, s));
    e1.record(s);
    e1.synchronize();
    best = std::max(best, static_cast<double>(probe) / 1e9 / (gpu::Event::elapsed_ms(e0, e1) / 1e3));
  }
  return best;
}

}  // namespace hymoe::cli
