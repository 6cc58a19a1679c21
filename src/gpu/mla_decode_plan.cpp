// MLA decode's work list: sizes, the split count of a planned call, the host mirror of the
// planner kernel (kernels/cuda/mla_decode_plan.cuh) and its checked launch.
#include "hymoe/gpu/mla_decode_plan.h"

#include <algorithm>

#include "hymoe/common/error.h"
#include "hymoe/gpu/cuda_check.h"
#include "kernel_launch.h"

namespace hymoe::gpu {

namespace {

void check_plan_shape(int batch, int num_splits, int wave_items) {
  HYMOE_CHECK(batch >= 1 && batch <= 65535 && num_splits >= 1 && num_splits <= 1024 &&
                  wave_items >= 1,
              kInvalidArgument, "mla_decode_plan: batch {} num_splits {} wave_items {}", batch,
              num_splits, wave_items);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

size_t mla_decode_work_list_bytes(int batch, int num_splits) {
  const size_t items = size_t(batch) * num_splits;
  return sizeof(int32_t) *
         (kMlaWorkHeaderInts + kMlaWorkItemInts * items + size_t(batch) + 1 + items + 1);
}

int mla_decode_wave_items(int multiprocessors, int heads) {
  return std::max(1, multiprocessors / std::max(1, (heads + 63) / 64));
}

int mla_decode_plan_splits(int multiprocessors, int batch, int heads) {
  const int64_t wave = mla_decode_wave_items(multiprocessors, heads), n = std::max(1, batch);
  const int64_t target = ceil_div(n, wave) * wave;  // whole waves, as the planner's target
  return static_cast<int>(std::clamp<int64_t>(ceil_div(target, n), 1, 1024));
}

int mla_decode_plan_splits(int multiprocessors, int heads, std::span<const int32_t> seq_lens) {
  const int batch = static_cast<int>(seq_lens.size());
  const int wave = mla_decode_wave_items(multiprocessors, heads);
  const int used = mla_decode_plan_host(seq_lens, mla_decode_plan_splits(multiprocessors, batch, heads),
                                        wave)[1];
  return static_cast<int>(ceil_div(used, batch));
}

std::vector<int32_t> mla_decode_plan_host(std::span<const int32_t> seq_lens, int num_splits,
                                          int wave_items) {
  const int batch = static_cast<int>(seq_lens.size());
  check_plan_shape(batch, num_splits, wave_items);
  const int items = batch * num_splits;
  int longest = 0;
  int64_t n128 = 0;
  for (const int32_t len : seq_lens) {
    HYMOE_CHECK(len >= 1, kInvalidArgument, "mla_decode_plan: a sequence of {} tokens", len);
    longest = std::max(longest, int{len});
    n128 += ceil_div(len, 128);
  }
  const int target = static_cast<int>(
      std::min<int64_t>(items, ceil_div(batch, wave_items) * int64_t{wave_items}));
  const int least = 2 * std::min<int64_t>(n128, target) >= wave_items ? 4 : 2;
  int lo = least, hi = std::max(least, static_cast<int>(ceil_div(longest, kMlaWorkTokens)));
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    int64_t n = 0;
    for (const int32_t len : seq_lens) n += ceil_div(len, int64_t{mid} * kMlaWorkTokens);
    if (n <= target) hi = mid; else lo = mid + 1;
  }
  const int chunk = lo * kMlaWorkTokens;
  std::vector<int32_t> list(mla_decode_work_list_bytes(batch, num_splits) / sizeof(int32_t), 0);
  int32_t* item_ints = list.data() + kMlaWorkHeaderInts;
  int32_t* first = item_ints + size_t(kMlaWorkItemInts) * items;
  int used = 0;
  for (int b = 0; b < batch; ++b) {
    first[b] = used;
    for (int start = 0; start < seq_lens[b]; start += chunk, ++used) {
      int32_t* w = item_ints + size_t(kMlaWorkItemInts) * used;
      w[0] = b;
      w[1] = start;
      w[2] = std::min(seq_lens[b], start + chunk);
    }
  }
  first[batch] = used;
  for (int i = used; i < items; ++i) item_ints[size_t(kMlaWorkItemInts) * i] = -1;
  list[0] = chunk;
  list[1] = used;
  return list;
}

int mla_decode_segment_slots(int multiprocessors, int heads, int batch) {
  const int64_t wave = mla_decode_wave_items(multiprocessors, heads);
  return static_cast<int>(std::min<int64_t>(ceil_div(std::max(1, batch), wave) * wave, 65535));
}

int mla_decode_segment_splits(int batch, int slots) {
  return static_cast<int>(ceil_div(int64_t{slots} + batch - 1, std::max(1, batch)));
}

namespace {

void check_segments_shape(int batch, int num_splits, int slots, int cost_tiles) {
  check_plan_shape(batch, num_splits, 1);
  HYMOE_CHECK(cost_tiles >= 0 && cost_tiles <= 64, kInvalidArgument,
              "mla_decode_plan_segments: cost_tiles {} (0..64)", cost_tiles);
  HYMOE_CHECK(slots >= 1 && slots <= 65535 &&
                  int64_t{slots} + batch - 1 <= int64_t{batch} * num_splits,
              kInvalidArgument,
              "mla_decode_plan_segments: {} slots need {} items, batch {} x num_splits {} hold {}",
              slots, int64_t{slots} + batch - 1, batch, num_splits, int64_t{batch} * num_splits);
}

}  // namespace

std::vector<int32_t> mla_decode_plan_segments_host(std::span<const int32_t> seq_lens,
                                                   int num_splits, int slots, int cost_tiles) {
  const int batch = static_cast<int>(seq_lens.size());
  check_segments_shape(batch, num_splits, slots, cost_tiles);
  const int64_t cap = int64_t{batch} * num_splits, cost = cost_tiles;
  int64_t total = 0;
  for (const int32_t len : seq_lens) {
    HYMOE_CHECK(len >= 1, kInvalidArgument, "mla_decode_plan_segments: a sequence of {} tokens",
                len);
    total += ceil_div(len, kMlaWorkTokens) + cost;
  }
  const int64_t part = ceil_div(total, slots);  // tiles (with costs) of a slot
  std::vector<int32_t> list(mla_decode_work_list_bytes(batch, num_splits) / sizeof(int32_t), 0);
  int32_t* item_ints = list.data() + kMlaWorkHeaderInts;
  int32_t* first = item_ints + kMlaWorkItemInts * cap;
  int32_t* slot_first = first + batch + 1;
  int used = 0;
  int64_t at = 0, prev_slot = -1;  // at: the sequence's first position (its cost, then tiles)
  for (int b = 0; b < batch; ++b) {
    const int64_t tiles = ceil_div(seq_lens[b], kMlaWorkTokens);
    first[b] = used;
    // Part boundaries strictly inside the tiles cut the sequence: the first item's slot holds its
    // first tile; item j >= 1 starts at boundary k_lo + j - 1.
    const int64_t slot0 = (at + cost) / part, k_lo = slot0 + 1;
    const int64_t k_hi = (at + cost + tiles - 1) / part;
    const int64_t n = 1 + std::max<int64_t>(0, k_hi - k_lo + 1);
    for (int64_t j = 0; j < n; ++j, ++used) {
      const int64_t slot = j == 0 ? slot0 : k_lo + j - 1;
      const int64_t t0 = j == 0 ? 0 : slot * part - at - cost;
      const int64_t t1 = j + 1 == n ? tiles : (k_lo + j) * part - at - cost;
      int32_t* w = item_ints + int64_t{kMlaWorkItemInts} * used;
      w[0] = b;
      w[1] = static_cast<int32_t>(t0 * kMlaWorkTokens);
      w[2] = static_cast<int32_t>(std::min<int64_t>(seq_lens[b], t1 * kMlaWorkTokens));
      w[3] = static_cast<int32_t>(slot);
      for (int64_t k = prev_slot + 1; k <= slot; ++k) slot_first[k] = used;
      prev_slot = slot;
    }
    at += cost + tiles;
  }
  first[batch] = used;
  for (int64_t k = prev_slot + 1; k <= slots; ++k) slot_first[k] = used;
  for (int64_t i = used; i < cap; ++i) item_ints[kMlaWorkItemInts * i] = -1;
  list[0] = static_cast<int32_t>(part * kMlaWorkTokens);
  list[1] = used;
  list[2] = slots;
  return list;
}

void mla_decode_plan_segments(const int32_t* seq_lens, int batch, int num_splits, int slots,
                              int32_t* work_list, cudaStream_t stream, int cost_tiles) {
  check_segments_shape(batch, num_splits, slots, cost_tiles);
  HYMOE_CHECK(seq_lens && work_list, kInvalidArgument, "mla_decode_plan_segments: null pointer");
  HYMOE_CHECK((reinterpret_cast<uintptr_t>(work_list) & 15u) == 0, kInvalidArgument,
              "mla_decode_plan_segments: work_list must be 16-byte aligned");
  HYMOE_CUDA_CHECK(
      launch::mla_decode_plan_segments(seq_lens, batch, num_splits, slots, cost_tiles, work_list,
                                       stream));
}

void mla_decode_plan(const int32_t* seq_lens, int batch, int num_splits, int wave_items,
                     int32_t* work_list, cudaStream_t stream) {
  check_plan_shape(batch, num_splits, wave_items);
  HYMOE_CHECK(seq_lens && work_list, kInvalidArgument, "mla_decode_plan: null pointer");
  HYMOE_CHECK((reinterpret_cast<uintptr_t>(work_list) & 15u) == 0, kInvalidArgument,
              "mla_decode_plan: work_list must be 16-byte aligned");
  HYMOE_CUDA_CHECK(launch::mla_decode_plan(seq_lens, batch, num_splits, wave_items, work_list, stream));
}

}  // namespace hymoe::gpu
