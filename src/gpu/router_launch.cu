// Launcher of the noaux_tc router kernel.
#include "kernel_launch.h"
#include "router_noaux_tc.cuh"

namespace hymoe::gpu::launch {

cudaError_t route_noaux_tc(const RouterParams& p, cudaStream_t stream) {
  constexpr int kWarps = kernels::kRouterWarpsPerBlock;
  const int blocks = (p.tokens + kWarps - 1) / kWarps;
  kernels::router_noaux_tc_kernel<<<blocks, kWarps * kernels::kWarpSize, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
