// bench/cpu/probes/stream_ops.cpp: one core's streaming read bandwidth against the vector work
// done per 64-byte line (S address streams, OPS vdpbf16ps per line over 16 accumulators, so that
// no dependency chain bounds it; optional software prefetch D bytes ahead). Not built by CMake:
//   g++ -O2 -march=native -std=c++20 bench/cpu/probes/stream_ops.cpp -o /tmp/stream_ops && /tmp/stream_ops
// Tells a memory-system bound from an instructions-per-line bound (512 MB, transparent huge pages,
// best of 4 passes); used for the FP8 GEMV on the 2-core Zen 5 dev VM (docs/experiments.md, CPU).
#include <immintrin.h>
#include <sys/mman.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
// S streams, OPS dpbf16 per line spread over 16 accumulators (no latency bound), SW prefetch
// (hint H: 0 none, 1 T0, 2 T1, 3 NTA) D bytes ahead in each stream.
template <int S, int OPS, int H>
double run(const uint8_t* buf, size_t bytes, size_t D) {
  const size_t part = bytes / S / 64 * 64;
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < part; i += 64) {
#pragma GCC unroll 16
    for (int s = 0; s < S; ++s) {
      const uint8_t* p = buf + s * part + i;
      if constexpr (H == 1) _mm_prefetch((const char*)p + D, _MM_HINT_T0);
      if constexpr (H == 2) _mm_prefetch((const char*)p + D, _MM_HINT_T1);
      if constexpr (H == 3) _mm_prefetch((const char*)p + D, _MM_HINT_NTA);
      __m512i v = _mm512_load_si512(p);
#pragma GCC unroll 16
      for (int o = 0; o < OPS; ++o) {
        const int k = (s * OPS + o) % 16;
        acc[k] = _mm512_dpbf16_ps(acc[k], (__m512bh)v, (__m512bh)v);
      }
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  __m512 t = acc[0];
  for (int k = 1; k < 16; ++k) t = _mm512_add_ps(t, acc[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, t);
  volatile float sink = lanes[0];  // keeps the sums
  (void)sink;
  return double(part) * S / std::chrono::duration<double>(t1 - t0).count() / 1e9;
}
int main() {
  const size_t bytes = size_t(512) << 20;
  uint8_t* buf = (uint8_t*)mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  madvise(buf, bytes, MADV_HUGEPAGE);
  for (size_t i = 0; i < bytes; i += 8) *(uint64_t*)(buf + i) = i * 0x9E3779B97F4A7C15ull;
#define R(S, O, H, D) { double best = 0; for (int k = 0; k < 4; ++k) { double g = run<S, O, H>(buf, bytes, D); if (g > best) best = g; } std::printf("streams %2d ops %2d hint %d dist %6zu: %.1f GB/s\n", S, O, H, (size_t)D, best); }
  R(8,4,0,0) R(8,8,0,0) R(8,12,0,0)
  R(8,8,2,1024) R(8,8,2,4096) R(8,8,2,16384) R(8,8,1,1024) R(8,8,1,4096) R(8,8,3,4096)
  R(4,8,0,0) R(4,8,2,4096) R(2,8,0,0) R(2,8,2,4096) R(4,2,0,0) R(4,12,0,0)
}
