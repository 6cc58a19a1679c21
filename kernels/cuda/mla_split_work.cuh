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

__device__ __forceinline__ MlaSplitWork mla_split_work(const MlaDecodeParams& p, int chunk,
                                                      int split, int seq, int splits) {
  const int item = seq * splits + split;
  if (p.work_list != nullptr) {
    const int4 w = reinterpret_cast<const int4*>(p.work_list + kMlaWorkHeaderInts)[item];
    return {w.x, w.y, w.z, item};
  }
  const int start = split * chunk;
  return {seq, start, min(p.seq_lens[seq], start + chunk), item};
}

// Index of the partial of head h and `item` (of batch * splits): [heads][items], so that the
// items of one (sequence, head) lie next to each other in item order.
__device__ __forceinline__ int64_t mla_part(const MlaDecodeParams& p, int h, int item, int splits) {
  return static_cast<int64_t>(h) * p.batch * splits + item;
}

}  // namespace hymoe::gpu::kernels
