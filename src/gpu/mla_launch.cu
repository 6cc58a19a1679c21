// Launchers of MLA decode attention: split kernel then combine.
#include "kernel_launch.h"
#include "tensor_map.h"
#include "mla_decode.cuh"
#include "mla_decode_mma.cuh"
#include "mla_decode_wgmma.cuh"
#include "mla_decode_wgmma_pair.cuh"
#include "mla_decode_wgmma_pp.cuh"

namespace hymoe::gpu::launch {

cudaError_t mla_decode(const MlaDecodeParams& p, cudaStream_t stream) {
  if (p.impl == MlaDecodeImpl::kWgmmaPair) {  // (block size 64 and cache_blocks: checked)
    CUtensorMap map{};
    cudaError_t err = encode_sw128_map(map, p.kv_cache, p.cache_blocks * p.block_size,
                                       kMlaHeadDim * 2, kMlaHeadDim * 2, kernels::kWgmmaMlaTile);
    if (err == cudaSuccess)
      err = cudaFuncSetAttribute(kernels::mla_decode_wgmma_pair_kernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(kernels::kWgmmaPairSmemBytes));
    if (err != cudaSuccess) return err;
    int chunk = (p.max_seq_len + p.num_splits - 1) / p.num_splits;
    chunk = (chunk + kernels::kWgmmaMlaTile - 1) / kernels::kWgmmaMlaTile * kernels::kWgmmaMlaTile;
    const dim3 grid(p.heads / kernels::kWgmmaMlaHeads, p.num_splits, p.batch);
    kernels::mla_decode_wgmma_pair_kernel<<<grid, kernels::kWgmmaPairThreads,
                                            kernels::kWgmmaPairSmemBytes, stream>>>(p, chunk, map);
    kernels::mla_combine_kernel<<<p.batch * p.heads, 128, 0, stream>>>(p, p.num_splits);
    return cudaGetLastError();
  }
  if (p.impl == MlaDecodeImpl::kWgmmaPingPong) {
    // Checked by the caller, as below. Two warpgroups, each loading its own tiles: by TMA when a
    // tile is one cache block and the cache's extent is known (a map over its rows), else by
    // cp.async through the block table.
    CUtensorMap map{};
    const bool tma = p.block_size == kernels::kWgmmaMlaTile && p.cache_blocks > 0;
    if (tma) {
      const cudaError_t err = encode_sw128_map(map, p.kv_cache, p.cache_blocks * p.block_size,
                                               kMlaHeadDim * 2, kMlaHeadDim * 2, kernels::kWgmmaMlaTile);
      if (err != cudaSuccess) return err;
    }
    const auto kernel =
        tma ? kernels::mla_decode_wgmma_pp_kernel<true> : kernels::mla_decode_wgmma_pp_kernel<false>;
    const cudaError_t attr =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kernels::kWgmmaPpSmemBytes));
    if (attr != cudaSuccess) return attr;
    int chunk = (p.max_seq_len + p.num_splits - 1) / p.num_splits;
    chunk = (chunk + kernels::kWgmmaMlaTile - 1) / kernels::kWgmmaMlaTile * kernels::kWgmmaMlaTile;
    const dim3 grid(p.heads / kernels::kWgmmaMlaHeads, p.num_splits, p.batch);
    kernel<<<grid, kernels::kWgmmaPpThreads, kernels::kWgmmaPpSmemBytes, stream>>>(p, chunk, map);
    kernels::mla_combine_kernel<<<p.batch * p.heads, 128, 0, stream>>>(p, p.num_splits);
    return cudaGetLastError();
  }
  if (p.impl == MlaDecodeImpl::kWgmma || p.impl == MlaDecodeImpl::kWgmmaSplitS) {
    // Checked by the caller: heads a multiple of 64, compute capability 9.0 and sm_90a built.
    const auto kernel = p.impl == MlaDecodeImpl::kWgmma ? kernels::mla_decode_wgmma_kernel<false>
                                                        : kernels::mla_decode_wgmma_kernel<true>;
    const cudaError_t attr =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kernels::kWgmmaMlaSmemBytes));
    if (attr != cudaSuccess) return attr;
    int chunk = (p.max_seq_len + p.num_splits - 1) / p.num_splits;
    chunk = (chunk + kernels::kWgmmaMlaTile - 1) / kernels::kWgmmaMlaTile * kernels::kWgmmaMlaTile;
    const dim3 grid(p.heads / kernels::kWgmmaMlaHeads, p.num_splits, p.batch);
    kernel<<<grid, kernels::kWgmmaMlaThreads, kernels::kWgmmaMlaSmemBytes, stream>>>(p, chunk);
    kernels::mla_combine_kernel<<<p.batch * p.heads, 128, 0, stream>>>(p, p.num_splits);
    return cudaGetLastError();
  }
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
  // Chunk per split, rounded to whole tiles; short sequences leave trailing splits empty.
  int chunk = (p.max_seq_len + p.num_splits - 1) / p.num_splits;
  chunk = (chunk + tile - 1) / tile * tile;
  if (mma) {
    // Head groups fastest: the groups of one split run together and share its tiles in L2.
    const dim3 grid((p.heads + kernels::kMmaHeads - 1) / kernels::kMmaHeads, p.num_splits, p.batch);
    kernels::mla_decode_mma_kernel<<<grid, 256, kernels::kMmaSmemBytes, stream>>>(p, chunk);
  } else {
    const dim3 grid(p.num_splits, p.heads / kernels::kMlaHeadsPerBlock, p.batch);
    kernels::mla_decode_split_kernel<<<grid, kernels::kMlaThreads, kernels::kMlaSmemBytes, stream>>>(
        p, chunk);
  }
  kernels::mla_combine_kernel<<<p.batch * p.heads, 128, 0, stream>>>(p, p.num_splits);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
