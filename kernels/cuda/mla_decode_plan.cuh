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

// Block-wide sum or max of v (every thread gets it); red: kMlaPlanThreads / 32 values of shared
// memory. Starts and ends with a barrier, so that calls may follow one another.
template <bool kMax, typename T>
__device__ __forceinline__ T mla_plan_reduce(T v, T* red) {
#pragma unroll
  for (int d = kWarpSize / 2; d > 0; d /= 2) {
    const T o = __shfl_xor_sync(0xffffffffu, v, d);
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

// Block-wide exclusive scan of v over a tile of kMlaPlanThreads values (thread order), plus
// `carry` (the tiles before; updated to include this tile). scan: kMlaPlanThreads / 32 values of
// shared memory. Starts with a barrier, so that tiles may follow one another.
template <typename T>
__device__ __forceinline__ T mla_plan_scan(T v, T& carry, T* scan) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  T incl = v;
#pragma unroll
  for (int d = 1; d < kWarpSize; d *= 2) {
    const T o = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += o;
  }
  __syncthreads();  // the previous tile's reads of scan are done
  if (lane == kWarpSize - 1) scan[warp] = incl;
  __syncthreads();
  T before = carry, total = carry;
#pragma unroll
  for (int w = 0; w < kMlaPlanThreads / kWarpSize; ++w) {
    if (w < warp) before += scan[w];
    total += scan[w];
  }
  carry = total;
  return before + incl - v;
}

__global__ void __launch_bounds__(kMlaPlanThreads)
    mla_decode_plan_kernel(const int32_t* seq_lens, int batch, int items, int wave_items,
                           int32_t* work_list) {
  __shared__ int red[kMlaPlanThreads / kWarpSize];
  __shared__ int scan[kMlaPlanThreads / kWarpSize];
  const int tid = threadIdx.x;
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
    const int before = mla_plan_scan<int>(n, carry, scan);
    if (b < batch) first[b] = before;
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
  int32_t* slot_first = first + batch + 1;  // (a segmented list's; zero here, as the host mirror)
  for (int i = tid; i <= items; i += kMlaPlanThreads) slot_first[i] = 0;
}

// The segmented planner (mla_decode_plan.h): the total of tiles and costs (a block sum), the
// part a slot; then tile by tile over the batch, each sequence's first position (a scan of its
// tiles and cost) and first item (a scan of its item counts, which follow from the position), and
// the sequence's thread writes its items and the slots that start at them. Integer arithmetic in
// the order of mla_decode_plan_segments_host, which the tests compare bytewise.
__global__ void __launch_bounds__(kMlaPlanThreads)
    mla_decode_plan_segments_kernel(const int32_t* seq_lens, int batch, int items, int slots,
                                    int cost_tiles, int32_t* work_list) {
  __shared__ long long red[kMlaPlanThreads / kWarpSize];
  __shared__ long long scan_at[kMlaPlanThreads / kWarpSize];
  __shared__ int scan_n[kMlaPlanThreads / kWarpSize];
  const int tid = threadIdx.x;
  const long long cost = cost_tiles;
  auto tiles_of = [&](int b) {
    return static_cast<long long>((seq_lens[b] + kMlaWorkTokens - 1) / kMlaWorkTokens);
  };
  long long total = 0;
  for (int b = tid; b < batch; b += kMlaPlanThreads) total += tiles_of(b) + cost;
  total = mla_plan_reduce<false>(total, red);
  const long long part = (total + slots - 1) / slots;
  int32_t* item_ints = work_list + kMlaWorkHeaderInts;
  int32_t* first = item_ints + static_cast<int64_t>(kMlaWorkItemInts) * items;
  int32_t* slot_first = first + batch + 1;
  long long at_carry = 0;
  int used_carry = 0;
  for (int base = 0; base < batch; base += kMlaPlanThreads) {
    const int b = base + tid;
    const long long tiles = b < batch ? tiles_of(b) : 0;
    const long long at = mla_plan_scan<long long>(b < batch ? tiles + cost : 0, at_carry, scan_at);
    const long long slot0 = (at + cost) / part, k_lo = slot0 + 1;
    const long long k_hi = (at + cost + tiles - 1) / part;
    const int n = b < batch ? 1 + static_cast<int>(max(0ll, k_hi - k_lo + 1)) : 0;
    const int i0 = mla_plan_scan<int>(n, used_carry, scan_n);
    if (b >= batch) continue;
    first[b] = i0;
    // The previous item's slot: that of the previous sequence's last tile.
    long long prev_slot = b == 0 ? -1 : (at - 1) / part;
    for (int j = 0; j < n; ++j) {
      const long long slot = j == 0 ? slot0 : k_lo + j - 1;
      const long long t0 = j == 0 ? 0 : slot * part - at - cost;
      const long long t1 = j + 1 == n ? tiles : (k_lo + j) * part - at - cost;
      const int len = seq_lens[b];
      reinterpret_cast<int4*>(item_ints)[i0 + j] =
          make_int4(b, static_cast<int>(t0 * kMlaWorkTokens),
                    static_cast<int>(min(static_cast<long long>(len), t1 * kMlaWorkTokens)),
                    static_cast<int>(slot));
      for (long long k = prev_slot + 1; k <= slot; ++k) slot_first[k] = i0 + j;
      prev_slot = slot;
    }
  }
  // (every thread has the carries: the totals over the batch)
  const int used = used_carry;
  const long long last_slot = (at_carry - 1) / part;
  for (long long k = last_slot + 1 + tid; k <= slots; k += kMlaPlanThreads) slot_first[k] = used;
  for (int i = used + tid; i < items; i += kMlaPlanThreads)
    reinterpret_cast<int4*>(item_ints)[i] = make_int4(-1, 0, 0, 0);
  for (int i = slots + 1 + tid; i <= items; i += kMlaPlanThreads) slot_first[i] = 0;
  if (tid == 0) {
    first[batch] = used;
    work_list[0] = static_cast<int>(part * kMlaWorkTokens);
    work_list[1] = used;
    work_list[2] = slots;
    work_list[3] = 0;
  }
}

}  // namespace hymoe::gpu::kernels
