// Launchers of the block-scaled FP8 GEMMs: mma.sync (fp8_block_gemm.cuh), wgmma
// (fp8_block_gemm_wgmma.cuh) and warp-specialised persistent wgmma (fp8_block_gemm_wgmma_ws.cuh).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstring>

#include "fp8_block_gemm.cuh"
#include "fp8_block_gemm_wgmma.cuh"
#include "fp8_block_gemm_wgmma_ws.cuh"
#include "fp8_grouped_gemm_tx.cuh"
#include "kernel_launch.h"
#include "tensor_map.h"

namespace hymoe::gpu::launch {

namespace {
// Per call (cheap): the stages need more than the default 48 KB of dynamic smem.
template <typename Kernel>
cudaError_t allow_smem(Kernel kernel, int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
}  // namespace

template <int Wgs>
cudaError_t wgmma_dense(const Fp8BlockGemmParams& p, cudaStream_t stream) {
  using Cfg = kernels::WgCfg<Wgs>;
  const cudaError_t attr = allow_smem(kernels::fp8_block_gemm_wgmma_kernel<Wgs>, Cfg::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const int tiles = ((p.n + kernels::kWgN - 1) / kernels::kWgN) * ((p.m + Cfg::kM - 1) / Cfg::kM);
  kernels::fp8_block_gemm_wgmma_kernel<Wgs><<<tiles, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

template <int Wgs>
cudaError_t wgmma_grouped(const GroupedGemmParams& p, int tiles, cudaStream_t stream) {
  using Cfg = kernels::WgCfg<Wgs>;
  const cudaError_t attr = allow_smem(kernels::fp8_grouped_gemm_wgmma_kernel<Wgs>, Cfg::kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((p.n + kernels::kWgN - 1) / kernels::kWgN, tiles);
  kernels::fp8_grouped_gemm_wgmma_kernel<Wgs><<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

namespace {
// The persistent kernels: as many blocks as fit on the GPU at once, at most one per tile.
cudaError_t persistent_grid(int tiles, int blocks_per_sm, int& grid) {
  int device = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  grid = tiles < sms * blocks_per_sm ? tiles : sms * blocks_per_sm;
  return err;
}

template <int Consumers, bool Pipelined>
cudaError_t wgmma_ws_dense(const Fp8BlockGemmParams& p, cudaStream_t stream) {
  using Cfg = kernels::WsCfg<Consumers>;
  const auto kernel = kernels::fp8_block_gemm_wgmma_ws_kernel<Consumers, Pipelined>;
  cudaError_t err = allow_smem(kernel, Cfg::kSmemBytes);
  const int tiles = ((p.n + kernels::kWgN - 1) / kernels::kWgN) * ((p.m + Cfg::kM - 1) / Cfg::kM);
  int grid = 0;
  if (err == cudaSuccess) err = persistent_grid(tiles, Cfg::kBlocksPerSm, grid);
  if (err != cudaSuccess) return err;
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

template <int Consumers, bool Pipelined, bool Cross = false>
cudaError_t wgmma_tma_dense(const Fp8BlockGemmParams& p, cudaStream_t stream) {
  using Cfg = kernels::WsCfg<Consumers, true, false, false, false, Cross>;
  const auto kernel = kernels::fp8_block_gemm_wgmma_tma_kernel<Consumers, Pipelined, Cross>;
  CUtensorMap map_a{}, map_b{};
  cudaError_t err = encode_sw128_map(map_a, p.a, p.m, p.k, p.lda, Cfg::kM);
  if (err == cudaSuccess) err = encode_sw128_map(map_b, p.b, p.n, p.k, p.ldb, kernels::kWgN);
  if (err == cudaSuccess) err = allow_smem(kernel, Cfg::kSmemBytes);
  const int tiles = ((p.n + kernels::kWgN - 1) / kernels::kWgN) * ((p.m + Cfg::kM - 1) / Cfg::kM);
  int grid = 0;
  if (err == cudaSuccess) err = persistent_grid(tiles, Cfg::kBlocksPerSm, grid);
  if (err != cudaSuccess) return err;
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p, map_a, map_b);
  return cudaGetLastError();
}

template <int Consumers, bool Pipelined>
cudaError_t wgmma_ws_grouped(const GroupedGemmParams& p, int row_tiles, cudaStream_t stream) {
  using Cfg = kernels::WsCfg<Consumers>;
  const auto kernel = kernels::fp8_grouped_gemm_wgmma_ws_kernel<Consumers, Pipelined>;
  cudaError_t err = allow_smem(kernel, Cfg::kSmemBytes);
  const int tiles = ((p.n + kernels::kWgN - 1) / kernels::kWgN) * row_tiles;
  int grid = 0;
  if (err == cudaSuccess) err = persistent_grid(tiles, Cfg::kBlocksPerSm, grid);
  if (err != cudaSuccess) return err;
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p, row_tiles);
  return cudaGetLastError();
}
}  // namespace

static_assert(sizeof(CUtensorMap) == kTensorMapBytes && alignof(CUtensorMap) == alignof(TensorMapBytes),
              "TensorMapBytes holds one CUtensorMap");

int grouped_tma_tile_n(GroupedTmaVariant variant) {
  if (variant == GroupedTmaVariant::kTx) return kernels::TxCfg::kN / 2;  // one multicast half
  return variant == GroupedTmaVariant::kSmemScalesMulticastWide ? kernels::WsPairCfg<192>::kN
                                                                : kernels::kWgN;
}

cudaError_t encode_expert_weight_map(TensorMapBytes& map, const Fp8E4M3* w, int n, int k,
                                     int box_rows) {
  CUtensorMap m{};
  const cudaError_t err = encode_sw128_map(m, w, n, k, k, box_rows);
  if (err == cudaSuccess) std::memcpy(map.bytes, &m, sizeof(m));
  return err;
}

namespace {
template <bool SmemStore, bool SmemScales = false, bool ExpertMajor = false, bool Split64 = false,
          bool Cross = false>
cudaError_t wgmma_tma_grouped(const GroupedGemmParams& p, const TensorMapBytes* maps_b, int rows,
                              int row_tiles, cudaStream_t stream) {
  using Cfg = kernels::WsCfg<2, true, SmemStore, SmemScales, Split64, Cross>;
  // SmemStore with kWgmmaWs's promotion (after each block's wgmmas): with the pipelined one's
  // second partial accumulator the staging store spills (20-92 bytes at 168 registers).
  const auto kernel =
      kernels::fp8_grouped_gemm_wgmma_tma_kernel<!SmemStore, SmemStore, SmemScales, ExpertMajor,
                                                 Split64, Cross>;
  CUtensorMap map_a{};
  cudaError_t err = encode_sw128_map(map_a, p.a, rows, p.k, p.k, Cfg::kM);
  if (err == cudaSuccess) err = allow_smem(kernel, Cfg::kSmemBytes);
  const int tiles = ((p.n + kernels::kWgN - 1) / kernels::kWgN) * row_tiles;
  int grid = 0;
  if (err == cudaSuccess) err = persistent_grid(tiles, Cfg::kBlocksPerSm, grid);
  if (err != cudaSuccess) return err;
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(
      p, row_tiles, map_a, reinterpret_cast<const CUtensorMap*>(maps_b));
  return cudaGetLastError();
}
// A persistent launch in clusters of two CTAs over an even grid: as many clusters as can be
// resident at once (GPCs may not pair all their SMs), at most `pairs`.
template <typename Kernel, typename... Args>
cudaError_t launch_pair_clusters(Kernel kernel, int threads, int smem_bytes, int pairs,
                                 cudaStream_t stream, const Args&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  int resident = 0;
  config.gridDim = dim3(2);
  const cudaError_t err = cudaOccupancyMaxActiveClusters(&resident, kernel, &config);
  if (err != cudaSuccess) return err;
  const int grid_clusters = pairs < resident ? pairs : resident;
  if (grid_clusters <= 0) return cudaErrorInvalidConfiguration;
  config.gridDim = dim3(2 * grid_clusters);
  return cudaLaunchKernelEx(&config, kernel, args...);
}

// ScC in clusters of two with A multicast (kWgmmaWsTmaGroupedScCM). map_a's boxes are
// 64 rows (each CTA of a cluster loads half of a tile's A); the grid is an even number of
// persistent CTAs, at most one cluster per pair of tiles (wgmma::pair_tile).
// TileN = 192: kWgmmaWsTmaGroupedScMW (maps_b's boxes 192 rows).
template <int TileN>
cudaError_t wgmma_tma_grouped_pair(const GroupedGemmParams& p, const TensorMapBytes* maps_b, int rows,
                                   int row_tiles, cudaStream_t stream) {
  using Cfg = kernels::WsPairCfg<TileN>;
  const auto kernel = kernels::fp8_grouped_gemm_wgmma_tma_pair_kernel<TileN>;
  CUtensorMap map_a{};
  cudaError_t err = encode_sw128_map(map_a, p.a, rows, p.k, p.k, 64);
  if (err == cudaSuccess) err = allow_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const int pairs = wgmma::pair_count(row_tiles, (p.n + Cfg::kN - 1) / Cfg::kN);
  return launch_pair_clusters(kernel, Cfg::kThreads, Cfg::kSmemBytes, pairs, stream, p, row_tiles,
                              map_a, reinterpret_cast<const CUtensorMap*>(maps_b));
}
// kWgmmaTmaGroupedTx: map_a over all permuted rows with 128-row boxes, maps_b's boxes
// 64 rows (grouped_tma_tile_n); clusters of two over an even grid, as many as can be resident,
// at most one per pair of tiles (wgmma::tx_pair_count).
cudaError_t wgmma_tma_grouped_tx(const GroupedGemmParams& p, const TensorMapBytes* maps_b, int rows,
                                 int row_tiles, cudaStream_t stream) {
  using Cfg = kernels::TxCfg;
  const auto kernel = kernels::fp8_grouped_gemm_tx_kernel;
  const int64_t scale_floats = grouped_scale_floats((p.k + kernels::kWgK - 1) / kernels::kWgK,
                                                    rows, p.experts);
  if (scale_floats >= (int64_t{1} << 31)) return cudaErrorInvalidValue;  // (int coordinates)
  CUtensorMap map_a{}, map_s{};
  cudaError_t err = encode_sw128_map(map_a, p.a, rows, p.k, p.k, Cfg::kM);
  if (err == cudaSuccess) err = encode_f32_row_map(map_s, p.a_scales, scale_floats, Cfg::kScaleBox);
  if (err == cudaSuccess) err = allow_smem(kernel, Cfg::kSmemBytes);
  if (err != cudaSuccess) return err;
  const int pairs = wgmma::tx_pair_count(row_tiles, (p.n + Cfg::kN - 1) / Cfg::kN);
  return launch_pair_clusters(kernel, Cfg::kThreads, Cfg::kSmemBytes, pairs, stream, p, row_tiles,
                              map_a, map_s, reinterpret_cast<const CUtensorMap*>(maps_b));
}
}  // namespace

cudaError_t fp8_grouped_gemm_tma(const GroupedGemmParams& p, const TensorMapBytes* maps_b,
                                 int rows, int row_tiles, GroupedTmaVariant variant,
                                 cudaStream_t stream) {
  switch (variant) {
    case GroupedTmaVariant::kPlain:
      return wgmma_tma_grouped<false>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kSmemStore:
      return wgmma_tma_grouped<true>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kSmemScales:
      return wgmma_tma_grouped<false, true, false>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kExpertMajor:
      return wgmma_tma_grouped<false, false, true>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kSmemScalesExpertMajor:
      return wgmma_tma_grouped<false, true, true>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kSmemScalesExpertMajorSplit64:
      return wgmma_tma_grouped<false, true, true, true>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kCross:
      return wgmma_tma_grouped<false, false, false, false, true>(p, maps_b, rows, row_tiles,
                                                                 stream);
    case GroupedTmaVariant::kSmemScalesCross:
      return wgmma_tma_grouped<false, true, false, false, true>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kSmemScalesExpertMajorCross:
      return wgmma_tma_grouped<false, true, true, false, true>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kSmemScalesCrossMulticast:
      return wgmma_tma_grouped_pair<128>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kSmemScalesMulticastWide:
      return wgmma_tma_grouped_pair<192>(p, maps_b, rows, row_tiles, stream);
    case GroupedTmaVariant::kTx:
      return wgmma_tma_grouped_tx(p, maps_b, rows, row_tiles, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t fp8_block_gemm(const Fp8BlockGemmParams& p, Fp8BlockGemmKernel kernel,
                           cudaStream_t stream) {
  using namespace kernels;
  if (kernel == Fp8BlockGemmKernel::kWgmma) return wgmma_dense<2>(p, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmma64) return wgmma_dense<1>(p, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmmaWs) return wgmma_ws_dense<2, false>(p, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmmaWsPipe) return wgmma_ws_dense<2, true>(p, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmmaWs64) return wgmma_ws_dense<1, true>(p, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmmaWsTma) return wgmma_tma_dense<2, true>(p, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmmaWsTmaCross)
    return wgmma_tma_dense<2, true, true>(p, stream);
  const cudaError_t attr = allow_smem(fp8_block_gemm_kernel, kBgSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((p.n + kBgN - 1) / kBgN, (p.m + kBgM - 1) / kBgM);
  fp8_block_gemm_kernel<<<grid, kBgThreads, kBgSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

int fp8_grouped_gemm_tile_rows(Fp8BlockGemmKernel kernel) {
  switch (kernel) {
    case Fp8BlockGemmKernel::kWgmma: return kernels::WgCfg<2>::kM;
    case Fp8BlockGemmKernel::kWgmma64: return kernels::WgCfg<1>::kM;
    case Fp8BlockGemmKernel::kWgmmaWs:
    case Fp8BlockGemmKernel::kWgmmaWsPipe:
    case Fp8BlockGemmKernel::kWgmmaWsTma:
    case Fp8BlockGemmKernel::kWgmmaWsTmaCross: return kernels::WsCfg<2>::kM;
    case Fp8BlockGemmKernel::kWgmmaWs64: return kernels::WsCfg<1>::kM;
    case Fp8BlockGemmKernel::kMmaSync: break;
  }
  return kernels::kBgM;
}

cudaError_t fp8_grouped_gemm(const GroupedGemmParams& p, Fp8BlockGemmKernel kernel, int tiles,
                             cudaStream_t stream) {
  using namespace kernels;
  if (kernel == Fp8BlockGemmKernel::kWgmma) return wgmma_grouped<2>(p, tiles, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmma64) return wgmma_grouped<1>(p, tiles, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmmaWs) return wgmma_ws_grouped<2, false>(p, tiles, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmmaWsPipe) return wgmma_ws_grouped<2, true>(p, tiles, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmmaWs64) return wgmma_ws_grouped<1, true>(p, tiles, stream);
  if (kernel == Fp8BlockGemmKernel::kWgmmaWsTma || kernel == Fp8BlockGemmKernel::kWgmmaWsTmaCross)
    return cudaErrorNotSupported;  // (dense only)
  const cudaError_t attr = allow_smem(fp8_grouped_gemm_kernel, kBgSmemBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((p.n + kBgN - 1) / kBgN, tiles);
  fp8_grouped_gemm_kernel<<<grid, kBgThreads, kBgSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace hymoe::gpu::launch
