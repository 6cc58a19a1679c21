// What a split block of MLA decode attention computes and where its partials go: shared by every
// split kernel (CUDA cores, mma.sync, the wgmma ones) and the split-K merge.
#pragma once

#include "hymoe/gpu/mla_decode.h"
#include "hymoe/gpu/mla_decode_plan.h"

namespace hymoe::gpu::kernels {

// The work of one split block, from its split and sequence slot in the grid: its item,
// seq * splits + split, which places its partials in the workspace, and from the work list when
// there is one (else split `split` of sequence `seq`): sequence b (-1: an unused entry of the
// list: the block has nothing to do, not even partials to store), tokens [start, end).
struct MlaSplitWork {
  int b, start, end, item;
};

// Item `item` of mla_split_items' run (b >= 0).
__device__ __forceinline__ MlaSplitWork mla_split_item(const MlaDecodeParams& p, int chunk,
                                                      int item) {
  if (p.work_list != nullptr) {
    const int4 w = reinterpret_cast<const int4*>(p.work_list + kMlaWorkHeaderInts)[item];
    return {w.x, w.y, w.z, item};
  }
  const int seq = item / p.num_splits, start = (item % p.num_splits) * chunk;
  return {seq, start, min(p.seq_lens[seq], start + chunk), item};
}

// The one item of split `split` of sequence `seq` in a grid of `splits` (= p.num_splits) splits.
__device__ __forceinline__ MlaSplitWork mla_split_work(const MlaDecodeParams& p, int chunk,
                                                      int split, int seq, int splits) {
  return mla_split_item(p, chunk, seq * splits + split);
}

// The items a block computes, first .. end - 1: a segmented list's (MlaDecodeParams::work_slots)
// run for slot `split` (grid (head groups, slots)); else the one item of split `split` of
// sequence `seq` (none where the list leaves it unused).
struct MlaSplitItems {
  int first, end;
};

__device__ __forceinline__ MlaSplitItems mla_split_items(const MlaDecodeParams& p, int split,
                                                        int seq) {
  const int items = p.batch * p.num_splits;
  if (p.work_slots > 0) {
    const int32_t* slot_first =
        p.work_list + kMlaWorkHeaderInts + kMlaWorkItemInts * items + p.batch + 1;
    return {slot_first[split], slot_first[split + 1]};
  }
  const int item = seq * p.num_splits + split;
  if (p.work_list != nullptr && p.work_list[kMlaWorkHeaderInts + kMlaWorkItemInts * item] < 0)
    return {item, item};
  return {item, item + 1};
}

// Index of the partial of head h and `item` (of batch * splits): [heads][items], so that the
// items of one (sequence, head) lie next to each other in item order.
__device__ __forceinline__ int64_t mla_part(const MlaDecodeParams& p, int h, int item, int splits) {
  return static_cast<int64_t>(h) * p.batch * splits + item;
}

}  // namespace hymoe::gpu::kernels
