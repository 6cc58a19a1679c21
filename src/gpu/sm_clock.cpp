// SmClockProbe (hymoe/gpu/sm_clock.h).
#include "hymoe/gpu/sm_clock.h"

#include <cstdint>

#include "hymoe/common/error.h"
#include "hymoe/gpu/cuda_check.h"
#include "kernel_launch.h"

namespace hymoe::gpu {

SmClockProbe::SmClockProbe() : out_(sizeof(float)) {}

double SmClockProbe::measure_mhz(cudaStream_t stream, double spin_us) {
  HYMOE_CHECK(spin_us >= 1.0 && spin_us <= 1e6, kInvalidArgument,
              "SmClockProbe: spin_us {} (1 .. 1e6)", spin_us);
  HYMOE_CUDA_CHECK(
      launch::sm_clock(static_cast<uint64_t>(spin_us * 1e3), out_.as<float>(), stream));
  float mhz = 0.0f;
  out_.copy_to_host(&mhz, sizeof(mhz), stream);
  HYMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return mhz;
}

}  // namespace hymoe::gpu
