// MLA decode attention of DeepSeek-V3 in the absorbed form over the paged latent cache.
// Per sequence b and head h (q already absorbed: q_lat = W_UK[h]^T q_nope, then the roped q_pe):
//   score(t) = (q_lat . c_kv(t) + q_pe . k_pe(t)) * softmax_scale      for t < seq_lens[b]
//   o_lat[b][h] = sum_t softmax(score)(t) * c_kv(t)                      (512 wide, BF16)
// The caller applies W_UV and o_proj. A cache token is 576 BF16: rmsnorm(c_kv) (512) then the
// roped k_pe (64); q per head is laid out the same way, so a score is one 576-long dot product.
// Many sequences of different lengths run in one launch; long contexts are split into
// `num_splits` chunks (split-K) whose partial results a second kernel merges (log-sum-exp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

inline constexpr int kMlaLatentDim = 512;
inline constexpr int kMlaRopeDim = 64;
inline constexpr int kMlaHeadDim = kMlaLatentDim + kMlaRopeDim;  // 576

// Which kernel computes the splits: tensor cores (mma.sync BF16), the CUDA-core version (kept
// as a second implementation to cross-check), or Hopper's wgmma in three variants (heads a
// multiple of 64, compute capability 9.0 and a build with architecture 90a; mla_decode throws
// otherwise): kWgmma computes the scores in both warpgroups and keeps P in registers,
// kWgmmaSplitS splits the scores' tokens between them and shares P through shared memory,
// kWgmmaPingPong gives each 64-token tile's loads, scores and softmax to one of the two
// warpgroups in turn (P and the row maxima handed over through shared memory and mbarriers), so
// that one warpgroup's softmax runs under the other's P V; kWgmmaPair works on pairs of tiles,
// one warpgroup's scores for each, both in flight at once, and refills each half of a tile as
// soon as the P V that reads it is done (only by TMA: block_size 64 and cache_blocks given).
// kAuto: see mla_decode_resolve.
enum class MlaDecodeImpl {
  kAuto,
  kTensorCores,
  kCudaCores,
  kWgmma,
  kWgmmaSplitS,
  kWgmmaPingPong,
  kWgmmaPair
};

// Whether impl is one of the wgmma kernels (64-head groups, sm_90a).
constexpr bool mla_decode_is_wgmma(MlaDecodeImpl impl) {
  return impl == MlaDecodeImpl::kWgmma || impl == MlaDecodeImpl::kWgmmaSplitS ||
         impl == MlaDecodeImpl::kWgmmaPingPong || impl == MlaDecodeImpl::kWgmmaPair;
}

struct MlaDecodeParams {
  const Bf16* q = nullptr;              // [batch, heads, 576]
  const Bf16* kv_cache = nullptr;       // [num_blocks, block_size, 576]
  const int32_t* block_table = nullptr; // [batch, max_blocks]: cache block of each seq block
  const int32_t* seq_lens = nullptr;    // [batch] tokens in the cache, each in [1, max_seq_len]
  Bf16* out = nullptr;                  // [batch, heads, 512], 8-byte aligned
  float* workspace = nullptr;           // mla_decode_workspace_bytes(batch, heads, num_splits)
  int batch = 0;
  int heads = 0;                        // a multiple of 16 (DeepSeek-V3 128, Kimi-K2 64)
  int block_size = 0;                   // tokens per cache block (>= 1)
  int max_blocks = 0;                   // columns of block_table
  int max_seq_len = 0;                  // >= every seq_lens[b]
  // Blocks in kv_cache (0: not given). With it and block_size 64, kWgmmaPingPong loads its tiles
  // by TMA (a tensor map over the cache's rows); otherwise by cp.async. kWgmmaPair needs it.
  int64_t cache_blocks = 0;
  int num_splits = 1;                   // chunks per sequence (mla_decode_splits_for picks one)
  // A work list from mla_decode_plan (mla_decode_plan.h) over the same seq_lens, batch and
  // num_splits: blocks take the list's chunks, of one length across the sequences. Null: each
  // sequence is cut into num_splits chunks of the longest one's length.
  const int32_t* work_list = nullptr;
  // Slots of a segmented work list (mla_decode_plan_segments with this many slots; only
  // kWgmmaPingPong walks one): the grid is (head groups, work_slots) and each block computes its
  // slot's run of items. 0: a list of one item a block (or none).
  int work_slots = 0;
  float softmax_scale = 0.0f;
  MlaDecodeImpl impl = MlaDecodeImpl::kAuto;
};

// Bytes of split-K scratch: partial o (512 floats), max and sum per (head, item), an item being
// one of the batch * num_splits split blocks of a head group.
size_t mla_decode_workspace_bytes(int batch, int heads, int num_splits);

// Splits that give ~2 waves of (64-head) blocks on `multiprocessors` SMs without chunks under
// 128 tokens.
// Pure function (testable without a GPU).
int mla_decode_splits(int multiprocessors, int batch, int heads, int max_seq_len);

// Splits for the wgmma kernels (one 64-head block per SM at a time): the most that keep the
// batch x head groups x splits blocks in one wave on `multiprocessors` SMs (each SM one block
// from start to end: no second wave's prologue, half the split-K partials of
// mla_decode_splits' ~2 waves), without chunks under 128 tokens (one 64-token tile per
// warpgroup), nor under 256 tokens where 128-token chunks would make blocks for half the SMs
// or more (measured on the H200: 8K context batch 1 and 1K batch 8 ran 1.11-1.13x faster in
// half as many blocks); 1 where the head groups alone fill the GPU.
// Pure function (testable without a GPU).
int mla_decode_wgmma_splits(int multiprocessors, int batch, int heads, int max_seq_len);

// Whether the wgmma implementations (kWgmma, kWgmmaSplitS, kWgmmaPingPong) can run here (compute capability 9.0, sm_90a
// code in the build).
bool mla_decode_wgmma_supported();

// The implementation kAuto runs where the wgmma kernels can (heads a multiple of 64,
// mla_decode_wgmma_supported()): where the tiles come by TMA (block_size 64 and cache_blocks > 0,
// as MlaDecodeParams), kWgmmaPair when every split is known to hold at least
// kMlaPairMinSplitTokens tokens or at most kMlaPairMaxShortSplitTokens (split_tokens: a split's
// tokens where the host knows them, as mla_decode does for a call without a work list,
// ceil(max_seq_len / num_splits); 0 unknown), else kWgmmaPingPong. On the H200 (graph and
// steady-state timing, four samples a shape) the pair kernel ran 1.02-1.05x / 1.08-1.10x the
// ping-pong at 64K batch 4 / 8 (4096- and 8192-token splits) and 1.02-1.05x on 128- and
// 256-token splits (1K batch 2-8, 8K batch 1-2), the ping-pong 1.01-1.07x ahead on 512- to
// 2048-token splits (64K batch 1-2, 8K batch 4-8), and on work lists (the planned mixed batches;
// only it walks segmented lists). The one short-split shape where the pair kernel trails, 1K
// batch 1 (16 blocks), reads 0.975-0.996x. Without TMA, kWgmmaSplitS (240 / 333 / 318 TFLOP/s
// at 64K batch 1 / 4 / 8; the ping-pong by cp.async ran slower). Without wgmma, kTensorCores
// (mma.sync 96 / 137 / 139). Other values are returned unchanged. docs/experiments.md (MLA
// decode) has the measurements.
inline constexpr int kMlaPairMinSplitTokens = 3072;
inline constexpr int kMlaPairMaxShortSplitTokens = 256;
MlaDecodeImpl mla_decode_resolve(MlaDecodeImpl impl, int heads, int block_size = 0,
                                 int64_t cache_blocks = 0, int split_tokens = 0);

// The splits to use with impl: mla_decode_wgmma_splits for the wgmma kernels (kAuto resolved
// first), mla_decode_splits for the others.
int mla_decode_splits_for(MlaDecodeImpl impl, int multiprocessors, int batch, int heads,
                          int max_seq_len);

void mla_decode(const MlaDecodeParams& p, cudaStream_t stream);

}  // namespace hymoe::gpu
