// Wall-clock seconds for profiles and load logs.
#pragma once

#include <chrono>

namespace hymoe {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

}  // namespace hymoe
