// Entry point of MLA decode attention: shape checks, split heuristic, launch.
#include "hymoe/gpu/mla_decode.h"

#include <algorithm>

#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"
#include "kernel_launch.h"

namespace hymoe::gpu {

size_t mla_decode_workspace_bytes(int batch, int heads, int num_splits) {
  return sizeof(float) * size_t(batch) * heads * num_splits * (kMlaLatentDim + 2);
}

int mla_decode_splits(int multiprocessors, int batch, int heads, int max_seq_len) {
  // Blocks of the tensor-core kernel (64 heads each, one block per SM at a time).
  const int blocks_per_split = std::max(1, batch * ((heads + 63) / 64));
  const int want = std::max(1, 2 * multiprocessors / blocks_per_split);  // ~2 waves
  const int most = std::max(1, (max_seq_len + 127) / 128);               // >= 128 tokens a chunk
  return std::clamp(want, 1, std::min(most, 1024));
}

int mla_decode_wgmma_splits(int multiprocessors, int batch, int heads, int max_seq_len) {
  const int blocks_per_split = std::max(1, batch * ((heads + 63) / 64));
  const int want = std::max(1, multiprocessors / blocks_per_split);  // one wave
  // >= 128 tokens a chunk (round down); >= 256 where 128-token chunks would fill half the SMs
  // or more: a block's start (Q and its first two tiles, all blocks at once) and its partials
  // then cost more than the work they spread (H200; docs/experiments.md, MLA decode).
  int most = std::max(1, max_seq_len / 128);
  if (std::min(want, most) * blocks_per_split * 2 >= multiprocessors)
    most = std::max(1, max_seq_len / 256);
  return std::clamp(want, 1, std::min(most, 1024));
}

bool mla_decode_wgmma_supported() { return hopper_kernels_usable(); }

MlaDecodeImpl mla_decode_resolve(MlaDecodeImpl impl, int heads, int block_size, int64_t cache_blocks,
                                 int split_tokens) {
  if (impl != MlaDecodeImpl::kAuto) return impl;
  if (heads % 64 != 0 || !mla_decode_wgmma_supported()) return MlaDecodeImpl::kTensorCores;
  if (block_size != 64 || cache_blocks <= 0) return MlaDecodeImpl::kWgmmaSplitS;
  const bool pair = split_tokens >= kMlaPairMinSplitTokens ||
                    (split_tokens > 0 && split_tokens <= kMlaPairMaxShortSplitTokens);
  return pair ? MlaDecodeImpl::kWgmmaPair : MlaDecodeImpl::kWgmmaPingPong;
}

int mla_decode_splits_for(MlaDecodeImpl impl, int multiprocessors, int batch, int heads,
                          int max_seq_len) {
  return mla_decode_is_wgmma(mla_decode_resolve(impl, heads))
             ? mla_decode_wgmma_splits(multiprocessors, batch, heads, max_seq_len)
             : mla_decode_splits(multiprocessors, batch, heads, max_seq_len);
}

void mla_decode(const MlaDecodeParams& params, cudaStream_t stream) {
  MlaDecodeParams p = params;
  // A split's tokens are known here only without a work list (a list's chunk is on the device).
  const int split_tokens = params.work_list == nullptr && params.num_splits >= 1
                               ? (params.max_seq_len + params.num_splits - 1) / params.num_splits
                               : 0;
  p.impl = mla_decode_resolve(params.impl, params.heads, params.block_size, params.cache_blocks,
                              split_tokens);
  HYMOE_CHECK(p.batch >= 0 && p.batch <= 65535 && p.heads >= 16 && p.heads % 16 == 0 &&
                  p.heads <= 65535 * 16,
              kInvalidArgument, "mla_decode: batch {} heads {} (heads a multiple of 16)", p.batch,
              p.heads);
  const bool wgmma = mla_decode_is_wgmma(p.impl);
  HYMOE_CHECK(!wgmma || p.heads % 64 == 0, kInvalidArgument,
              "mla_decode (wgmma): heads {} must be a multiple of 64 (64-head blocks)", p.heads);
  HYMOE_CHECK(p.block_size >= 1 && p.max_seq_len >= 1 && p.num_splits >= 1 &&
                  int64_t{p.max_blocks} * p.block_size >= p.max_seq_len,
              kInvalidArgument,
              "mla_decode: block_size {} max_blocks {} max_seq_len {} num_splits {}",
              p.block_size, p.max_blocks, p.max_seq_len, p.num_splits);
  HYMOE_CHECK(p.cache_blocks >= 0, kInvalidArgument, "mla_decode: cache_blocks {}", p.cache_blocks);
  HYMOE_CHECK(p.impl != MlaDecodeImpl::kWgmmaPair || (p.block_size == 64 && p.cache_blocks > 0),
              kInvalidArgument,
              "mla_decode (kWgmmaPair): block_size {} cache_blocks {} (its tiles come by TMA: "
              "block_size 64 and cache_blocks given)",
              p.block_size, p.cache_blocks);
  HYMOE_CHECK(p.work_slots == 0 ||
                  (p.work_slots > 0 && p.work_slots <= 65535 && p.work_list &&
                   p.impl == MlaDecodeImpl::kWgmmaPingPong &&
                   int64_t{p.work_slots} + p.batch - 1 <= int64_t{p.batch} * p.num_splits),
              kInvalidArgument,
              "mla_decode: work_slots {} (a segmented work list: given, kWgmmaPingPong, and "
              "work_slots + batch - 1 <= batch {} x num_splits {})",
              p.work_slots, p.batch, p.num_splits);
  if (p.batch == 0) return;
  HYMOE_CHECK(p.q && p.kv_cache && p.block_table && p.seq_lens && p.out && p.workspace,
              kInvalidArgument, "mla_decode: null pointer");
  HYMOE_CHECK((reinterpret_cast<uintptr_t>(p.q) & 15u) == 0 &&
                  (reinterpret_cast<uintptr_t>(p.kv_cache) & 15u) == 0 &&
                  (reinterpret_cast<uintptr_t>(p.workspace) & 15u) == 0 &&
                  (reinterpret_cast<uintptr_t>(p.out) & 7u) == 0 &&
                  (reinterpret_cast<uintptr_t>(p.work_list) & 15u) == 0,
              kInvalidArgument,
              "mla_decode: q, cache, workspace and work list must be 16-byte aligned, out 8-byte "
              "aligned");
  HYMOE_CHECK(!wgmma || mla_decode_wgmma_supported(), kUnsupported,
              "mla_decode (wgmma) needs compute capability 9.0 and a build with CUDA architecture "
              "90a");
  HYMOE_CUDA_CHECK(launch::mla_decode(p, stream));
}

}  // namespace hymoe::gpu
