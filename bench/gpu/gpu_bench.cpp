// hymoe-bench-gpu [--out FILE] [--min-tokens N] [--max-tokens N] [--only SECTION,...]
//                 [--gemv-shape S] [--moe-backend NAME] [--mla-case TEXT]
// Measures the GPU's ceilings (device-to-device copy bandwidth, cuBLASLt BF16 GEMM and FP8 GEMM
// with per-tensor scales at large square sizes) and then every kernel of the library against the
// ceiling that bounds it, in the same run. Timing: CUDA events around batches of back-to-back
// launches after a warm-up, median of 5 batches; the grouped expert GEMM of kAuto (or of
// --moe-backend) also in the power-limited steady state beside an FP8 ceiling timed the same way
// (Bench::steady_ms), and MLA decode's contest rows (mla_decode_steady) and cuDNN's MLA prefill
// beside copy and BF16 ceilings timed that way. Inputs are random (device-side hash fill, never
// zeros); inputs larger than L2 or rotated among copies so that repeats do not run from cache.
// The harness (timer, records, random buffers) is bench_harness.h; the MLA attention sections
// are mla_bench.cpp.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <random>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_fill.h"
#include "bench_harness.h"
#include "mla_bench.h"
#include "weight_stream_probe.h"
#include "hymoe/gpu/activation.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cublaslt.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "hymoe/gpu/fp8_gemv.h"
#include "hymoe/gpu/fp8_quant.h"
#include "hymoe/gpu/gemm.h"
#include "hymoe/gpu/mla_decode.h"
#include "hymoe/gpu/moe.h"
#include "hymoe/gpu/norm.h"
#include "hymoe/gpu/rope.h"
#include "hymoe/gpu/router.h"
#include "hymoe/gpu/sampling.h"
#include "hymoe/gpu/stream.h"

namespace hymoe::gpu {
namespace {

using bench::Bench;
using bench::Ceilings;
using bench::median;
using bench::next_seed;
using bench::random_bf16;
using bench::random_f32;
using bench::random_fp8;
using bench::time_enqueue;
using bench::bench_mla_decode;
using bench::bench_mla_prefill;

// GemmPlan::tune over cuBLASLt's candidates (3 launches each); prints what it chose. True when
// the choice is not the heuristic's first (so the caller times it again under its own name).
// wide: GemmPlan::widen first (cuBLASLt's other configurations; for launches of ~1 ms or less).
bool tune_plan(GemmPlan& plan, const GemmOperands& ops, cudaStream_t s, const std::string& what,
               bool wide) {
  const int heuristic = plan.algo_count();
  const int added = wide ? plan.widen() : 0;
  const std::vector<double> ms = plan.tune(ops, s, 3);
  if (ms.empty()) return false;
  std::printf("tune %s: %d candidates (+%d by widen), heuristic's first %.3f ms, chose #%d %.3f ms (%s)\n",
              what.c_str(), heuristic, added, ms[0], plan.algo(), ms[static_cast<size_t>(plan.algo())],
              plan.algo_description(plan.algo()).c_str());
  return plan.algo() != 0;
}

Ceilings measure_ceilings(Bench& bench, const CublasLt& lt) {
  Ceilings c;
  cudaStream_t s = bench.stream();
  {
    const size_t bytes = size_t{2} << 30;
    DeviceBuffer src = random_fp8(bytes, s), dst(bytes);
    const double ms = bench.time_ms([&] {
      HYMOE_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s));
    });
    c.copy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;  // bytes read + bytes written
    bench.add({"ceiling/d2d_copy_2GiB (read+write)", c.copy_gbs, "GB/s", 0, ""});
  }
  for (GemmKind kind : {GemmKind::kBf16, GemmKind::kFp8TensorScale}) {
    double best = 0.0;
    for (int n : {8192, 16384}) {
      const GemmShape shape{n, n, n, n, n, n};
      const size_t elem = kind == GemmKind::kBf16 ? 2 : 1;
      DeviceBuffer a = elem == 2 ? random_bf16(size_t(n) * n, s) : random_fp8(size_t(n) * n, s);
      DeviceBuffer b = elem == 2 ? random_bf16(size_t(n) * n, s) : random_fp8(size_t(n) * n, s);
      DeviceBuffer d(size_t(n) * n * 2);
      // Separate allocations: cuBLASLt refuses a scale pointer that is not 16-byte aligned.
      DeviceBuffer sa = random_f32(1, 0.5f, 1.0f, s), sb = random_f32(1, 0.5f, 1.0f, s);
      GemmPlan plan(lt, kind, shape);
      const GemmOperands ops{a.data(), sa.as<float>(), b.data(), sb.as<float>(), d.as<Bf16>()};
      const double ms = bench.time_ms([&] { plan.run(ops, s); });
      const double tflops = plan.flops() / (ms * 1e-3) / 1e12;
      best = std::max(best, tflops);
      bench.add({fmt::format("ceiling/cublaslt_{}_gemm_{}^3", gemm_kind_name(kind), n), tflops,
                 "TFLOP/s", 0, ""});
      // The fastest of cuBLASLt's candidates (GemmPlan::tune) is a ceiling too, where it differs.
      if (tune_plan(plan, ops, s, fmt::format("ceiling {} {}^3", gemm_kind_name(kind), n), n <= 8192)) {
        const double tuned = plan.flops() / (bench.time_ms([&] { plan.run(ops, s); }) * 1e-3) / 1e12;
        best = std::max(best, tuned);
        bench.add({fmt::format("ceiling/cublaslt_{}_gemm_{}^3, tuned", gemm_kind_name(kind), n),
                   tuned, "TFLOP/s", 0, ""});
      }
    }
    (kind == GemmKind::kBf16 ? c.bf16_tflops : c.fp8_tflops) = best;
  }
  return c;
}

// A GEMM ceiling (cuBLASLt at 8192^3 and 16384^3, the larger; BF16, or FP8 with per-tensor
// scales) timed by Bench::steady_ms: the ceiling of a figure timed the same way, next to it in
// the same process.
double steady_gemm_ceiling(Bench& bench, const CublasLt& lt, GemmKind kind) {
  cudaStream_t s = bench.stream();
  double best = 0.0;
  for (int n : {8192, 16384}) {
    const GemmShape shape{n, n, n, n, n, n};
    const bool bf16 = kind == GemmKind::kBf16;
    DeviceBuffer a = bf16 ? random_bf16(size_t(n) * n, s) : random_fp8(size_t(n) * n, s);
    DeviceBuffer b = bf16 ? random_bf16(size_t(n) * n, s) : random_fp8(size_t(n) * n, s);
    DeviceBuffer d(size_t(n) * n * 2);
    DeviceBuffer sa = random_f32(1, 0.5f, 1.0f, s), sb = random_f32(1, 0.5f, 1.0f, s);
    GemmPlan plan(lt, kind, shape);
    const GemmOperands ops{a.data(), sa.as<float>(), b.data(), sb.as<float>(), d.as<Bf16>()};
    tune_plan(plan, ops, s, fmt::format("steady ceiling {} {}^3", gemm_kind_name(kind), n),
              n <= 8192);  // the fastest candidate
    const double ms = bench.steady_ms([&] { plan.run(ops, s); });
    const double tflops = plan.flops() / (ms * 1e-3) / 1e12;
    best = std::max(best, tflops);
    bench.add({fmt::format("ceiling/cublaslt_{}_gemm_{}^3, steady state", gemm_kind_name(kind), n),
               tflops, "TFLOP/s", 0, "", bench.last_steady_mhz()});
  }
  return best;
}

// The copy and BF16 GEMM ceilings in the steady state, measured where a section's steady rows
// are (the FP8 one is left at the short-run figure: no steady row divides by it but moe's, which
// times its own).
Ceilings steady_ceilings(Bench& bench, const CublasLt& lt, const Ceilings& short_run) {
  Ceilings c = short_run;
  cudaStream_t s = bench.stream();
  const size_t bytes = size_t{2} << 30;
  DeviceBuffer src = random_fp8(bytes, s), dst(bytes);
  const double ms = bench.steady_ms([&] {
    HYMOE_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s));
  });
  c.copy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
  bench.add({"ceiling/d2d_copy_2GiB (read+write), steady state", c.copy_gbs, "GB/s", 0, "",
             bench.last_steady_mhz()});
  c.bf16_tflops = steady_gemm_ceiling(bench, lt, GemmKind::kBf16);
  return c;
}

struct Linear {
  const char* name;
  int n, k;  // weight [n, k]
};

// The FP8 projections of a DeepSeek-V3 layer. q_a and kv_a read the same hidden states, so a
// prefill pipeline runs them as one GEMM over the two weights stacked along N (q_a's 1536 rows
// are 12 whole scale blocks, so the stacked block scales are the two tensors' scales one after
// the other); kv_a alone (4.5 column tiles of 128) fills a 132-SM GPU's waves poorly.
constexpr Linear kLinears[] = {
    {"q_a 1536x7168", 1536, 7168},       {"q_b 24576x1536", 24576, 1536},
    {"kv_a 576x7168", 576, 7168},        {"q_a+kv_a stacked 2112x7168", 2112, 7168},
    {"o 7168x16384", 7168, 16384},
    {"dense_gate 18432x7168", 18432, 7168}, {"dense_down 7168x18432", 7168, 18432},
};

void bench_block_gemm(Bench& bench, const CublasLt& lt, const Ceilings& c, int max_tokens) {
  cudaStream_t s = bench.stream();
  size_t max_a = 0, max_b = 0, max_d = 0, max_sb = 0;
  for (const Linear& l : kLinears) {
    max_a = std::max(max_a, size_t(max_tokens) * l.k);
    max_b = std::max(max_b, size_t(l.n) * l.k);
    max_d = std::max(max_d, size_t(max_tokens) * l.n);
    max_sb = std::max(max_sb, size_t((l.n + 127) / 128) * block_scale_ld(l.k));
  }
  DeviceBuffer a = random_fp8(max_a, s), b = random_fp8(max_b, s), d(max_d * 2);
  DeviceBuffer sa = random_f32(max_a / 128 + 1, 0.001f, 0.01f, s);
  DeviceBuffer sb = random_f32(max_sb, 0.0005f, 0.004f, s);
  for (int m = 4096; m <= max_tokens; m *= 4) {
    for (const Linear& l : kLinears) {
      const GemmShape shape{m, l.n, l.k, l.k, l.k, l.n};
      // kAuto (cuBLASLt where it has an algorithm) and hymoe's wgmma kernels (sm_90a: kWgmma
      // and the warp-specialised persistent one) at every size; the 64-row tiles and the
      // mma.sync kernel beside them at the smallest size.
      for (const GemmBackend backend : {GemmBackend::kAuto, GemmBackend::kWgmma,
                                        GemmBackend::kWgmmaWs, GemmBackend::kWgmmaWsPipe,
                                        GemmBackend::kWgmmaWsTma, GemmBackend::kWgmmaWsTmaC,
                                        GemmBackend::kWgmma64,
                                        GemmBackend::kWgmmaWs64,
                                        GemmBackend::kHymoe}) {
        if ((backend == GemmBackend::kHymoe || backend == GemmBackend::kWgmma64 ||
             backend == GemmBackend::kWgmmaWs64) &&
            m != 4096)
          continue;
        std::string name = fmt::format("fp8_block_gemm/{} m={}", l.name, m);
        try {
          GemmPlan plan(lt, GemmKind::kFp8BlockScale, shape, backend);
          name += fmt::format(" [{}]", gemm_backend_name(plan.backend()));
          const GemmOperands ops{a.data(), sa.as<float>(), b.data(), sb.as<float>(), d.as<Bf16>()};
          const double ms = bench.time_ms([&] { plan.run(ops, s); });
          bench.add({name, plan.flops() / (ms * 1e-3) / 1e12, "TFLOP/s", c.fp8_tflops,
                     "fp8 tensor-scale gemm"});
          // cuBLASLt's plans again with the fastest of its candidates (up to 16K tokens: at 64K
          // one candidate's launches take tens of ms), at 4K among all its configurations.
          if (m <= 16384 &&
              tune_plan(plan, ops, s, fmt::format("{} m={}", l.name, m), m == 4096)) {
            const double tuned = bench.time_ms([&] { plan.run(ops, s); });
            bench.add({fmt::format("fp8_block_gemm/{} m={} [cublaslt,tuned]", l.name, m),
                       plan.flops() / (tuned * 1e-3) / 1e12, "TFLOP/s", c.fp8_tflops,
                       "fp8 tensor-scale gemm"});
          }
        } catch (const Error& e) {
          std::printf("%-52s unsupported: %s\n", name.c_str(), e.message().c_str());
        }
      }
    }
  }
}

void bench_quant(Bench& bench, const Ceilings& c) {
  cudaStream_t s = bench.stream();
  const int tokens = 16384, cols = 7168;
  DeviceBuffer x = random_bf16(size_t(tokens) * cols, s), q(size_t(tokens) * cols);
  DeviceBuffer scales(size_t(tokens) * (cols / 128) * 4);
  const Fp8QuantParams p{x.as<Bf16>(), q.as<Fp8E4M3>(), scales.as<float>(), tokens, cols,
                         cols, cols, tokens};
  const double ms = bench.time_ms([&] { quantize_fp8_per_token_block(p, s); });
  const double bytes = double(tokens) * cols * 3 + scales.bytes();
  bench.add({"fp8_quant 16384x7168", bytes / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
}

const char* gemv_impl_name(Fp8GemvImpl impl) {
  switch (impl) {
    case Fp8GemvImpl::kTensorCores: return "mma";
    case Fp8GemvImpl::kCudaCores: return "cuda-cores";
    case Fp8GemvImpl::kStream: return "stream";
    default: return "auto";
  }
}

// An FP8-activation GEMV over x quantised into xq / xs (x_scale_ld kGemvMaxTokens), k-strided
// rows.
Fp8GemvQ8Params gemv_q8_params(const Fp8E4M3* w, const float* w_scales, const DeviceBuffer& xq,
                               const DeviceBuffer& xs, Bf16* y, int tokens, int n, int k, int64_t ldy) {
  Fp8GemvQ8Params p;
  p.w = w;
  p.w_scales = w_scales;
  p.x = xq.as<Fp8E4M3>();
  p.x_scales = xs.as<float>();
  p.y = y;
  p.tokens = tokens;
  p.n = n;
  p.k = k;
  p.ldw = k;
  p.scale_ld = (k + 127) / 128;
  p.ldx = k;
  p.x_scale_ld = kGemvMaxTokens;
  p.ldy = ldy;
  return p;
}

// only_shape: one of the shapes' names (hymoe-bench-gpu --gemv-shape, for a profiler run), or all.
void bench_gemv(Bench& bench, const Ceilings& c, const DeviceInfo& info, const std::string& only_shape) {
  cudaStream_t s = bench.stream();
  const Linear shapes[] = {{"7168x2048", 7168, 2048}, {"2048x7168", 2048, 7168},
                           {"24576x1536", 24576, 1536}, {"7168x16384", 7168, 16384}};
  for (const Linear& l : shapes) {
    if (!only_shape.empty() && only_shape != l.name) continue;
    const size_t wbytes = size_t(l.n) * l.k;
    const int kb = (l.k + 127) / 128, nb = (l.n + 127) / 128;
    // Enough weight copies (>= 512 MB) that a repeat never finds its weight in L2.
    const int copies = static_cast<int>(std::max<size_t>(1, (size_t{512} << 20) / wbytes));
    DeviceBuffer w = random_fp8(wbytes * copies, s);
    DeviceBuffer sc = random_f32(size_t(nb) * kb * copies, 0.0005f, 0.004f, s);
    DeviceBuffer x = random_bf16(size_t(kGemvMaxTokens) * l.k, s);
    DeviceBuffer y(size_t(kGemvMaxTokens) * l.n * 2);
    {  // What one launch streaming this many bytes reaches (same rotation over the copies).
      const int blocks = 8 * info.multiprocessors;
      DeviceBuffer fold(size_t(blocks) * 4);
      int next = 0;
      const double ms = bench.time_ms([&] {
        const int i = next++ % copies;
        HYMOE_CUDA_CHECK(bench::read_probe(w.as<uint8_t>() + size_t(i) * wbytes, wbytes,
                                           fold.as<uint32_t>(), blocks, s));
      });
      bench.add({fmt::format("ceiling/read_probe same bytes as {} ({:.1f} MB)", l.name, wbytes / 1e6),
                 wbytes / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
      // The same bytes in the q8 GEMV's pattern and grid without its math (a diagnostic, not a
      // ceiling: read_probe_gemv_tiles).
      DeviceBuffer tile_fold(size_t(l.n + 15) / 16 * 4);
      const double tms = bench.time_ms([&] {
        const int i = next++ % copies;
        HYMOE_CUDA_CHECK(bench::read_probe_gemv_tiles(w.as<uint8_t>() + size_t(i) * wbytes, l.n, l.k,
                                                      tile_fold.as<uint32_t>(), s));
      });
      bench.add({fmt::format("read_probe_gemv_tiles/{} (q8 rounds' loads, no math)", l.name),
                 wbytes / (tms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
    }
    // The stream kernel also with one block an SM (stream_blocks_per_sm = 1: "stream/1"; the
    // default is 2). per_sm 0: the default.
    for (const auto& variant : {std::pair{Fp8GemvImpl::kTensorCores, 0}, std::pair{Fp8GemvImpl::kCudaCores, 0},
                                std::pair{Fp8GemvImpl::kStream, 0}, std::pair{Fp8GemvImpl::kStream, 1}}) {
      const Fp8GemvImpl impl = variant.first;
      const int per_sm = variant.second;
      if (impl == Fp8GemvImpl::kStream && info.sm() < 90) continue;
      for (int tokens : {1, 2, 4, 8}) {
        if (impl == Fp8GemvImpl::kCudaCores && tokens > 1) continue;  // the cross-check: 1 token
        int next = 0;
        const double ms = bench.time_ms([&] {
          const int i = next++ % copies;
          Fp8GemvParams p{w.as<Fp8E4M3>() + size_t(i) * wbytes, sc.as<float>() + size_t(i) * nb * kb,
                          x.as<Bf16>(), y.as<Bf16>(), tokens, l.n, l.k, l.k, kb, l.k, l.n};
          p.impl = impl;
          if (per_sm > 0) p.stream_blocks_per_sm = per_sm;
          fp8_gemv(p, s);
        });
        const double bytes = double(wbytes) + nb * kb * 4.0;
        bench.add({fmt::format("fp8_gemv[{}{}]/{} tokens={}", gemv_impl_name(impl), per_sm > 0 ? "/1" : "",
                               l.name, tokens),
                   bytes / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
      }
    }
    if (fp8_gemv_q8_supported()) {  // FP8 activations: x quantised once, the GEMV alone timed
      DeviceBuffer xq(size_t(kGemvMaxTokens) * l.k), xs(size_t(kb) * kGemvMaxTokens * 4);
      quantize_fp8_per_token_block({x.as<Bf16>(), xq.as<Fp8E4M3>(), xs.as<float>(), kGemvMaxTokens, l.k,
                                    l.k, l.k, kGemvMaxTokens},
                                   s);
      // The launcher's block shape and staging ("q8"), each block shape ("q8/w4" ...: warps a
      // tile) at 1 token, the launcher's shape with each staging forced ("q8/unstaged",
      // "q8/scales", "q8/scales+x": warps -1, -2, -3) at 1 and 8 tokens, and BF16 x quantised by
      // the call ("q8/bf16x", warps -4: the quantiser launch and the GEMV).
      // The block shapes and stagings are the rounds kernel's (Fp8GemvQ8Loads::kRounds); "q8" is the
      // launcher's choice of loads too, "q8/rounds" and "q8/ring" (and "q8/ring/w4" ...: the ring,
      // which stages nothing, with each block shape) force them.
      for (const Fp8GemvQ8Loads loads : {Fp8GemvQ8Loads::kAuto, Fp8GemvQ8Loads::kRounds, Fp8GemvQ8Loads::kRing})
      for (const int warps : {0, 4, 8, 16, -1, -2, -3, -4}) {
        const bool ring = loads == Fp8GemvQ8Loads::kRing, rounds = loads == Fp8GemvQ8Loads::kRounds;
        if (loads == Fp8GemvQ8Loads::kAuto ? warps != 0 && warps != -4 : ring ? warps < 0 : warps == -4) continue;
        for (int tokens : {1, 2, 4, 8}) {
          if (warps != 0 && tokens > 1 && !(warps < 0 && tokens == 8 && !ring)) continue;
          int next = 0;
          const double ms = bench.time_ms([&] {
            const int i = next++ % copies;
            Fp8GemvQ8Params p = gemv_q8_params(w.as<Fp8E4M3>() + size_t(i) * wbytes,
                                               sc.as<float>() + size_t(i) * nb * kb, xq, xs, y.as<Bf16>(),
                                               tokens, l.n, l.k, l.n);
            p.warps_per_tile = std::max(0, warps);
            if (warps == -4) {
              p.x_bf16 = x.as<Bf16>();
              p.ldx_bf16 = l.k;
            }
            p.staging = warps == -1   ? Fp8GemvQ8Staging::kNone
                        : warps == -2 ? Fp8GemvQ8Staging::kScales
                        : warps == -3 ? Fp8GemvQ8Staging::kScalesAndX
                                      : Fp8GemvQ8Staging::kAuto;
            p.loads = loads;
            fp8_gemv_q8(p, s);
          });
          const double bytes = double(wbytes) + nb * kb * 4.0;
          const std::string variant = warps == -4   ? "/bf16x"
                                      : warps == -1 ? "/unstaged"
                                      : warps == -2 ? "/scales"
                                      : warps == -3 ? "/scales+x"
                                      : warps > 0   ? fmt::format("/w{}", warps)
                                                    : "";
          const char* kind = ring ? "/ring" : rounds && warps == 0 ? "/rounds" : "";
          bench.add({fmt::format("fp8_gemv[q8{}{}]/{} tokens={}", kind, variant, l.name, tokens),
                     bytes / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
        }
      }
    }
  }
}

// Chains of dependent FP8 GEMVs, as a decode step runs them: each link has its own weight (the
// chain's weights far exceed L2, so a repeat finds nothing cached) and reads its activations from
// act[x], writing act[y]; a link whose x is an earlier link's y depends on it. A link with n2 > 0
// is two GEMVs over the same x (q_a + kv_a, gate + up; the second writes act[y2], its weight
// follows the first's in one buffer): one fp8_gemv_fused launch for the stream kernel, two
// launches for the others. Timed as a whole (one enqueue = the whole chain): GB/s of weight +
// scale bytes, plain launches, PDL launches (Fp8GemvParams::pdl) and PDL with the L2 prefetch
// (pdl_prefetch_l2, not the stream kernel's), each from the stream (host launch rate included)
// and replayed as one captured CUDA graph, beside two chains of read probes over the same
// weights, one probe a link (plain launches, and PDL launches that read first and wait before
// their write: the best a chain of launches of these sizes can do).
struct GemvLink {
  int n, k;
  int x, y;  // indices into the chain's activation buffers
  int n2 = 0, y2 = 0;
};

void bench_gemv_chain(Bench& bench, const Ceilings& c, const DeviceInfo& info, const std::string& name,
                      const std::vector<GemvLink>& links, const std::vector<int>& widths) {
  cudaStream_t s = bench.stream();
  std::vector<DeviceBuffer> w, sc, act;
  double bytes = 0;
  for (const GemvLink& l : links) {
    const int kb = (l.k + 127) / 128, nb = (l.n + 127) / 128, nb2 = (l.n2 + 127) / 128;
    w.push_back(random_fp8(size_t(l.n + l.n2) * l.k, s));
    // Scales near 1 / (sqrt(k) x rms code) keep activations O(1) along the chain (timing does not
    // depend on the values; this only keeps them finite).
    sc.push_back(random_f32(size_t(nb + nb2) * kb, 0.0001f, 0.0002f, s));
    bytes += double(l.n + l.n2) * l.k + (nb + nb2) * kb * 4.0;
  }
  for (const int width : widths) act.push_back(random_bf16(size_t(kGemvMaxTokens) * width, s));
  for (const bool pdl : {false, true}) {
    if (pdl && info.sm() < 90) continue;
    const int blocks = 8 * info.multiprocessors;
    DeviceBuffer fold(size_t(blocks) * 4);
    const double ms = bench.time_ms([&] {
      for (size_t i = 0; i < links.size(); ++i)
        HYMOE_CUDA_CHECK(bench::read_probe(w[i].data(), size_t(links[i].n + links[i].n2) * links[i].k,
                                           fold.as<uint32_t>(), blocks, s, pdl));
    });
    bench.add({fmt::format("ceiling/read_probe chain{} {} ({} launches, {:.0f} MB)", pdl ? "[pdl]" : "",
                           name, links.size(), bytes / 1e6),
               bytes / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
  }
  // The stream kernel also with one block an SM ("stream/1"; the default is 2), as a PDL graph
  // only. per_sm 0: the default.
  for (const auto& variant :
       {std::pair{Fp8GemvImpl::kTensorCores, 0}, std::pair{Fp8GemvImpl::kCudaCores, 0},
        std::pair{Fp8GemvImpl::kAuto, 0}, std::pair{Fp8GemvImpl::kStream, 0}, std::pair{Fp8GemvImpl::kStream, 1}}) {
    const Fp8GemvImpl impl = variant.first;
    const int per_sm = variant.second;
    if (impl == Fp8GemvImpl::kStream && info.sm() < 90) continue;
    for (const int tokens : {1, 8}) {
      if ((impl == Fp8GemvImpl::kCudaCores || impl == Fp8GemvImpl::kAuto) && tokens > 1) continue;
      for (const bool graph : {false, true}) {
        if (per_sm > 0 && !graph) continue;
        for (const int mode : {0, 1, 2}) {  // plain, pdl, pdl + L2 prefetch
          if (mode == 2 && impl == Fp8GemvImpl::kStream) continue;
          if (per_sm > 0 && mode != 1) continue;
          auto enqueue = [&] {
            for (size_t i = 0; i < links.size(); ++i) {
              const GemvLink& l = links[i];
              const int kb = (l.k + 127) / 128;
              Fp8GemvParams p[2];
              p[0] = Fp8GemvParams{w[i].as<Fp8E4M3>(), sc[i].as<float>(), act[l.x].as<Bf16>(),
                                   act[l.y].as<Bf16>(), tokens, l.n, l.k, l.k, kb,
                                   widths[l.x], widths[l.y]};
              p[0].impl = impl;
              p[0].pdl = mode >= 1;
              p[0].pdl_prefetch_l2 = mode == 2;
              if (per_sm > 0) p[0].stream_blocks_per_sm = per_sm;
              const int parts = l.n2 > 0 ? 2 : 1;
              if (parts == 2) {
                p[1] = p[0];
                p[1].w = w[i].as<Fp8E4M3>() + size_t(l.n) * l.k;
                p[1].w_scales = sc[i].as<float>() + size_t((l.n + 127) / 128) * kb;
                p[1].y = act[l.y2].as<Bf16>();
                p[1].n = l.n2;
                p[1].ldy = widths[l.y2];
              }
              if (impl == Fp8GemvImpl::kStream) {
                fp8_gemv_fused(p, parts, s);
              } else {
                for (int j = 0; j < parts; ++j) fp8_gemv(p[j], s);
              }
            }
          };
          const std::string label =
              fmt::format("fp8_gemv_chain[{}{}{}{}]/{} tokens={}", gemv_impl_name(impl), per_sm > 0 ? "/1" : "",
                          std::array{"", ",pdl", ",pdl+l2"}[mode], graph ? ",graph" : "", name, tokens);
          if (const double ms = time_enqueue(bench, label, graph, enqueue); ms > 0)
            bench.add({label, bytes / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
        }
      }
    }
  }
  // FP8 activations: each new input quantised (quantize_fp8_per_token_block) before the GEMVs
  // that read it: q_a|kv_a and gate|up (one fused launch each) share one quantisation, a chain
  // over one fixed x quantises it once. Plain launches or PDL (quantiser and GEMVs alike).
  if (fp8_gemv_q8_supported()) {
    std::vector<DeviceBuffer> xq, xs;
    for (const int width : widths) {
      xq.emplace_back(size_t(kGemvMaxTokens) * width);
      xs.emplace_back(size_t((width + 127) / 128) * kGemvMaxTokens * 4);
    }
    for (const int tokens : {1, 8}) {
      for (const bool graph : {false, true}) {
        // plain, pdl, pdl with Fp8GemvQ8Staging::kScales forced, pdl with BF16 x given to the GEMV
        // call (which launches the quantiser itself, for every link: even a repeated x), pdl with
        // each block shape of the rounds kernel forced (4, 8, 16 warps a tile: "q8/w4" ...), pdl
        // with the loads forced (Fp8GemvQ8Loads: "q8/ring", "q8/rounds"; plain "q8" is kAuto's).
        for (const int mode : {0, 1, 2, 3, 4, 5, 6, 7, 8}) {
          const bool pdl = mode >= 1;
          if (pdl && info.sm() < 90) continue;
          if (mode >= 2 && !graph) continue;
          auto enqueue = [&] {
            for (size_t i = 0; i < links.size(); ++i) {
              const GemvLink& l = links[i];
              const bool fresh = i == 0 || links[i - 1].x != l.x || links[i - 1].y == l.x ||
                                 (links[i - 1].n2 > 0 && links[i - 1].y2 == l.x);
              if (fresh && mode != 3) {
                Fp8QuantParams qp{act[l.x].as<Bf16>(), xq[l.x].as<Fp8E4M3>(), xs[l.x].as<float>(), tokens, l.k,
                                  widths[l.x], widths[l.x], kGemvMaxTokens};
                qp.pdl = pdl;
                quantize_fp8_per_token_block(qp, s);
              }
              Fp8GemvQ8Params p[2];
              p[0] = gemv_q8_params(w[i].as<Fp8E4M3>(), sc[i].as<float>(), xq[l.x], xs[l.x], act[l.y].as<Bf16>(),
                                    tokens, l.n, l.k, widths[l.y]);
              p[0].ldx = widths[l.x];
              p[0].pdl = pdl;
              if (mode == 2) p[0].staging = Fp8GemvQ8Staging::kScales;
              if (mode >= 4 && mode <= 6) p[0].warps_per_tile = 4 << (mode - 4);
              if (mode == 2 || (mode >= 4 && mode <= 6) || mode == 8) p[0].loads = Fp8GemvQ8Loads::kRounds;
              if (mode == 7) p[0].loads = Fp8GemvQ8Loads::kRing;
              if (mode == 3) {
                p[0].x_bf16 = act[l.x].as<Bf16>();
                p[0].ldx_bf16 = widths[l.x];
              }
              const int parts = l.n2 > 0 ? 2 : 1;
              if (parts == 2) {
                const int kb = (l.k + 127) / 128;
                p[1] = p[0];
                p[1].w = w[i].as<Fp8E4M3>() + size_t(l.n) * l.k;
                p[1].w_scales = sc[i].as<float>() + size_t((l.n + 127) / 128) * kb;
                p[1].y = act[l.y2].as<Bf16>();
                p[1].n = l.n2;
                p[1].ldy = widths[l.y2];
              }
              fp8_gemv_q8_fused(p, parts, s);
            }
          };
          const std::string label = fmt::format("fp8_gemv_chain[q8{}{}{}]/{} tokens={}",
                                                std::array{"", "", "/scales", "/bf16x", "/w4", "/w8", "/w16", "/ring", "/rounds"}[mode],
                                                pdl ? ",pdl" : "", graph ? ",graph" : "", name, tokens);
          if (const double ms = time_enqueue(bench, label, graph, enqueue); ms > 0)
            bench.add({label, bytes / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
        }
      }
    }
  }
}

void bench_gemv_chains(Bench& bench, const Ceilings& c, const DeviceInfo& info) {
  constexpr int kLinks = 32;
  // One shape repeated (fixed input, the same output buffer: serialised, not data-dependent).
  const Linear shapes[] = {{"7168x2048", 7168, 2048}, {"2048x7168", 2048, 7168},
                           {"24576x1536", 24576, 1536}, {"7168x16384", 7168, 16384}};
  for (const Linear& l : shapes) {
    bench_gemv_chain(bench, c, info, fmt::format("{} x{}", l.name, kLinks),
                     std::vector<GemvLink>(kLinks, GemvLink{l.n, l.k, 0, 1}), {l.k, l.n});
  }
  {  // Up and down (7168x2048 then 2048x7168): each link reads the previous link's output.
    std::vector<GemvLink> links;
    for (int i = 0; i < kLinks / 2; ++i) {
      links.push_back({7168, 2048, 0, 1});
      links.push_back({2048, 7168, 1, 0});
    }
    bench_gemv_chain(bench, c, info, fmt::format("up-down 7168x2048+2048x7168 x{}", kLinks / 2),
                     links, {2048, 7168});
  }
  {  // The FP8 GEMVs of DeepSeek-V3 decode layers with a shared expert, in order: q_a, kv_a (the
     // hidden state), q_b (q_a's output), o (a fixed attention output), shared gate and up (o's
     // output), shared down (up's output), which is the next layer's hidden state.
    enum { kHidden, kQa, kKva, kQ, kAttn, kO, kGate, kUp };
    std::vector<GemvLink> links;
    for (int layer = 0; layer < 4; ++layer) {
      const GemvLink layer_links[] = {{1536, 7168, kHidden, kQa}, {576, 7168, kHidden, kKva},
                                      {24576, 1536, kQa, kQ},     {7168, 16384, kAttn, kO},
                                      {2048, 7168, kO, kGate},    {2048, 7168, kO, kUp},
                                      {7168, 2048, kUp, kHidden}};
      links.insert(links.end(), std::begin(layer_links), std::end(layer_links));
    }
    bench_gemv_chain(bench, c, info, "dsv3 layer (q_a kv_a q_b o gate up down) x4", links,
                     {7168, 1536, 576, 24576, 16384, 7168, 2048, 2048});
  }
  {  // The same layers with the GEMVs over one input fused (5 links a layer): q_a|kv_a, q_b, o,
     // gate|up, down. One launch each for the stream kernel (fp8_gemv_fused), two for the others.
    enum { kHidden, kQa, kKva, kQ, kAttn, kO, kGate, kUp };
    std::vector<GemvLink> links;
    for (int layer = 0; layer < 4; ++layer) {
      const GemvLink layer_links[] = {{1536, 7168, kHidden, kQa, 576, kKva}, {24576, 1536, kQa, kQ},
                                      {7168, 16384, kAttn, kO},            {2048, 7168, kO, kGate, 2048, kUp},
                                      {7168, 2048, kUp, kHidden}};
      links.insert(links.end(), std::begin(layer_links), std::end(layer_links));
    }
    bench_gemv_chain(bench, c, info, "dsv3 layer fused (q_a|kv_a q_b o gate|up down) x4", links,
                     {7168, 1536, 576, 24576, 16384, 7168, 2048, 2048});
  }
}


void bench_sampling(Bench& bench, const Ceilings& c) {
  cudaStream_t s = bench.stream();
  const int vocab = 129280;
  for (const auto& [rows, top_p] : {std::pair{1, 0.9f}, std::pair{8, 0.9f}, std::pair{8, 1.0f}}) {
    DeviceBuffer logits = random_f32(size_t(rows) * vocab, -8.0f, 8.0f, s);
    std::vector<SamplingRow> opts(rows, SamplingRow{0.8f, 0, top_p, 0.02f, 7, 0});
    DeviceBuffer dopt(opts.size() * sizeof(SamplingRow)), tok(size_t(rows) * 4);
    dopt.copy_from_host(opts.data(), dopt.bytes(), s);
    const SamplingParams p{logits.as<float>(), dopt.as<SamplingRow>(), tok.as<int32_t>(), rows,
                           vocab, vocab};
    const double ms = bench.time_ms([&] { sample_tokens(p, s); });
    bench.add({fmt::format("sampling/{} rows x 129280 top_p={} (us per call)", rows, top_p),
               ms * 1e3, "us", 0, ""});
    (void)c;
  }
}

// The hybrid engine's hand-off of one MoE layer (issue 41), both ways, as its step does it:
// GPU -> CPU the normed hidden state (BF16) and the top-k ids and weights into pinned memory, an
// event, the host waiting on it; CPU -> GPU the routed experts' FP32 sum, then an event the host
// waits on (the engine does not wait there: the copy is stream-ordered before the residual add;
// the wait here measures when the data is on the device). Host wall time per hand-off, the median
// of 5 runs of 200, beside the pinned host-to-device rate of 256 MiB.
void bench_handoff(Bench& bench) {
  Stream s;
  Event ev(false);
  const int hidden = 7168, top_k = 8;
  {
    PinnedBuffer host(size_t{256} << 20);
    DeviceBuffer dev(size_t{256} << 20);
    std::memset(host.data(), 1, host.bytes());
    dev.copy_from_host(host.data(), host.bytes(), s);
    s.synchronize();
    std::vector<double> gbs;
    for (int r = 0; r < 5; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      dev.copy_from_host(host.data(), host.bytes(), s);
      s.synchronize();
      gbs.push_back(static_cast<double>(host.bytes()) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9);
    }
    bench.add({"ceiling/pinned_h2d 256MiB", median(gbs), "GB/s", 0, ""});
  }
  for (const int rows : {1, 8}) {
    const size_t xb_bytes = size_t(rows) * hidden * 2, topk_bytes = size_t(rows) * top_k * 8,
                 out_bytes = size_t(rows) * hidden * 4;
    DeviceBuffer d_xb(xb_bytes), d_topk(topk_bytes), d_out(out_bytes);
    PinnedBuffer h_xb(xb_bytes), h_topk(topk_bytes), h_out(out_bytes);
    std::memset(h_out.data(), 0, out_bytes);
    auto time_us = [&](const std::function<void()>& one) {
      std::vector<double> us;
      for (int r = 0; r < 5; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 200; ++i) one();
        us.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 200 * 1e6);
      }
      return median(us);
    };
    const double down = time_us([&] {
      d_xb.copy_to_host(h_xb.data(), xb_bytes, s);
      d_topk.copy_to_host(h_topk.data(), topk_bytes, s);
      ev.record(s);
      ev.synchronize();
    });
    const double up = time_us([&] {
      d_out.copy_from_host(h_out.data(), out_bytes, s);
      ev.record(s);
      ev.synchronize();
    });
    bench.add({fmt::format("handoff/gpu_to_cpu {} token(s): hidden BF16 + top-k, event wait (us)", rows), down, "us", 0, ""});
    bench.add({fmt::format("handoff/cpu_to_gpu {} token(s): FP32 expert sum, event wait (us)", rows), up, "us", 0, ""});
  }
}

void bench_rowwise(Bench& bench, const Ceilings& c) {
  cudaStream_t s = bench.stream();
  const int tokens = 16384;
  {
    const int cols = 7168;
    DeviceBuffer x = random_bf16(size_t(tokens) * cols, s), w = random_bf16(cols, s);
    DeviceBuffer out(size_t(tokens) * cols * 2);
    const RmsNormParams p{x.as<Bf16>(), w.as<Bf16>(), out.as<Bf16>(), tokens, cols, cols, cols,
                          1e-6f};
    const double ms = bench.time_ms([&] { rmsnorm(p, s); });
    bench.add({"rmsnorm 16384x7168", 4.0 * tokens * cols / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs,
               "d2d copy"});
  }
  {
    const int cols = 2048 * 8;  // a token's 8 routed experts' intermediate, or 16K columns
    DeviceBuffer x = random_bf16(size_t(tokens) * cols * 2, s);
    DeviceBuffer out(size_t(tokens) * cols * 2);
    const SiluMulParams p{x.as<Bf16>(), out.as<Bf16>(), tokens, cols, 2 * int64_t{cols}, cols};
    const double ms = bench.time_ms([&] { silu_mul(p, s); });
    bench.add({"silu_mul 16384x16384", 6.0 * tokens * cols / (ms * 1e-3) / 1e9, "GB/s",
               c.copy_gbs, "d2d copy"});
  }
  {
    const int heads = 128;
    DeviceBuffer q = random_bf16(size_t(tokens) * heads * 192, s);
    DeviceBuffer pos(size_t(tokens) * 4);
    HYMOE_CUDA_CHECK(bench::fill_i32(pos.as<int32_t>(), tokens, 65536, next_seed(), s));
    RopeParams p;
    p.x = q.as<Bf16>() + 128;
    p.positions = pos.as<int32_t>();
    p.tokens = tokens;
    p.heads = heads;
    p.token_stride = heads * 192;
    p.head_stride = 192;
    p.table = make_yarn_table(YarnConfig{}, 64);
    const double ms = bench.time_ms([&] { rope_yarn(p, s); });
    bench.add({"rope_yarn q_pe 16384x128 heads", 2.0 * 2 * tokens * heads * 64 / (ms * 1e-3) / 1e9,
               "GB/s", c.copy_gbs, "d2d copy"});
  }
  {
    const int rt = 65536, experts = 256;
    DeviceBuffer logits = random_f32(size_t(rt) * experts, -4.0f, 4.0f, s);
    DeviceBuffer bias = random_f32(experts, -0.1f, 0.1f, s);
    DeviceBuffer ids(size_t(rt) * 8 * 4), w(size_t(rt) * 8 * 4);
    RouterParams p;
    p.logits = logits.as<float>();
    p.bias = bias.as<float>();
    p.topk_ids = ids.as<int32_t>();
    p.topk_weights = w.as<float>();
    p.tokens = rt;
    const double ms = bench.time_ms([&] { route_noaux_tc(p, s); });
    bench.add({"router noaux_tc 65536 tokens (logit bytes)",
               double(rt) * experts * 4 / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
  }
}


// A DeepSeek-V3 MoE layer (256 experts, top-8, hidden 7168, intermediate 2048) on T tokens with
// random routing: gate and up GEMMs into one [rows, 4096] buffer, down GEMM, per expert.
// backend_only: this grouped GEMM backend's records only (gemm_backend_name), no dispatch
// kernels (for ncu); empty: all.
void bench_moe(Bench& bench, const CublasLt& lt, const Ceilings& c, int min_tokens, int max_tokens,
               const std::string& backend_only) {
  cudaStream_t s = bench.stream();
  constexpr int kExperts = 256, kTopK = 8, kHidden = 7168, kInter = 2048;
  const size_t up_bytes = size_t(kInter) * kHidden;  // gate, up and down are the same size
  DeviceBuffer wg = random_fp8(up_bytes * kExperts, s), wu = random_fp8(up_bytes * kExperts, s);
  DeviceBuffer wd = random_fp8(up_bytes * kExperts, s);
  const size_t sg = size_t(kInter / 128) * block_scale_ld(kHidden);
  const size_t sd = size_t(kHidden / 128) * block_scale_ld(kInter);
  DeviceBuffer wgs = random_f32(sg * kExperts, 0.0005f, 0.004f, s);
  DeviceBuffer wus = random_f32(sg * kExperts, 0.0005f, 0.004f, s);
  DeviceBuffer wds = random_f32(sd * kExperts, 0.0005f, 0.004f, s);
  std::vector<ExpertWeight> gate(kExperts), up(kExperts), down(kExperts);
  for (int e = 0; e < kExperts; ++e) {
    gate[e] = {wg.as<Fp8E4M3>() + e * up_bytes, wgs.as<float>() + e * sg};
    up[e] = {wu.as<Fp8E4M3>() + e * up_bytes, wus.as<float>() + e * sg};
    down[e] = {wd.as<Fp8E4M3>() + e * up_bytes, wds.as<float>() + e * sd};
  }
  if (backend_only.empty()) {
    // The gate weights (3.76 GB) read as the grouped GEMM reads them, one 128-row panel per
    // expert and column tile, against a plain streaming read of the same bytes: is the GEMM's
    // DRAM rate at 4K tokens (ncu: 61% of peak) a limit of its access pattern or of its pipeline?
    int sms = 0;
    HYMOE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const double bytes = double(up_bytes) * kExperts;
    DeviceBuffer fold(size_t(8 * sms) * 4);  // (>= 4 CTAs an SM)
    const double rms = bench.time_ms([&] {
      HYMOE_CUDA_CHECK(bench::read_probe(wg.data(), up_bytes * kExperts, fold.as<uint32_t>(), 8 * sms, s));
    });
    bench.add({"moe_weight_stream/read_probe (gate weights, 3.76 GB)", bytes / (rms * 1e-3) / 1e9, "GB/s",
               c.copy_gbs, "d2d copy"});
    for (const auto& [order, label] : {std::pair{bench::PanelOrder::kBoxes, "128x128-byte boxes"},
                                       std::pair{bench::PanelOrder::kContiguous, "16 KB pieces"}}) {
      for (const auto& [per_sm, in_flight] : {std::pair{1, 6}, std::pair{2, 6}, std::pair{4, 6}, std::pair{1, 12}}) {
        const double ms = bench.time_ms([&] {
          HYMOE_CUDA_CHECK(bench::weight_stream_probe(wg.data(), kExperts, kInter, kHidden, order, per_sm * sms,
                                                      fold.as<uint32_t>(), s, in_flight));
        });
        bench.add({fmt::format("moe_weight_stream/{} panels, {} CTA/SM, {} K blocks in flight", label, per_sm,
                               in_flight),
                   bytes / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy"});
      }
    }
  }
  // The backend timed in the steady state too: the one asked for, else kAuto's choice.
  const GemmBackend steady_backend = GroupedFp8Gemm(lt, kInter, kHidden).backend();
  std::mt19937_64 rng(42);
  for (int tokens = 4096; tokens <= max_tokens; tokens *= 4) {
    if (tokens < min_tokens) continue;
    const int rows = tokens * kTopK;
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    std::vector<int> pool(kExperts);
    std::iota(pool.begin(), pool.end(), 0);
    for (int t = 0; t < tokens; ++t) {
      for (int j = 0; j < kTopK; ++j) std::swap(pool[j], pool[j + rng() % (kExperts - j)]);
      std::copy(pool.begin(), pool.begin() + kTopK, ids.begin() + size_t(t) * kTopK);
    }
    DeviceBuffer dids(ids.size() * 4), doff((kExperts + 1) * 4), dcur(kExperts * 4),
        dslot(ids.size() * 4);
    dids.copy_from_host(ids.data(), dids.bytes(), s);
    moe_expert_offsets({dids.as<int32_t>(), doff.as<int32_t>(), dcur.as<int32_t>(),
                        dslot.as<int32_t>(), tokens, kTopK, kExperts},
                       s);
    std::vector<int32_t> offsets(kExperts + 1);
    doff.copy_to_host(offsets.data(), doff.bytes(), s);
    HYMOE_CUDA_CHECK(cudaStreamSynchronize(s));
    DeviceBuffer a = random_fp8(size_t(rows) * kHidden, s);
    DeviceBuffer as = random_f32(grouped_scale_floats(kHidden / 128, rows, kExperts), 0.001f, 0.01f, s);
    DeviceBuffer h(size_t(rows) * 2 * kInter * 2);
    DeviceBuffer hq = random_fp8(size_t(rows) * kInter, s);
    DeviceBuffer hs = random_f32(grouped_scale_floats(kInter / 128, rows, kExperts), 0.001f, 0.01f, s);
    DeviceBuffer y(size_t(rows) * kHidden * 2);
    const double flops = 2.0 * rows * 3.0 * kInter * kHidden;
    for (const GemmBackend backend : {GemmBackend::kWgmma, GemmBackend::kWgmmaWs,
                                      GemmBackend::kWgmmaWsPipe,
                                      GemmBackend::kWgmmaWsTmaGrouped,
                                      GemmBackend::kWgmmaWsTmaGroupedSt,
                                      GemmBackend::kWgmmaWsTmaGroupedSc,
                                      GemmBackend::kWgmmaWsTmaGroupedX,
                                      GemmBackend::kWgmmaWsTmaGroupedScX,
                                      GemmBackend::kWgmmaWsTmaGroupedScXH,
                                      GemmBackend::kWgmmaWsTmaGroupedC,
                                      GemmBackend::kWgmmaWsTmaGroupedScC,
                                      GemmBackend::kWgmmaWsTmaGroupedScXC,
                                      GemmBackend::kWgmmaWsTmaGroupedScCM,
                                      GemmBackend::kWgmmaWsTmaGroupedScMW,
                                      GemmBackend::kWgmmaTmaGroupedTx, GemmBackend::kWgmma64,
                                      GemmBackend::kWgmmaWs64, GemmBackend::kHymoe,
                                      GemmBackend::kCublasLt}) {
      if (!backend_only.empty() && backend_only != gemm_backend_name(backend)) continue;
      // cuBLASLt per expert on 1 stream (the record's old name), then spread over more.
      for (const int streams : backend == GemmBackend::kCublasLt ? std::vector<int>{1, 2, 4, 8, 16}
                                                                 : std::vector<int>{1}) {
        const std::string name =
            fmt::format("moe_grouped_gemm[{}{}]/{} tokens x top8 (gate+up+down)",
                        gemm_backend_name(backend),
                        streams > 1 ? fmt::format("/s{}", streams) : std::string(), tokens);
        try {
          GroupedFp8Gemm g_gate(lt, kInter, kHidden, backend), g_up(lt, kInter, kHidden, backend),
              g_down(lt, kHidden, kInter, backend);
          for (GroupedFp8Gemm* g : {&g_gate, &g_up, &g_down}) g->set_streams(streams);
          const int32_t* dev_off = doff.as<int32_t>();
          auto run_gate = [&] {
            g_gate.run(offsets, dev_off, gate, a.as<Fp8E4M3>(), as.as<float>(), h.as<Bf16>(), 2 * kInter, s);
          };
          auto run_up = [&] {
            g_up.run(offsets, dev_off, up, a.as<Fp8E4M3>(), as.as<float>(), h.as<Bf16>() + kInter, 2 * kInter, s);
          };
          auto run_down = [&] {
            g_down.run(offsets, dev_off, down, hq.as<Fp8E4M3>(), hs.as<float>(), y.as<Bf16>(), kHidden, s);
          };
          auto run_layer = [&] {
            run_gate();
            run_up();
            run_down();
          };
          const double ms = bench.time_ms(run_layer);
          bench.add({name, flops / (ms * 1e-3) / 1e12, "TFLOP/s", c.fp8_tflops,
                     "fp8 tensor-scale gemm"});
          if (!backend_only.empty() || backend == steady_backend) {
            // The layer and the FP8 ceiling each after 0.5 s of their own load (Bench::steady_ms):
            // both at the power limit, as a long prefill runs them.
            const double ceiling = steady_gemm_ceiling(bench, lt, GemmKind::kFp8TensorScale);
            const double steady = bench.steady_ms(run_layer);
            bench.add({fmt::format("moe_grouped_gemm[{}]/{} tokens x top8 (gate+up+down), steady state",
                                   gemm_backend_name(backend), tokens),
                       flops / (steady * 1e-3) / 1e12, "TFLOP/s", ceiling, "fp8 tensor-scale gemm, steady state",
                       bench.last_steady_mhz()});
          }
          if (!backend_only.empty()) {
            // One backend's process (--moe-backend): gate (K 7168, 56 K blocks a tile), up and
            // down (K 2048, 16) alone, as the peer's driver reports them: a per-tile cost
            // (epilogue, tile switch) weighs 3.5x more on down.
            const double one = flops / 3.0;
            const double ms_gate = bench.time_ms(run_gate), ms_up = bench.time_ms(run_up),
                         ms_down = bench.time_ms(run_down);
            for (const auto& [what, t] : {std::pair{"gate alone (n 2048, k 7168)", ms_gate},
                                          std::pair{"up alone (n 2048, k 7168)", ms_up},
                                          std::pair{"down alone (n 7168, k 2048)", ms_down}})
              bench.add({fmt::format("moe_grouped_gemm[{}]/{} tokens x top8 {}", gemm_backend_name(backend),
                                     tokens, what),
                         one / (t * 1e-3) / 1e12, "TFLOP/s", c.fp8_tflops, "fp8 tensor-scale gemm"});
          }
        } catch (const Error& e) {
          std::printf("%-52s unsupported: %s\n", name.c_str(), e.message().c_str());
        }
      }
    }
    {
      // kAuto with every expert's gate, up and down the same three matrices (44 MB, held in the
      // 60 MB L2 after the first pass): the kernel's rate when its weights do not come from DRAM.
      // Beside the record above it shows whether the weight stream or the kernel limits.
      const std::vector<ExpertWeight> g1(kExperts, gate[0]), u1(kExperts, up[0]), d1(kExperts, down[0]);
      GroupedFp8Gemm g_gate(lt, kInter, kHidden), g_up(lt, kInter, kHidden), g_down(lt, kHidden, kInter);
      const int32_t* dev_off = doff.as<int32_t>();
      const double ms = bench.time_ms([&] {
        g_gate.run(offsets, dev_off, g1, a.as<Fp8E4M3>(), as.as<float>(), h.as<Bf16>(), 2 * kInter, s);
        g_up.run(offsets, dev_off, u1, a.as<Fp8E4M3>(), as.as<float>(), h.as<Bf16>() + kInter, 2 * kInter, s);
        g_down.run(offsets, dev_off, d1, hq.as<Fp8E4M3>(), hs.as<float>(), y.as<Bf16>(), kHidden, s);
      });
      bench.add({fmt::format("moe_grouped_gemm[{}, one weight for every expert: in L2]/{} tokens x top8 "
                             "(gate+up+down)",
                             gemm_backend_name(g_gate.backend()), tokens),
                 flops / (ms * 1e-3) / 1e12, "TFLOP/s", c.fp8_tflops, "fp8 tensor-scale gemm"});
    }
    if (!backend_only.empty()) continue;
    // Dispatch kernels around it: permute of the quantised tokens and the weighted un-permute.
    DeviceBuffer xq = random_fp8(size_t(tokens) * kHidden, s);
    DeviceBuffer xs = random_f32(size_t(tokens) * (kHidden / 128), 0.001f, 0.01f, s);
    DeviceBuffer wts = random_f32(ids.size(), 0.1f, 1.0f, s);
    MoePermuteParams pp;
    pp.x = xq.as<Fp8E4M3>();
    pp.x_scales = xs.as<float>();
    pp.topk_ids = dids.as<int32_t>();
    pp.slot_rows = dslot.as<int32_t>();
    pp.expert_offsets = doff.as<int32_t>();
    pp.out = a.as<Fp8E4M3>();
    pp.out_scales = as.as<float>();
    pp.tokens = tokens;
    pp.top_k = kTopK;
    pp.cols = kHidden;
    pp.x_scale_ld = tokens;
    const double pms = bench.time_ms([&] { moe_permute_fp8(pp, s); });
    bench.add({fmt::format("moe_permute_fp8/{} tokens (bytes moved)", tokens),
               (double(tokens) * kHidden + 2.0 * rows * kHidden) / (pms * 1e-3) / 1e9, "GB/s",
               c.copy_gbs, "d2d copy"});
    DeviceBuffer out(size_t(tokens) * kHidden * 2);
    const MoeUnpermuteParams up_p{y.as<Bf16>(), dslot.as<int32_t>(), wts.as<float>(),
                                  out.as<Bf16>(), tokens, kTopK, kHidden, kHidden, kHidden};
    const double ums = bench.time_ms([&] { moe_unpermute(up_p, s); });
    bench.add({fmt::format("moe_unpermute/{} tokens (bytes moved)", tokens),
               (2.0 * rows * kHidden + 2.0 * tokens * kHidden) / (ums * 1e-3) / 1e9, "GB/s",
               c.copy_gbs, "d2d copy"});
  }
}

int run(int argc, char** argv) {
  std::string out_path;
  int min_tokens = 0;  // moe, mla_decode: token counts below this left out (one size under ncu)
  int max_tokens = 65536;
  std::string only;  // comma-separated section names; empty: all
  std::string gemv_shape;  // fp8_gemv: this single-launch shape only, no chains
  std::string moe_backend;  // moe: this grouped GEMM backend only
  std::string mla_case;  // mla_decode(_wgmma): the cases whose label holds this only
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--out") && i + 1 < argc) {
      out_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--min-tokens") && i + 1 < argc) {
      min_tokens = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--max-tokens") && i + 1 < argc) {
      max_tokens = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--gemv-shape") && i + 1 < argc) {
      gemv_shape = argv[++i];
    } else if (!std::strcmp(argv[i], "--moe-backend") && i + 1 < argc) {
      moe_backend = argv[++i];
    } else if (!std::strcmp(argv[i], "--mla-case") && i + 1 < argc) {
      mla_case = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: hymoe-bench-gpu [--out FILE] [--min-tokens N (moe, mla_decode)]\n"
                   "                       [--max-tokens N]\n"
                   "                       [--only SECTION,...]\n"
                   "                       [--gemv-shape 7168x2048|2048x7168|24576x1536|7168x16384]\n"
                   "                       [--moe-backend NAME (gemm_backend_name, e.g. "
                   "wgmma_ws_tma_grouped_scmw: that backend only, gate and down also alone)]\n"
                   "                       [--mla-case TEXT (mla_decode: the cases whose label, "
                   "e.g. \"ctx=65536+39x1024 batch=40\", holds TEXT)]\n"
                   "sections: fp8_gemv fp8_quant rowwise mla_decode sampling fp8_block_gemm moe "
                   "mla_prefill mla_decode_wgmma mla_decode_steady\n");
      return 2;
    }
  }
  if (device_count() == 0) {
    std::fprintf(stderr, "hymoe-bench-gpu: no CUDA device\n");
    return 3;
  }
  const DeviceInfo info = query_device(0);
  std::printf("device: %s sm_%d, %d SMs, %.1f GiB, L2 %zu MiB\n", info.name.c_str(), info.sm(),
              info.multiprocessors, info.total_memory / 1073741824.0, info.l2_bytes >> 20);
  Bench bench;
  CublasLt lt;
  const Ceilings c = measure_ceilings(bench, lt);
  // One failing section (say, an algorithm cuBLASLt lacks here) must not lose the others.
  int failures = 0;
  auto section = [&](const char* name, const std::function<void()>& fn) {
    if (!only.empty() && ("," + only + ",").find(std::string(",") + name + ",") == std::string::npos)
      return;
    try {
      fn();
    } catch (const Error& e) {
      ++failures;
      std::printf("%s: FAILED: %s\n", name, e.what());
      (void)cudaGetLastError();
    }
  };
  section("fp8_gemv", [&] {
    bench_gemv(bench, c, info, gemv_shape);
    if (gemv_shape.empty()) bench_gemv_chains(bench, c, info);
  });
  section("fp8_quant", [&] { bench_quant(bench, c); });
  section("rowwise", [&] { bench_rowwise(bench, c); });
  section("mla_decode", [&] {
    bench_mla_decode(bench, c, info, min_tokens,
                     {MlaDecodeImpl::kTensorCores, MlaDecodeImpl::kCudaCores}, mla_case);
  });
  section("sampling", [&] { bench_sampling(bench, c); });
  section("handoff", [&] { bench_handoff(bench); });
  section("fp8_block_gemm", [&] { bench_block_gemm(bench, lt, c, max_tokens); });
  section("moe", [&] { bench_moe(bench, lt, c, min_tokens, max_tokens, moe_backend); });
  section("mla_prefill", [&] {
    bench_mla_prefill(bench, c, steady_ceilings(bench, lt, c), max_tokens);
  });
  // Last: the opt-in wgmma MLA decode kernels, so that a fault there cannot cost other sections.
  section("mla_decode_wgmma", [&] {
    if (!mla_decode_wgmma_supported()) {
      fmt::print("mla_decode_wgmma: skipped (needs compute capability 9.0 and an sm_90a build)\n");
      return;
    }
    bench_mla_decode(bench, c, info, min_tokens,
                     {MlaDecodeImpl::kWgmma, MlaDecodeImpl::kWgmmaSplitS,
                      MlaDecodeImpl::kWgmmaPingPong, MlaDecodeImpl::kWgmmaPair,
                      MlaDecodeImpl::kAuto},
                     mla_case);
  });
  // The same kernels' contest rows in the power-limited steady state (beside FlashMLA's driver
  // run with --steady): fair where the rows above inherit their predecessors' clocks.
  section("mla_decode_steady", [&] {
    if (!mla_decode_wgmma_supported()) {
      fmt::print("mla_decode_steady: skipped (needs compute capability 9.0 and an sm_90a build)\n");
      return;
    }
    // Against the copy and BF16 GEMM ceilings timed the same way.
    bench_mla_decode(bench, steady_ceilings(bench, lt, c), info, min_tokens,
                     {MlaDecodeImpl::kWgmmaPingPong, MlaDecodeImpl::kWgmmaPair, MlaDecodeImpl::kAuto},
                     mla_case, /*steady=*/true);
  });
  if (!out_path.empty()) {
    nlohmann::json j = {{"device", info.name}, {"sm", info.sm()}, {"records", bench.json()}};
    std::ofstream(out_path) << j.dump(2) << "\n";
  }
  return failures ? 1 : 0;
}

}  // namespace
}  // namespace hymoe::gpu

int main(int argc, char** argv) {
  try {
    return hymoe::gpu::run(argc, argv);
  } catch (const hymoe::Error& e) {
    std::fprintf(stderr, "hymoe-bench-gpu: error: %s\n", e.what());
    return 1;
  }
}
