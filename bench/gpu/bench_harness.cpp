// hymoe-bench-gpu's harness (bench_harness.h): random buffers and the graph timing.
#include "bench_harness.h"

#include "bench_fill.h"
#include "hymoe/common/error.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/graph.h"

namespace hymoe::gpu::bench {
namespace {

uint64_t g_seed = 0x1234567;

}  // namespace

uint64_t next_seed() { return g_seed += 0x9e3779b97f4a7c15ull; }

DeviceBuffer random_fp8(size_t count, cudaStream_t s) {
  DeviceBuffer b(count);
  HYMOE_CUDA_CHECK(fill_fp8(b.data(), count, next_seed(), s));
  return b;
}
DeviceBuffer random_bf16(size_t count, cudaStream_t s) {
  DeviceBuffer b(count * 2);
  HYMOE_CUDA_CHECK(fill_bf16(b.data(), count, next_seed(), s));
  return b;
}
DeviceBuffer random_f32(size_t count, float lo, float hi, cudaStream_t s) {
  DeviceBuffer b(count * 4);
  HYMOE_CUDA_CHECK(fill_f32(b.as<float>(), count, lo, hi, next_seed(), s));
  return b;
}

double time_enqueue(Bench& bench, const std::string& label, bool graph,
                    const std::function<void()>& enqueue, bool steady) {
  cudaStream_t s = bench.stream();
  auto timed = [&](const std::function<void()>& fn) {
    return steady ? bench.steady_ms(fn) : bench.time_ms(fn);
  };
  if (!graph) return timed(enqueue);
  try {
    const CapturedGraph g(s, enqueue);
    return timed([&] { g.launch(s); });
  } catch (const Error& e) {
    std::printf("%-52s unsupported: %s\n", label.c_str(), e.message().c_str());
    (void)cudaGetLastError();
    return 0;
  }
}

}  // namespace hymoe::gpu::bench
