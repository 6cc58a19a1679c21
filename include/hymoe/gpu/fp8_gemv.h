// FP8 GEMV / skinny GEMM for decode: y[t][i] = sum_j W[i][j] * scale_inv[i/128][j/128] * x[t][j]
// for 1..8 tokens against a checkpoint FP8 weight, FP32 accumulation, BF16 output. The weight
// stays FP8 (decoded in registers); the block scale is applied once per 128-column partial sum.
// Memory-bound: the figure of merit is weight bytes / time against the copy bandwidth.
// Weights are decoded by bit moves, exact for every finite code; the NaN codes 0x7f/0xff (never
// in a checkpoint) read as +-480 rather than NaN.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hymoe/gpu/dtypes.h"

namespace hymoe::gpu {

inline constexpr int kGemvMaxTokens = 8;

// Tensor cores (mma.sync with the FP8 weights converted in registers; sm_89 and newer) or CUDA
// cores (FP32 FMAs; any GPU, and the cross-check). kAuto: tensor cores for 2..8 tokens where the
// GPU has them and for one token when k >= 8192, CUDA cores for one token on shorter rows
// (measured faster there on the H200). kStream (compute capability 9.0 or newer): the
// tensor-core arithmetic fed by the copy engine: a producer warp keeps a 5-stage shared-memory
// ring (16 rows x 1024 columns a stage) filled with cp.async.bulk row copies completing on
// mbarriers while 8 warps compute, over a grid of at most stream_blocks_per_sm blocks an SM, each
// looping over 16-row tiles with the next tile's bytes already in flight; results bitwise those of
// kTensorCores. The one kernel behind fp8_gemv_fused. Slower than kTensorCores / kCudaCores on
// the H200 (30-51% of copy against 35-69%; docs/experiments.md, GEMV), so kAuto does not pick it.
enum class Fp8GemvImpl { kAuto, kTensorCores, kCudaCores, kStream };

struct Fp8GemvParams {
  const Fp8E4M3* w = nullptr;      // [n, k] row-major, row i at w + i * ldw (16-byte aligned rows)
  const float* w_scales = nullptr; // [ceil(n/128), scale_ld]: the checkpoint's weight_scale_inv
  const Bf16* x = nullptr;         // [tokens, k], row t at x + t * ldx
  Bf16* y = nullptr;               // [tokens, n], row t at y + t * ldy
  int tokens = 0;                  // 1..kGemvMaxTokens
  int n = 0;                       // any
  int k = 0;                       // a multiple of 16
  int64_t ldw = 0;                 // multiple of 16
  int64_t scale_ld = 0;            // >= ceil(k/128)
  int64_t ldx = 0;                 // multiple of 8
  int64_t ldy = 0;
  Fp8GemvImpl impl = Fp8GemvImpl::kAuto;
  // Programmatic dependent launch (sm_90 and newer; ignored below): the launch may begin while the
  // previous kernel in the stream drains, streaming its first weight bytes at once; it reads x and
  // writes y only after that kernel has completed and its writes are visible (griddepcontrol.wait),
  // so results are bitwise those of a plain launch. Each block also lets the next kernel in the
  // stream start early: a later launch with this flag overlaps this one's tail; any other launch
  // (no attribute) runs after this one completes, as usual.
  bool pdl = false;
  // With pdl only (ignored otherwise and by kStream), opt-in (no gain measured on the H200): before
  // waiting for the previous kernel, each block also asks L2 for up to 32 KB of its weight
  // beyond its first round of loads (cp.async.bulk.prefetch.L2), so more of its bytes are in
  // flight while the previous kernel drains. Results unchanged.
  bool pdl_prefetch_l2 = false;
  // kStream and fp8_gemv_fused (from parts[0]; ignored by the other kernels): resident blocks an SM
  // at most (values below 1 read as 1; capped at what fits). Default 2: faster than 1 in every
  // single launch and PDL chain measured on the H200, e.g. 7168x16384 51 vs 39% of copy.
  int stream_blocks_per_sm = 2;
  // FP32 results here instead of BF16 ones in y (same layout: row t at y_f32 + t * ldy; y unused),
  // for a caller that adds them into an FP32 stream or normalises them before rounding.
  float* y_f32 = nullptr;
};

void fp8_gemv(const Fp8GemvParams& p, cudaStream_t stream);

// Several GEMVs over the same activations in one launch of the kStream kernel, as a decode step
// runs q_a with kv_a, or a shared expert's gate with up: parts[0..count) (1..kGemvMaxFused) share
// x, ldx, tokens and k (each has its own w, w_scales, y, n, ldw, scale_ld, ldy); the launch takes
// pdl and stream_blocks_per_sm from parts[0] (impl and pdl_prefetch_l2 are ignored). Results
// bitwise those of each part's own kTensorCores launch. Needs compute capability 9.0 or newer.
inline constexpr int kGemvMaxFused = 4;
void fp8_gemv_fused(const Fp8GemvParams* parts, int count, cudaStream_t stream);

// FP8 activations, as DeepSeek-V3's own inference feeds every FP8 linear layer: x quantised per
// token per 128 columns (quantize_fp8_per_token_block, fp8_quant.h), and
//   y[t][i] = sum_kb w_scale[i/128][kb] * x_scale[t][kb] * sum_{j in kb} W[i][j] * xq[t][j],
// the FP8 products of one 128-column block summed in FP32 by the tensor cores (m16n8k32 E4M3, no
// conversion of the weights), then scaled and accumulated in FP32; BF16 output. Needs compute
// capability 8.9 or newer (fp8_gemv_q8_supported()). Numerics differ from fp8_gemv's (BF16
// activations) by the activations' quantisation error (E4M3: 3 mantissa bits). Deterministic:
// a launch's results do not depend on the grid, the block shape, the staging or on which other
// parts share it. Measured (H200, 1 token): 38-72% of copy in single launches, 54-84% in PDL
// graph chains of the DeepSeek-V3 shapes (84% on 7168x16384 at 1 and 8 tokens with the ring, see
// Fp8GemvQ8Loads; docs/experiments.md, GEMV); not yet used by the engine.
//
// Staging (Fp8GemvQ8Params::staging), what each block puts in shared memory before its math,
// overlapping its first weight loads. kScales: the products weight scale x token scale of every 128-column block; kScalesAndX: those
// and the activations (at most 40 KB: k <= 16384 at 2 tokens; falls back to kScales beyond);
// kNone: every block reads them from L2 in its loop. kAuto: the launcher's choice (the fastest
// on the H200): kNone on the 16-warp block shape, kScalesAndX at 1-2 tokens with k < 8192,
// kScales otherwise.
enum class Fp8GemvQ8Staging { kAuto, kNone, kScales, kScalesAndX };

// How each warp loads what its math reads (results do not depend on it). kRounds: a round of 2-4
// 128-column blocks of weights into registers, all waited for, then each block's activations and
// scales (from L2, or from the block's staging), computed, then the next round. kRing: a per-warp
// ring of 6 shared-memory slots of weights filled by cp.async, 5 blocks ahead of the one
// computed, with each block's activations and scales loaded into registers 2 blocks ahead
// (fp8_gemv_q8_ring.cuh; `staging` is ignored). kAuto: kRing where the launch's tiles hold
// >= 32 MiB of weights (faster there on the H200), kRounds below.
enum class Fp8GemvQ8Loads { kAuto, kRounds, kRing };

struct Fp8GemvQ8Params {
  const Fp8E4M3* w = nullptr;       // [n, k] row-major, row i at w + i * ldw (16-byte aligned rows)
  const float* w_scales = nullptr;  // [ceil(n/128), scale_ld]: the checkpoint's weight_scale_inv
  const Fp8E4M3* x = nullptr;       // [tokens, k] quantised activations, row t at x + t * ldx
  const float* x_scales = nullptr;  // token t, columns 128kb..: x_scales[kb * x_scale_ld + t]
  Bf16* y = nullptr;                // [tokens, n], row t at y + t * ldy
  int tokens = 0;                   // 1..kGemvMaxTokens
  int n = 0;                        // any
  int k = 0;                        // a multiple of 16
  int64_t ldw = 0;                  // multiple of 16
  int64_t scale_ld = 0;             // >= ceil(k/128)
  int64_t ldx = 0;                  // multiple of 16 (x 16-byte aligned)
  int64_t x_scale_ld = 0;           // >= tokens
  int64_t ldy = 0;
  bool pdl = false;                 // as Fp8GemvParams::pdl: weights stream before the wait
  // Warps a 16-row tile (4, 8 or 16; from parts[0] in a fused launch; results do not depend on
  // it). 0: the launcher's choice, the block shape whose resident blocks cover the launch's tiles
  // in the fewest waves (ties: more warps a tile).
  int warps_per_tile = 0;
  // What each block copies into shared memory before its math (from parts[0]; results do not
  // depend on it): see Fp8GemvQ8Staging.
  Fp8GemvQ8Staging staging = Fp8GemvQ8Staging::kAuto;
  // How the warps load the weights (from parts[0]; results do not depend on it).
  Fp8GemvQ8Loads loads = Fp8GemvQ8Loads::kAuto;
  // BF16 activations (optional; shared by fused parts): [tokens, k], row t at x_bf16 + t *
  // ldx_bf16 (16-byte aligned rows). The call then quantises them first
  // (quantize_fp8_per_token_block into x / x_scales, which are then its scratch, in the same PDL
  // mode): one call for a BF16 input, results bitwise those of the two calls.
  const Bf16* x_bf16 = nullptr;
  int64_t ldx_bf16 = 0;  // >= k, multiple of 8
};

bool fp8_gemv_q8_supported();
void fp8_gemv_q8(const Fp8GemvQ8Params& p, cudaStream_t stream);
// Parts over the same x (x, x_scales, ldx, x_scale_ld, tokens and k shared; pdl from parts[0]) in
// one launch: 1..kGemvMaxFused of them. Each part's results bitwise its own fp8_gemv_q8 launch's.
void fp8_gemv_q8_fused(const Fp8GemvQ8Params* parts, int count, cudaStream_t stream);

}  // namespace hymoe::gpu
