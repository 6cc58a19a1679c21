// The planner of MLA decode's work list (mla_decode_plan.h): one block over the batch's lengths.
// (1) the longest sequence and the number of 128-token chunks (block reductions); (2) the chunk:
// a binary search over multiples of 64 tokens for the smallest whose chunks fit the target (each
// step a block sum of ceil(len / chunk)); (3) each sequence's first item (a block scan, tile by
// tile over the batch); (4) the items, one thread an item, each finding its sequence by binary
// search over `first` (written in step 3, visible to the block after its barrier). Integer
// arithmetic throughout, in the order of mla_decode_plan_host, which the tests compare bytewise.
#pragma once

#include "common.cuh"
#include "hymoe/gpu/mla_decode_plan.h"

namespace hymoe::gpu::kernels {

inline constexpr int kMlaPlanThreads = 512;

// Block-wide sum or max of v (every thread gets it); red: kMlaPlanThreads / 32 ints of shared
// memory. Starts and ends with a barrier, so that calls may follow one another.
template <bool kMax>
__device__ __forceinline__ int mla_plan_reduce(int v, int* red) {
#pragma unroll
  for (int d = kWarpSize / 2; d > 0; d /= 2) {
    const int o = __shfl_xor_sync(0xffffffffu, v, d);
    v = kMax ? max(v, o) : v + o;
  }
  __syncthreads();
  if (threadIdx.x % kWarpSize == 0) red[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  v = red[0];
#pragma unroll
  for (int w = 1; w < kMlaPlanThreads / kWarpSize; ++w) v = kMax ? max(v, red[w]) : v + red[w];
  return v;
}

__global__ void __launch_bounds__(kMlaPlanThreads)
    mla_decode_plan_kernel(const int32_t* seq_lens, int batch, int items, int wave_items,
                           int32_t* work_list) {
  __shared__ int red[kMlaPlanThreads / kWarpSize];
  __shared__ int scan[kMlaPlanThreads / kWarpSize];
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  int longest = 0, n128 = 0;
  for (int b = tid; b < batch; b += kMlaPlanThreads) {
    const int len = seq_lens[b];
    longest = max(longest, len);
    n128 += (len + 127) / 128;
  }
  longest = mla_plan_reduce<true>(longest, red);
  n128 = mla_plan_reduce<false>(n128, red);
  // Chunks for whole waves of blocks: as many waves as the sequences need, at most `items`.
  const int target = static_cast<int>(
      min(static_cast<int64_t>(items),
          static_cast<int64_t>((batch + wave_items - 1) / wave_items) * wave_items));
  // Chunk in 64-token units: at least 2 (4 where 128-token chunks fill half a wave or more).
  const int least = 2 * min(n128, target) >= wave_items ? 4 : 2;
  int lo = least, hi = max(least, (longest + kMlaWorkTokens - 1) / kMlaWorkTokens);
  while (lo < hi) {  // (uniform across the block: every thread has the same sums)
    const int mid = lo + (hi - lo) / 2, chunk = mid * kMlaWorkTokens;
    int n = 0;
    for (int b = tid; b < batch; b += kMlaPlanThreads) n += (seq_lens[b] + chunk - 1) / chunk;
    if (mla_plan_reduce<false>(n, red) <= target) hi = mid; else lo = mid + 1;
  }
  const int chunk = lo * kMlaWorkTokens;
  int32_t* item_ints = work_list + kMlaWorkHeaderInts;
  int32_t* first = item_ints + kMlaWorkItemInts * items;
  int carry = 0;
  for (int base = 0; base < batch; base += kMlaPlanThreads) {
    const int b = base + tid;
    const int n = b < batch ? (seq_lens[b] + chunk - 1) / chunk : 0;
    int incl = n;  // inclusive scan: lanes, then warps
#pragma unroll
    for (int d = 1; d < kWarpSize; d *= 2) {
      const int o = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += o;
    }
    __syncthreads();  // the previous tile's reads of scan are done
    if (lane == kWarpSize - 1) scan[warp] = incl;
    __syncthreads();
    int before = carry, total = carry;
#pragma unroll
    for (int w = 0; w < kMlaPlanThreads / kWarpSize; ++w) {
      if (w < warp) before += scan[w];
      total += scan[w];
    }
    if (b < batch) first[b] = before + incl - n;
    carry = total;
  }
  if (tid == 0) {
    first[batch] = carry;
    work_list[0] = chunk;
    work_list[1] = carry;
    work_list[2] = 0;
    work_list[3] = 0;
  }
  __syncthreads();  // first[] (global) visible to the whole block
  for (int i = tid; i < items; i += kMlaPlanThreads) {
    int4 w = make_int4(-1, 0, 0, 0);
    if (i < carry) {
      int lo_b = 0, hi_b = batch - 1;  // the last b with first[b] <= i
      while (lo_b < hi_b) {
        const int mid = lo_b + (hi_b - lo_b + 1) / 2;
        if (first[mid] <= i) lo_b = mid; else hi_b = mid - 1;
      }
      const int start = (i - first[lo_b]) * chunk;
      w = make_int4(lo_b, start, min(seq_lens[lo_b], start + chunk), 0);
    }
    reinterpret_cast<int4*>(item_ints)[i] = w;
  }
}

}  // namespace hymoe::gpu::kernels
