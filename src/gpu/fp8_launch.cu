// Launchers of the FP8 kernels: activation quantiser and GEMV (token count -> template parameter
// through one switch; Fp8GemvParams::pdl -> the PDL variant, launched with its attribute; the
// streaming kernel over a grid of at most one wave).
#include <algorithm>
#include <atomic>

#include "fp8_gemv.cuh"
#include "fp8_gemv_mma.cuh"
#include "fp8_gemv_q8.cuh"
#include "fp8_gemv_q8_ring.cuh"
#include "fp8_gemv_stream.cuh"
#include "fp8_quant.cuh"
#include "kernel_launch.h"
#include "pdl_launch.h"

namespace hymoe::gpu::launch {

cudaError_t quantize_fp8(const Fp8QuantParams& p, bool vec, cudaStream_t stream) {
  const int col_blocks = (p.cols + kFp8BlockSize - 1) / kFp8BlockSize;
  const int64_t items = static_cast<int64_t>(p.tokens) * col_blocks;
  constexpr int kWarps = kernels::kQuantWarpsPerBlock;
  const dim3 grid(static_cast<unsigned>((items + kWarps - 1) / kWarps)), block(kWarps * kernels::kWarpSize);
  if (p.pdl) {
    return vec ? launch_kernel(kernels::fp8_quant_kernel<true, true>, grid, block, true, stream, p, col_blocks)
               : launch_kernel(kernels::fp8_quant_kernel<false, true>, grid, block, true, stream, p, col_blocks);
  }
  if (vec) {
    kernels::fp8_quant_kernel<true, false><<<grid, block, 0, stream>>>(p, col_blocks);
  } else {
    kernels::fp8_quant_kernel<false, false><<<grid, block, 0, stream>>>(p, col_blocks);
  }
  return cudaGetLastError();
}

namespace {

// A plain launch for pdl == false (the kernel without griddepcontrol, as before PDL existed), the
// PDL variant through cudaLaunchKernelEx otherwise.
template <int kTokens, int kRows>
cudaError_t launch_gemv_rows(const Fp8GemvParams& p, int blocks, cudaStream_t stream) {
  if (p.pdl) {
    return launch_kernel(kernels::fp8_gemv_kernel<kTokens, kRows, true>, dim3(blocks),
                         dim3(kernels::kGemvThreads), true, stream, p);
  }
  kernels::fp8_gemv_kernel<kTokens, kRows, false><<<blocks, kernels::kGemvThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <int kTokens>
cudaError_t launch_gemv(const Fp8GemvParams& p, cudaStream_t stream) {
  const int rows = kernels::gemv_rows_per_warp(p.k / 16, kTokens);
  const int blocks = (p.n + kernels::kGemvWarps * rows - 1) / (kernels::kGemvWarps * rows);
  switch (rows) {
    case 1: return launch_gemv_rows<kTokens, 1>(p, blocks, stream);
    case 2: return launch_gemv_rows<kTokens, 2>(p, blocks, stream);
    default: return launch_gemv_rows<kTokens, 4>(p, blocks, stream);
  }
}

// The streaming kernel's variant and the SMs of the current device; the shared-memory attribute
// set and the occupancy checked once per device.
struct StreamKernel {
  void (*kernel)(kernels::GemvStreamArgs);
  int sms;
  int per_sm;  // blocks that fit an SM
};

template <bool kPdl>
cudaError_t stream_kernel(StreamKernel& out) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached_per_sm[kMaxDevices], cached_sms[kMaxDevices];
  out.kernel = kernels::fp8_gemv_stream_kernel<kPdl>;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < kMaxDevices && (out.per_sm = cached_per_sm[device].load(std::memory_order_acquire)) > 0) {
    out.sms = cached_sms[device].load(std::memory_order_relaxed);
    return cudaSuccess;
  }
  err = cudaDeviceGetAttribute(&out.sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess)
    err = cudaFuncSetAttribute(out.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               kernels::kStreamRingBytes);
  if (err == cudaSuccess)
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&out.per_sm, out.kernel, kernels::kStreamThreads,
                                                        kernels::kStreamRingBytes);
  if (err != cudaSuccess) return err;
  if (out.per_sm < 1) return cudaErrorInvalidConfiguration;  // the ring does not fit this GPU
  if (device < kMaxDevices) {
    cached_sms[device].store(out.sms, std::memory_order_relaxed);
    cached_per_sm[device].store(out.per_sm, std::memory_order_release);
  }
  return cudaSuccess;
}

template <bool kPdl>
cudaError_t launch_stream(const Fp8GemvParams* parts, int count, cudaStream_t stream) {
  kernels::GemvStreamArgs a{};
  int tiles = 0;
  for (int i = 0; i < count; ++i) {
    a.part[i] = parts[i];
    tiles += (parts[i].n + kernels::kStreamRows - 1) / kernels::kStreamRows;
    a.tile_end[i] = tiles;
  }
  a.parts = count;
  StreamKernel k{};
  cudaError_t err = stream_kernel<kPdl>(k);
  if (err != cudaSuccess) return err;
  const int per_sm = std::min(k.per_sm, std::max(1, parts[0].stream_blocks_per_sm));
  const int wave = k.sms * per_sm;
  // Rounds of tiles a block runs, then as few blocks as give every block that many (or one less):
  // no block is left with a round more than most.
  const int rounds = (tiles + wave - 1) / wave;
  return launch_kernel_smem(k.kernel, dim3((tiles + rounds - 1) / rounds), dim3(kernels::kStreamThreads),
                            size_t(kernels::kStreamRingBytes), kPdl, stream, a);
}

}  // namespace

cudaError_t fp8_gemv(const Fp8GemvParams& p, bool tensor_cores, cudaStream_t stream) {
  if (tensor_cores) {
    const dim3 grid((p.n + 15) / 16);
    if (p.pdl) {
      return launch_kernel(kernels::fp8_gemv_mma_kernel<true>, grid, dim3(kernels::kGemvMmaThreads),
                           true, stream, p);
    }
    kernels::fp8_gemv_mma_kernel<false><<<grid, kernels::kGemvMmaThreads, 0, stream>>>(p);
    return cudaGetLastError();
  }
  switch (p.tokens) {
    case 1: return launch_gemv<1>(p, stream);
    case 2: return launch_gemv<2>(p, stream);
    case 3: return launch_gemv<3>(p, stream);
    case 4: return launch_gemv<4>(p, stream);
    case 5: return launch_gemv<5>(p, stream);
    case 6: return launch_gemv<6>(p, stream);
    case 7: return launch_gemv<7>(p, stream);
    case 8: return launch_gemv<8>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t fp8_gemv_stream(const Fp8GemvParams* parts, int count, cudaStream_t stream) {
  if (count < 1 || count > kGemvMaxFused) return cudaErrorInvalidValue;
  return parts[0].pdl ? launch_stream<true>(parts, count, stream) : launch_stream<false>(parts, count, stream);
}

namespace {

// The FP8-activation kernel's block shapes: warps a tile, 128-column blocks in flight a warp,
// resident blocks an SM its registers are cut for.
template <int kWarps>
struct Q8Shape;
template <>
struct Q8Shape<4> {
  static constexpr int kUnroll = 4, kMinBlocks = 4;
};
template <>
struct Q8Shape<8> {
  static constexpr int kUnroll = 2, kMinBlocks = 3;
};
template <>
struct Q8Shape<16> {
  static constexpr int kUnroll = 2, kMinBlocks = 1;
};

template <int kWarps, int kStage, bool kPdl>
constexpr auto q8_kernel =
    kernels::fp8_gemv_q8_kernel<kWarps, Q8Shape<kWarps>::kUnroll, Q8Shape<kWarps>::kMinBlocks, kStage, kPdl>;
// The ring kernel (Fp8GemvQ8Loads::kRing): registers cut for 4 / 2 / 1 resident blocks of 4 / 8
// / 16 warps, which is what its shared memory (12 KB a warp) fits.
template <int kWarps, bool kPdl>
constexpr auto q8_ring_kernel = kernels::fp8_gemv_q8_ring_kernel<kWarps, kWarps == 4 ? 4 : kWarps == 8 ? 2 : 1, kPdl>;

constexpr int kMaxDevices = 64;

int device_index(cudaError_t& err) {
  int device = 0;
  err = cudaGetDevice(&device);
  return device;
}

// A ring kernel's dynamic shared memory limit raised to what it takes, once per device.
template <int kWarps, bool kPdl>
cudaError_t q8_ring_prepare() {
  static std::atomic<bool> done[kMaxDevices];
  cudaError_t err = cudaSuccess;
  const int device = device_index(err);
  if (err != cudaSuccess) return err;
  if (device < kMaxDevices && done[device].load(std::memory_order_acquire)) return cudaSuccess;
  constexpr int64_t kMax = kernels::q8_ring_bytes(kWarps);
  err = cudaFuncSetAttribute(q8_ring_kernel<kWarps, kPdl>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kMax));
  if (err == cudaSuccess && device < kMaxDevices) done[device].store(true, std::memory_order_release);
  return err;
}

template <int kWarps>
cudaError_t q8_blocks_per_sm(bool ring, int& per_sm) {
  const int threads = kWarps * kernels::kWarpSize;
  if (!ring) return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, q8_kernel<kWarps, 0, false>, threads, 0);
  const cudaError_t err = q8_ring_prepare<kWarps, false>();
  if (err != cudaSuccess) return err;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, q8_ring_kernel<kWarps, false>, threads,
                                                       size_t(kernels::q8_ring_bytes(kWarps)));
}

// Resident blocks a shape has on the current device (cached per device; 0: not known yet): the
// rounds kernel's unstaged one (the staged one has the same register cap and its shared memory,
// <= 48 KB a block, fits the same count on the GPUs built for), or the ring kernel's.
cudaError_t q8_slots(int warps, bool ring, int& slots) {
  static std::atomic<int> cached[kMaxDevices][2][3];
  const int which = warps == 4 ? 0 : warps == 8 ? 1 : 2;
  cudaError_t err = cudaSuccess;
  const int device = device_index(err);
  if (err != cudaSuccess) return err;
  if (device < kMaxDevices && (slots = cached[device][ring][which].load(std::memory_order_relaxed)) > 0)
    return cudaSuccess;
  int sms = 0, per_sm = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  err = warps == 4 ? q8_blocks_per_sm<4>(ring, per_sm)
        : warps == 8 ? q8_blocks_per_sm<8>(ring, per_sm)
                     : q8_blocks_per_sm<16>(ring, per_sm);
  if (err != cudaSuccess) return err;
  slots = std::max(1, sms * per_sm);
  if (device < kMaxDevices) cached[device][ring][which].store(slots, std::memory_order_relaxed);
  return cudaSuccess;
}

template <int kWarps, int kStage, bool kPdl>
cudaError_t launch_gemv_q8_shape(const kernels::GemvQ8Args& a, int tiles, bool ring, cudaStream_t stream) {
  const int tokens = a.part[0].tokens, k = a.part[0].k;
  const dim3 block(kWarps * kernels::kWarpSize);
  if (!ring)
    return launch_kernel_smem(q8_kernel<kWarps, kStage, kPdl>, dim3(tiles), block,
                              size_t(kernels::q8_staged_bytes(kStage, tokens, k)), kPdl, stream, a);
  const cudaError_t err = q8_ring_prepare<kWarps, kPdl>();
  if (err != cudaSuccess) return err;
  return launch_kernel_smem(q8_ring_kernel<kWarps, kPdl>, dim3(tiles), block,
                            size_t(kernels::q8_ring_bytes(kWarps)), kPdl, stream, a);
}

template <int kStage, bool kPdl>
cudaError_t launch_gemv_q8(const kernels::GemvQ8Args& a, int tiles, int warps, bool ring, cudaStream_t stream) {
  switch (warps) {
    case 4: return launch_gemv_q8_shape<4, kStage, kPdl>(a, tiles, ring, stream);
    case 8: return launch_gemv_q8_shape<8, kStage, kPdl>(a, tiles, ring, stream);
    default: return launch_gemv_q8_shape<16, kStage, kPdl>(a, tiles, ring, stream);
  }
}

template <bool kPdl>
cudaError_t launch_gemv_q8_staged(const kernels::GemvQ8Args& a, int tiles, int warps, int stage, bool ring,
                                  cudaStream_t stream) {
  if (ring) return launch_gemv_q8<0, kPdl>(a, tiles, warps, true, stream);  // the ring kernel stages nothing
  switch (stage) {
    case 0: return launch_gemv_q8<0, kPdl>(a, tiles, warps, ring, stream);
    case 1: return launch_gemv_q8<1, kPdl>(a, tiles, warps, ring, stream);
    default: return launch_gemv_q8<2, kPdl>(a, tiles, warps, ring, stream);
  }
}

}  // namespace

namespace {

// A launch's block shape (warps a tile), staging (kStage of the kernel) and loads (ring or
// rounds) for `tiles` tiles.
struct Q8Plan {
  int warps = 0, stage = 0;
  bool ring = false;
};

// Staging. kAuto (H200, % of copy): none on the 16-warp shape (few tiles: the
// staging is not hidden, 2048x7168 42.3 unstaged vs 39.6 scales vs 39.0 scales + x); the
// activations too at 1-2 tokens and k < 8192 (24576x1536 62.5 vs 59.2 unstaged, PDL chain 78.7
// vs 77.4 scales only); the scale products only otherwise (8 tokens 7168x16384 70.6 vs 66.2
// unstaged, 24576x1536 chain 70.9 vs 66.2; x at 8 tokens loses, 8 x k bytes a block before its
// first math: 7168x2048 35.5 vs 41.3; 1 token 7168x16384 74.9 vs 72.2 with x).
int q8_stage(const Fp8GemvQ8Params& p0, int warps) {
  int stage = 0;
  switch (p0.staging) {
    case Fp8GemvQ8Staging::kAuto: stage = warps == 16 ? 0 : p0.tokens <= 2 && p0.k < 8192 ? 2 : 1; break;
    case Fp8GemvQ8Staging::kNone: stage = 0; break;
    case Fp8GemvQ8Staging::kScales: stage = 1; break;
    case Fp8GemvQ8Staging::kScalesAndX: stage = 2; break;
  }
  while (stage > 0 && kernels::q8_staged_bytes(stage, p0.tokens, p0.k) > kernels::kQ8StagedMaxBytes) --stage;
  return stage;
}

cudaError_t q8_plan(const Fp8GemvQ8Params& p0, int tiles, Q8Plan& plan) {
  // Loads. kAuto (H200, % of copy): the ring for launches of >= 32 MiB of weights
  // (7168x16384 single 75.8 vs 73.2, PDL chains 85.1 / 83.0 vs 78.0 / 70.0 at 1 / 8 tokens;
  // 24576x1536 60.7 vs 55.4, chains 74.6 / 71.2 vs 68.5 / 70.2), the rounds below (14.7 MB:
  // 2048x7168 single 38.1 vs 42.0, chains 58.3 vs 60.4; 7168x2048 chains at 8 tokens 53.8 vs 56.6).
  plan.ring = p0.loads == Fp8GemvQ8Loads::kRing ||
              (p0.loads == Fp8GemvQ8Loads::kAuto && int64_t{tiles} * 16 * p0.k >= (int64_t{32} << 20));
  plan.warps = p0.warps_per_tile;
  if (plan.warps == 0) {  // the fewest waves of resident blocks over the tiles; ties: more warps a tile
    int best_waves = 0;
    for (const int w : {16, 8, 4}) {
      int slots = 0;
      const cudaError_t err = q8_slots(w, plan.ring, slots);
      if (err != cudaSuccess) return err;
      const int waves = (tiles + slots - 1) / slots;
      if (plan.warps == 0 || waves < best_waves) {
        plan.warps = w;
        best_waves = waves;
      }
    }
  }
  if (plan.warps != 4 && plan.warps != 8 && plan.warps != 16) return cudaErrorInvalidValue;
  plan.stage = q8_stage(p0, plan.warps);
  return cudaSuccess;
}

}  // namespace

cudaError_t fp8_gemv_q8(const Fp8GemvQ8Params* parts, int count, cudaStream_t stream) {
  if (count < 1 || count > kGemvMaxFused) return cudaErrorInvalidValue;
  kernels::GemvQ8Args a{};
  int tiles = 0;
  for (int i = 0; i < count; ++i) {
    a.part[i] = parts[i];
    tiles += (parts[i].n + 15) / 16;
    a.tile_end[i] = tiles;
  }
  a.parts = count;
  Q8Plan plan;
  const cudaError_t err = q8_plan(parts[0], tiles, plan);
  if (err != cudaSuccess) return err;
  return parts[0].pdl ? launch_gemv_q8_staged<true>(a, tiles, plan.warps, plan.stage, plan.ring, stream)
                      : launch_gemv_q8_staged<false>(a, tiles, plan.warps, plan.stage, plan.ring, stream);
}

}  // namespace hymoe::gpu::launch
