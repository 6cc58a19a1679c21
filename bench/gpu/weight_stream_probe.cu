#include "weight_stream_probe.h"

namespace hymoe::gpu::bench {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint4 load_nc(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// kInFlight: K blocks of loads per CTA before their first use.
template <PanelOrder kOrder, int kInFlight>
__global__ void __launch_bounds__(kThreads) weight_stream_probe_kernel(const uint8_t* __restrict__ w,
                                                                       int experts, int n, int k,
                                                                       uint32_t* out) {
  const int tiles_n = n / 128, kblocks = k / 128, items = experts * tiles_n;
  const int t = threadIdx.x;
  uint32_t acc = 0;
  for (int id = blockIdx.x; id < items; id += gridDim.x) {
    const int e = id / tiles_n, x = id % tiles_n;
    const uint8_t* panel = w + (static_cast<size_t>(e) * n + static_cast<size_t>(x) * 128) * k;
    for (int kb = 0; kb < kblocks; kb += kInFlight) {
      uint4 v[kInFlight][4];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int b = min(kb + u, kblocks - 1);  // (past the last block: it again, from L2)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = t + kThreads * j;  // 16-byte chunk c of the block's 16 KB
          const uint8_t* p = kOrder == PanelOrder::kBoxes
                                 ? panel + static_cast<size_t>(c / 8) * k + b * 128 + (c % 8) * 16
                                 : panel + static_cast<size_t>(b) * 16384 + c * 16;
          v[u][j] = load_nc(p);
        }
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc ^= v[u][j].x ^ v[u][j].y ^ v[u][j].z ^ v[u][j].w;
    }
  }
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if (t % 32 == 0) atomicXor(out + blockIdx.x, acc);
}

}  // namespace

cudaError_t weight_stream_probe(const void* w, int experts, int n, int k, PanelOrder order, int blocks,
                                uint32_t* out, cudaStream_t stream, int in_flight) {
  if (n % 128 != 0 || k % 128 != 0 || blocks <= 0 || (in_flight != 6 && in_flight != 12))
    return cudaErrorInvalidValue;
  const auto* src = static_cast<const uint8_t*>(w);
  auto launch = [&]<PanelOrder kOrder, int kInFlight>() {
    weight_stream_probe_kernel<kOrder, kInFlight><<<blocks, kThreads, 0, stream>>>(src, experts, n, k, out);
  };
  if (order == PanelOrder::kBoxes) {
    if (in_flight == 6) launch.template operator()<PanelOrder::kBoxes, 6>();
    else launch.template operator()<PanelOrder::kBoxes, 12>();
  } else {
    if (in_flight == 6) launch.template operator()<PanelOrder::kContiguous, 6>();
    else launch.template operator()<PanelOrder::kContiguous, 12>();
  }
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::bench
