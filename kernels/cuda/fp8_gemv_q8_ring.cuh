// The FP8-activation GEMV with its weights through a per-warp cp.async ring
// (Fp8GemvQ8Loads::kRing). Why (H200, 7168x16384 at one token): the rounds kernel
// (fp8_gemv_q8.cuh) reaches 74% of copy where a kernel issuing the same weight loads over the same
// grid without the math reaches 91-93%. A 4-slot ring of weights alone (3 blocks, 6 KB a warp in
// flight) was no faster (74%; 77% unstaged), and one with the activations and scales in its slots
// too (copied by other lanes: a warp barrier and 4-byte copies a block) slower (61%, the MIO queue
// throttled). Reading (Little's law): a saturated HBM answers in microseconds, so an SM needs
// ~130 KB in flight, which the rounds kernel has only at the peak of each round; and a warp that
// waits on L2 for each block's activations consumes its ring no faster than one L2 round trip a
// block.
// So each warp owns kQ8RingStages = 6 slots of 2 KB (one 128-column block of its 16-row tile), 5
// blocks of 16-byte cp.async (L1 bypassed) in flight while it computes the oldest (10 KB a warp,
// 160 KB an SM at 4 blocks of 4 warps), and loads each block's activations and scales into
// registers kQ8RingAhead blocks before it computes them, so neither wait is on its critical path.
// Each lane copies and reads back only its own bytes (its cp.async.wait_group makes them
// visible; no warp barrier). The same warps, blocks, block order, products (weight scale x token
// scale in FP32) and sums as the rounds kernel (Q8Tile's block_mma, scale_into and finish):
// results bitwise equal to it for every block shape. No staging; the final reduction reuses the
// ring's shared memory.
// Slot layout: chunk j (0, 1: row g's column halves; 2, 3: row g + 8's) of lane l at
// slot + 512 j + 16 l, so a warp's copies and reads of one chunk cover 512 contiguous bytes.
#pragma once

#include "fp8_gemv_q8.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kQ8RingStages = 6;
inline constexpr int kQ8RingAhead = 2;  // blocks between a block's activation loads and its math
inline constexpr int kQ8RingSlotBytes = 16 * 128;
// Dynamic shared memory of a ring launch: the warps' rings (the final reduction's 8 KB reuses it).
__host__ __device__ constexpr int64_t q8_ring_bytes(int warps) {
  return int64_t{warps} * kQ8RingStages * kQ8RingSlotBytes;
}

template <int kWarps, int kMinBlocks, bool kPdl>
__global__ void __launch_bounds__(kWarps * kWarpSize, kMinBlocks) fp8_gemv_q8_ring_kernel(const GemvQ8Args a) {
  if constexpr (kPdl) pdl_launch_dependents();
  constexpr int kSums = 16, kAccs = kSums / kWarps, kStages = kQ8RingStages, kAhead = kQ8RingAhead;
  // The loop is unrolled kUnroll blocks so that the slot (i % kStages), the running sum
  // (i % kAccs) and the register set of the activations (i % (kAhead + 1)) are constants.
  constexpr int kUnroll = 12;
  static_assert(kSums % kWarps == 0 && kUnroll % kAccs == 0 && kUnroll % kStages == 0 && kUnroll % (kAhead + 1) == 0);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const Q8Tile<kPdl> t(a, static_cast<int>(blockIdx.x), lane);
  const Fp8GemvQ8Params& p = t.p;
  extern __shared__ __align__(16) uint8_t dyn[];
  uint8_t* const ring = dyn + (warp * kStages) * kQ8RingSlotBytes + lane * 16;  // this lane's chunk 0 of slot 0
  // The warp's blocks kb = warp + i kWarps, i < count (the rounds kernel's, in the same order).
  const int count = t.blocks > warp ? (t.blocks - warp + kWarps - 1) / kWarps : 0;
  auto issue = [&](int i) {  // block i's weights into slot i % kStages; one commit group whatever i
    if (i < count) {
      const int col = (warp + i * kWarps) * 128 + t.c * 16;
      uint8_t* slot = ring + (i % kStages) * kQ8RingSlotBytes;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // zero-filled past k or past n (the rounds kernel's zeros)
        const bool in = col + 64 * h < p.k;
        cp_async16(slot + 512 * h, t.w_lo + col + 64 * h, in && t.row_lo);
        cp_async16(slot + 512 * (2 + h), t.w_hi + col + 64 * h, in && t.row_hi);
      }
    }
    cp_async_commit();
  };
  // Block i's activations (token g's 32 bytes of it) and scales into registers (the rounds
  // kernel's unstaged loads: zeros past k, for absent tokens and past the warp's blocks).
  struct Act {
    uint4 x[2];
    float ws, xs0, xs1;
  };
  auto load_act = [&](int i, Act& r) {
    const int kb = warp + i * kWarps, col = kb * 128 + t.c * 16;
    const bool blk = i < count;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      r.x[h] = blk && t.token && col + 64 * h < p.k ? load_dependent<kPdl>(reinterpret_cast<const uint4*>(t.xg + col + 64 * h))
                                                    : make_uint4(0, 0, 0, 0);
    const float* xsc = p.x_scales + static_cast<int64_t>(kb) * p.x_scale_ld;
    r.ws = blk ? __ldg(t.w_scales + kb) : 0.0f;
    r.xs0 = blk && t.t0 ? load_dependent<kPdl>(xsc + 2 * t.c) : 0.0f;
    r.xs1 = blk && t.t1 ? load_dependent<kPdl>(xsc + 2 * t.c + 1) : 0.0f;
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i);
  if constexpr (kPdl) pdl_wait();
  Act act[kAhead + 1];
#pragma unroll
  for (int i = 0; i < kAhead; ++i) load_act(i, act[i]);

  float acc[kAccs][4] = {};
  for (int i0 = 0; i0 < count; i0 += kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = i0 + u;
      if (i >= count) break;  // warp-uniform
      issue(i + kStages - 1);  // into the slot block i - 1 was read from
      load_act(i + kAhead, act[(u + kAhead) % (kAhead + 1)]);
      cp_async_wait<kStages - 1>();  // block i's weights have landed
      const uint8_t* slot = ring + (u % kStages) * kQ8RingSlotBytes;  // i % kStages == u % kStages
      const uint4 wl[2] = {*reinterpret_cast<const uint4*>(slot), *reinterpret_cast<const uint4*>(slot + 512)};
      const uint4 wh[2] = {*reinterpret_cast<const uint4*>(slot + 1024), *reinterpret_cast<const uint4*>(slot + 1536)};
      const Act& r = act[u % (kAhead + 1)];
      float part_sum[4];
      t.block_mma(wl, wh, r.x, part_sum);
      // The rounds kernel's products: ws x token scale, 0 for absent tokens.
      const float sc0 = t.t0 ? r.ws * r.xs0 : 0.0f, sc1 = t.t1 ? r.ws * r.xs1 : 0.0f;
      // Block kb = warp + kWarps i: sum kb % 16 is this warp's accumulator i % kAccs = u % kAccs.
      t.scale_into(part_sum, sc0, sc1, acc[u % kAccs]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its ring: the reduction reuses it
  t.template finish<kWarps, kAccs>(acc, reinterpret_cast<float(*)[16][8]>(dyn), warp);
}

}  // namespace hymoe::gpu::kernels
