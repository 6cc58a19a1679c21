// Typed launchers of the kernels in kernels/cuda/ (defined in the .cu files of this folder).
// They only configure and launch; the public entry points (the .cpp files) check shapes first and
// turn the returned cudaGetLastError() into hymoe::Error. Kept apart because nvcc's front end
// cannot compile fmt's compile-time format strings (HYMOE_CHECK) in .cu files.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "hymoe/gpu/activation.h"
#include "hymoe/gpu/embedding.h"
#include "hymoe/gpu/fp8_block_gemm.h"
#include "hymoe/gpu/fp8_gemv.h"
#include "hymoe/gpu/fp8_quant.h"
#include "hymoe/gpu/layer_kernels.h"
#include "hymoe/gpu/mla_decode.h"
#include "hymoe/gpu/mla_prefill.h"
#include "hymoe/gpu/moe.h"
#include "hymoe/gpu/norm.h"
#include "hymoe/gpu/rope.h"
#include "hymoe/gpu/router.h"
#include "hymoe/gpu/sampling.h"

namespace hymoe::gpu::launch {

// vec: the 16-byte path (caller checked sizes and alignment).
cudaError_t rmsnorm(const RmsNormParams& p, bool vec, int threads, cudaStream_t stream);
cudaError_t silu_mul(const SiluMulParams& p, bool vec, cudaStream_t stream);
cudaError_t embedding_gather(const EmbeddingParams& p, bool vec, int threads, cudaStream_t stream);
cudaError_t rope_yarn(const RopeParams& p, cudaStream_t stream);
// The layer path's small kernels (layer_kernels.h).
cudaError_t embed_f32(const EmbedF32Params& p, cudaStream_t stream);
cudaError_t rmsnorm_f32(const RmsNormF32Params& p, cudaStream_t stream);
cudaError_t residual_add(const ResidualAddParams& p, cudaStream_t stream);
cudaError_t dense_gemv_f32(const DenseGemvParams& p, cudaStream_t stream);
cudaError_t silu_mul_f32(const SiluMulF32Params& p, cudaStream_t stream);
cudaError_t mla_latent_rows(const MlaLatentRowsParams& p, cudaStream_t stream);
cudaError_t widen_bf16(const WidenBf16Params& p, cudaStream_t stream);
// upload.h: in launches of kInlineUploadBytes; from the device mapping of pinned memory.
cudaError_t upload_inline(unsigned char* dst, const unsigned char* src, size_t bytes, cudaStream_t stream);
cudaError_t upload_mapped(unsigned char* dst, const unsigned char* src, size_t bytes, cudaStream_t stream);
cudaError_t dense_gemm_f32(const DenseGemmF32Params& p, cudaStream_t stream);
cudaError_t mla_gather_latent(const MlaGatherLatentParams& p, cudaStream_t stream);
cudaError_t mla_assemble_kv(const MlaAssembleKvParams& p, cudaStream_t stream);
cudaError_t mla_absorb_q(const MlaAbsorbParams& p, cudaStream_t stream);
cudaError_t mla_unabsorb(const MlaUnabsorbParams& p, cudaStream_t stream);
cudaError_t mla_attention_any(const MlaAttentionParams& p, cudaStream_t stream);
cudaError_t moe_gemv(const MoeGemvParams& p, cudaStream_t stream);
cudaError_t route_noaux_tc(const RouterParams& p, cudaStream_t stream);
cudaError_t quantize_fp8(const Fp8QuantParams& p, bool vec, cudaStream_t stream);
cudaError_t fp8_gemv(const Fp8GemvParams& p, bool tensor_cores, cudaStream_t stream);
// The kStream kernel over parts[0..count) (checked by the caller: same x, tokens, k; pdl from
// parts[0]).
cudaError_t fp8_gemv_stream(const Fp8GemvParams* parts, int count, cudaStream_t stream);
// The FP8-activation kernel over parts[0..count) (checked by the caller: same x, tokens, k; pdl
// from parts[0]; x_bf16 ignored: the caller quantised it into x / x_scales).
cudaError_t fp8_gemv_q8(const Fp8GemvQ8Params* parts, int count, cudaStream_t stream);
cudaError_t fp8_block_gemm(const Fp8BlockGemmParams& p, Fp8BlockGemmKernel kernel,
                           cudaStream_t stream);
// Rows per tile of the kernel's grouped launch (64 mma.sync, 128 wgmma, 64 wgmma64).
int fp8_grouped_gemm_tile_rows(Fp8BlockGemmKernel kernel);
// tiles: the row tiles of all experts (grid rows).
cudaError_t fp8_grouped_gemm(const GroupedGemmParams& p, Fp8BlockGemmKernel kernel, int tiles,
                             cudaStream_t stream);
// kWgmmaWsTmaGrouped: expert e's weight map (n rows of k bytes, box_rows x 128-byte boxes,
// 128-byte swizzle; box_rows = grouped_tma_tile_n(variant)) into map; the launch over rows
// permuted rows with maps_b[e] (device, 128-byte aligned) for each expert with rows, in one of
// the variants of GemmBackend (kWgmmaWsTmaGrouped*).
enum class GroupedTmaVariant {
  kPlain,             // kWgmmaWsTmaGrouped
  kSmemStore,         // kWgmmaWsTmaGroupedSt: the output through shared memory
  kSmemScales,        // kWgmmaWsTmaGroupedSc: the block scales through the ring
  kExpertMajor,       // kWgmmaWsTmaGroupedX: expert-major tile order
  kSmemScalesExpertMajor,  // kWgmmaWsTmaGroupedScX: both
  kSmemScalesExpertMajorSplit64,  // kWgmmaWsTmaGroupedScXH: and <= 64-row tiles split by columns
  // The cross-step schedule (a wgmma group in flight across each K step; WsCfg::kCross)
  kCross,                      // kWgmmaWsTmaGroupedC: with global scale loads
  kSmemScalesCross,            // kWgmmaWsTmaGroupedScC: with the scales through the ring
  kSmemScalesExpertMajorCross,  // kWgmmaWsTmaGroupedScXC: and expert-major tile order
  // ScC in 2-CTA clusters over adjacent column tiles, A multicast (WsCfg::kPair)
  kSmemScalesCrossMulticast,  // kWgmmaWsTmaGroupedScCM
  // ScCM's clusters with 128 x 192 tiles, one partial accumulator (WsCfg::kN)
  kSmemScalesMulticastWide,  // kWgmmaWsTmaGroupedScMW
  // fp8_grouped_gemm_tx.cuh (A, B and A scales on one transaction barrier)
  kTx,  // kWgmmaTmaGroupedTx
};
// The weight maps' box rows: the columns per tile, 192 for kSmemScalesMulticastWide, else 128,
// but 64 for kTx (half a tile: each CTA of a cluster loads one half).
int grouped_tma_tile_n(GroupedTmaVariant variant);
cudaError_t encode_expert_weight_map(TensorMapBytes& map, const Fp8E4M3* w, int n, int k,
                                     int box_rows);
cudaError_t fp8_grouped_gemm_tma(const GroupedGemmParams& p, const TensorMapBytes* maps_b,
                                 int rows, int row_tiles, GroupedTmaVariant variant,
                                 cudaStream_t stream);
cudaError_t mla_decode(const MlaDecodeParams& p, cudaStream_t stream);
cudaError_t mla_decode_plan(const int32_t* seq_lens, int batch, int num_splits, int wave_items,
                            int32_t* work_list, cudaStream_t stream);
cudaError_t mla_decode_plan_segments(const int32_t* seq_lens, int batch, int num_splits, int slots,
                                     int cost_tiles, int32_t* work_list, cudaStream_t stream);
cudaError_t moe_expert_offsets(const MoeOffsetsParams& p, cudaStream_t stream);
cudaError_t moe_permute_fp8(const MoePermuteParams& p, cudaStream_t stream);
cudaError_t moe_unpermute(const MoeUnpermuteParams& p, cudaStream_t stream);
cudaError_t moe_unpermute_add(const MoeUnpermuteAddParams& p, cudaStream_t stream);
cudaError_t sample_tokens(const SamplingParams& p, cudaStream_t stream);
cudaError_t mla_prefill(const MlaPrefillParams& p, cudaStream_t stream);
cudaError_t mla_merge_attention(const MlaMergeParams& p, cudaStream_t stream);
// dst [keys, heads, 192] = k_nope | k_pe of keys 0..keys-1 (16-byte aligned, checked by the caller).
cudaError_t mla_gather_k(const MlaPrefillParams& p, int keys, Bf16* dst, cudaStream_t stream);

// The SM clock probe (kernels/cuda/sm_clock.cuh): one warp spinning spin_ns of the global timer.
cudaError_t sm_clock(uint64_t spin_ns, float* mhz, cudaStream_t stream);

}  // namespace hymoe::gpu::launch
