// Launchers of MLA decode attention: split kernel then combine.
#include "kernel_launch.h"
#include "pdl_launch.h"
#include "tensor_map.h"
#include "mla_decode.cuh"
#include "mla_decode_plan.cuh"
#include "mla_decode_mma.cuh"
#include "mla_decode_wgmma.cuh"
#include "mla_decode_wgmma_pair.cuh"
#include "mla_decode_wgmma_pp.cuh"

namespace hymoe::gpu::launch {

namespace {

// The combine after a split kernel (mla_combine_groups' threads), with programmatic dependent
// launch where `pdl` (compute capability 9.0 and newer).
cudaError_t launch_combine(const MlaDecodeParams& p, bool pdl, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.batch * p.heads));
  if (kernels::mla_combine_groups(int64_t{p.batch} * p.heads) == 4)
    return launch_kernel(kernels::mla_combine_kernel<4>, grid, dim3(512), pdl, stream, p, p.num_splits);
  return launch_kernel(kernels::mla_combine_kernel<1>, grid, dim3(128), pdl, stream, p, p.num_splits);
}

// Chunk of each split: the longest sequence over the splits, rounded up to whole tiles (short
// sequences leave trailing splits empty).
int split_chunk(const MlaDecodeParams& p, int tile) {
  const int chunk = (p.max_seq_len + p.num_splits - 1) / p.num_splits;
  return (chunk + tile - 1) / tile * tile;
}

// The wgmma kernels (checked by the caller: heads a multiple of 64, compute capability 9.0 and
// sm_90a built; kWgmmaPair also block size 64 and cache_blocks): blocks of (64-head group, split,
// sequence), then the combine. kWgmmaPingPong and kWgmmaPair load their tiles by TMA through a
// map over the cache's rows where a tile is one cache block and the cache's extent is known;
// the ping-pong copies with cp.async through the block table elsewhere.
cudaError_t mla_decode_wgmma(const MlaDecodeParams& p, cudaStream_t stream) {
  const bool tma = p.block_size == kernels::kWgmmaMlaTile && p.cache_blocks > 0 &&
                   (p.impl == MlaDecodeImpl::kWgmmaPingPong || p.impl == MlaDecodeImpl::kWgmmaPair);
  CUtensorMap map{};
  if (tma) {
    const cudaError_t err =
        encode_sw128_map(map, p.kv_cache, p.cache_blocks * p.block_size, kMlaHeadDim * 2,
                         kMlaHeadDim * 2, kernels::kWgmmaMlaTile);
    if (err != cudaSuccess) return err;
  }
  const int chunk = split_chunk(p, kernels::kWgmmaMlaTile);
  // A segmented list: a block per (head group, slot), each walking its slot's items.
  const dim3 grid = p.work_slots > 0 ? dim3(p.heads / kernels::kWgmmaMlaHeads, p.work_slots, 1)
                                     : dim3(p.heads / kernels::kWgmmaMlaHeads, p.num_splits, p.batch);
  auto launch = [&](auto kernel, int threads, size_t smem, auto... extra) {
    const cudaError_t attr = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (attr != cudaSuccess) return attr;
    kernel<<<grid, threads, smem, stream>>>(p, chunk, extra...);
    return cudaSuccess;
  };
  cudaError_t err;
  if (p.impl == MlaDecodeImpl::kWgmmaPair) {
    err = launch(kernels::mla_decode_wgmma_pair_kernel, kernels::kWgmmaPairThreads,
                 kernels::kWgmmaPairSmemBytes, map);
  } else if (p.impl == MlaDecodeImpl::kWgmmaPingPong) {
    err = launch(tma ? kernels::mla_decode_wgmma_pp_kernel<true>
                     : kernels::mla_decode_wgmma_pp_kernel<false>,
                 kernels::kWgmmaPpThreads, kernels::kWgmmaPpSmemBytes, map);
  } else {
    err = launch(p.impl == MlaDecodeImpl::kWgmma ? kernels::mla_decode_wgmma_kernel<false>
                                                 : kernels::mla_decode_wgmma_kernel<true>,
                 kernels::kWgmmaMlaThreads, kernels::kWgmmaMlaSmemBytes);
  }
  if (err != cudaSuccess) return err;
  // The combine by programmatic dependent launch (sm_90): its grid is set up while the split
  // kernel's blocks store their partials (they release it just before), and waits for them.
  err = launch_combine(p, /*pdl=*/true, stream);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

}  // namespace

cudaError_t mla_decode_plan(const int32_t* seq_lens, int batch, int num_splits, int wave_items,
                            int32_t* work_list, cudaStream_t stream) {
  kernels::mla_decode_plan_kernel<<<1, kernels::kMlaPlanThreads, 0, stream>>>(
      seq_lens, batch, batch * num_splits, wave_items, work_list);
  return cudaGetLastError();
}

cudaError_t mla_decode_plan_segments(const int32_t* seq_lens, int batch, int num_splits, int slots,
                                     int cost_tiles, int32_t* work_list, cudaStream_t stream) {
  kernels::mla_decode_plan_segments_kernel<<<1, kernels::kMlaPlanThreads, 0, stream>>>(
      seq_lens, batch, batch * num_splits, slots, cost_tiles, work_list);
  return cudaGetLastError();
}

cudaError_t mla_decode(const MlaDecodeParams& p, cudaStream_t stream) {
  if (mla_decode_is_wgmma(p.impl)) return mla_decode_wgmma(p, stream);
  const bool mma = p.impl != MlaDecodeImpl::kCudaCores;
  const int tile = mma ? kernels::kMmaTile : kernels::kMlaTile;
  // Per call (a host-side attribute set, microseconds): stays right on every device.
  const cudaError_t attr =
      mma ? cudaFuncSetAttribute(kernels::mla_decode_mma_kernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(kernels::kMmaSmemBytes))
          : cudaFuncSetAttribute(kernels::mla_decode_split_kernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(kernels::kMlaSmemBytes));
  if (attr != cudaSuccess) return attr;
  const int chunk = split_chunk(p, tile);
  if (mma) {
    // Head groups fastest: the groups of one split run together and share its tiles in L2.
    const dim3 grid((p.heads + kernels::kMmaHeads - 1) / kernels::kMmaHeads, p.num_splits, p.batch);
    kernels::mla_decode_mma_kernel<<<grid, 256, kernels::kMmaSmemBytes, stream>>>(p, chunk);
  } else {
    const dim3 grid(p.num_splits, p.heads / kernels::kMlaHeadsPerBlock, p.batch);
    kernels::mla_decode_split_kernel<<<grid, kernels::kMlaThreads, kernels::kMlaSmemBytes, stream>>>(
        p, chunk);
  }
  const cudaError_t err = launch_combine(p, /*pdl=*/false, stream);
  if (err != cudaSuccess) return err;
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
