// MLA decode attention on Hopper's warpgroup MMA (wgmma, sm_90a only; elsewhere the body traps and
// the host never launches it: mla_decode_wgmma_supported()). The splits, workspace layout and
// combine kernel are mla_decode.cuh's, so the results compare directly with the other kernels.
// Block = (64-head group, split, sequence), 256 threads = two warpgroups, one block per SM.
// Shared memory (wgmma_layout.h's MLA tile: nine 8 KB column blocks of [64 rows][64 BF16] in the
// 128-byte swizzle): Q [64 heads][576] and a two-stage ring of 64-token cache tiles [64][576],
// filled by cp.async through the block table (any block_size) while the other stage is used.
// Per tile, each warpgroup wg (0, 1) (kWgmma; kWgmmaSplitS below):
//   S[64 heads][64 tokens] = Q K^T   36 wgmma m64n64k16, both operands K-major from shared memory
//                                    (both warpgroups compute the same S: no exchange of P)
//   online softmax in registers      log2 domain, tokens past the end masked to -inf
//   P -> BF16 registers              the accumulator fragment is the A fragment of the next wgmma
//   O[64][256 wg ..] += P V          4 wgmma m64n256k16, A = P from registers, B = columns
//                                    256 wg .. 256 wg + 255 of the SAME cache tile read MN-major
//                                    (the cache is read from memory once for both products)
// O is 64 x 256 FP32 per warpgroup: 128 accumulator registers per thread.
// kWgmmaSplitS computes S once: warpgroup wg takes tokens 32 wg .. (36 wgmma m64n32k16), the row
// maxima are exchanged through shared memory, P goes to shared memory (BF16, one swizzled 8 KB
// block) and both warpgroups read it as the A operand of P V; 4 barriers per tile instead of 2.
// NOTES: kWgmma's duplicated S costs 4.7 of its 13.6 MFLOP per tile. Neither variant overlaps
// S, softmax and P V across tiles (FlashMLA does), and the consumers issue the copies themselves
// (a TMA producer warp would free them where block_size is a multiple of 64).
#pragma once

#include "common.cuh"
#include "hymoe/gpu/mla_decode.h"
#include "mla_split_work.cuh"
#include "hymoe/gpu/wgmma_layout.h"
#include "mma.cuh"
#include "pdl.cuh"
#include "wgmma.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kWgmmaMlaHeads = wgmma::kMlaTileRows;  // 64 heads per block
inline constexpr int kWgmmaMlaTile = wgmma::kMlaTileRows;   // 64 tokens per tile
inline constexpr int kWgmmaMlaThreads = 256;
// Q + two stages + (kSplitS) P and the row-maximum exchange, plus slack to align the base to the
// 1024-byte swizzle atom: 230912 bytes of the 232448 an sm_90 block may have.
inline constexpr size_t kWgmmaMlaSmemBytes = 3 * size_t{wgmma::kMlaTileBytes} +
                                             wgmma::kMlaBlockBytes + 2 * 64 * sizeof(float) + 1024;

// Copies 64 rows of 576 BF16 into a swizzled MLA tile at shared address `dst`: thread t copies
// row t / 4 (row_src(r): its global row, or nullptr for a zero row; `any` is a readable global
// address given to the zero-filling copies, which read nothing), 16-byte chunks t % 4 + 4 j.
template <typename RowSrc>
__device__ __forceinline__ void mla_wgmma_load_rows(uint32_t dst, int tid, const void* any,
                                                    RowSrc row_src) {
  constexpr int kChunks = kMlaHeadDim * 2 / 16;  // 72 per row
  static_assert(kWgmmaMlaThreads == 4 * wgmma::kMlaTileRows, "4 threads per row");
  const int r = tid / 4;
  const uint8_t* src = row_src(r);
  const bool ok = src != nullptr;
#pragma unroll
  for (int j = 0; j < kChunks / 4; ++j) {
    const int ch = tid % 4 + 4 * j;
    cp_async16_shared(dst + wgmma::mla_tile_offset(r, ch * 8),
                      ok ? static_cast<const void*>(src + ch * 16) : any, ok);
  }
}

// A block's split-K partials in mla_decode.cuh's workspace layout (the combine kernel is shared):
// this thread's O fragment (a warpgroup's 64 x 256 accumulator, columns 256 wg..) for heads h and
// h + 8, and (warpgroup 0, lane c == 0) their running max and sum.
__device__ __forceinline__ void mla_wgmma_store_partials(const MlaDecodeParams& p,
                                                         const float (&o)[128],
                                                         const float (&m_run)[2],
                                                         const float (&l_run)[2], int h,
                                                         int item, int splits, int wg, int c) {
  pdl_launch_dependents();  // every block is at its end: the combine's grid may be set up
  const int64_t parts = static_cast<int64_t>(p.batch) * p.heads * splits;
  float* o_ws = p.workspace;
  float* ml_ws = p.workspace + parts * kMlaLatentDim;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t part = mla_part(p, h + 8 * r, item, splits);
#pragma unroll
    for (int i = 2 * r; i < 128; i += 4) {
      const int dim = 256 * wg + 8 * (i / 4) + 2 * c;
      *reinterpret_cast<float2*>(o_ws + part * kMlaLatentDim + dim) = make_float2(o[i], o[i + 1]);
    }
    if (wg == 0 && c == 0) {
      ml_ws[part * 2] = m_run[r];
      ml_ws[part * 2 + 1] = l_run[r];
    }
  }
}

// The end of a split in the kernels whose warpgroups each keep the row sums of their own tiles'
// P (kWgmmaPingPong, kWgmmaPair): the sums over the 4 lanes of a row group, then over both
// warpgroups (warpgroup 1's through l_x, 64 floats of shared memory, and a block barrier), then
// the partials. rows: this thread's two rows of the 64-head group h0.
__device__ __forceinline__ void mla_wgmma_store_split(const MlaDecodeParams& p,
                                                      const float (&o)[128],
                                                      const float (&m_run)[2], float (&l_run)[2],
                                                      float* l_x, const int (&rows)[2], int h0,
                                                      int item, int splits, int wg, int c) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  if (wg == 1 && c == 0) {
    l_x[rows[0]] = l_run[0];
    l_x[rows[1]] = l_run[1];
  }
  __syncthreads();
  if (wg == 0) {
    l_run[0] += l_x[rows[0]];
    l_run[1] += l_x[rows[1]];
  }
  mla_wgmma_store_partials(p, o, m_run, l_run, h0 + rows[0], item, splits, wg, c);
}

// kSplitS = false (MlaDecodeImpl::kWgmma): both warpgroups compute the whole S and keep P in
// registers. kSplitS = true (kWgmmaSplitS): warpgroup wg computes S for tokens 32 wg .. 32 wg + 31
// (wgmma m64n32k16), the two exchange their row maxima through shared memory, and write P (BF16,
// K-major swizzled [64 heads][64 tokens]) to shared memory, from which both read it as the A
// operand of P V: S is computed once, for two more barriers per tile.
template <bool kSplitS>
__global__ void __launch_bounds__(kWgmmaMlaThreads, 1)
    mla_decode_wgmma_kernel(MlaDecodeParams p, int chunk) {
  extern __shared__ __align__(1024) uint8_t mla_wg_smem[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(mla_wg_smem));
  const uint32_t q_s = (raw + 1023u) & ~1023u;            // [64 heads] MLA tile
  const uint32_t k_s = q_s + wgmma::kMlaTileBytes;         // 2 x [64 tokens] MLA tile
  const uint32_t p_s = k_s + 2 * wgmma::kMlaTileBytes;     // kSplitS: P, one 8 KB column block
  float* red_s = reinterpret_cast<float*>(mla_wg_smem + (p_s + wgmma::kMlaBlockBytes - raw));
                                                           // kSplitS: [2 warpgroups][64 rows]

  const int h0 = blockIdx.x * kWgmmaMlaHeads, splits = gridDim.y;
  const int tid = threadIdx.x, wg = warpgroup_index();
  const int warp = (tid % 128) / kWarpSize, lane = tid % kWarpSize, c = lane % 4, g = lane / 4;
  const MlaSplitWork work = mla_split_work(p, chunk, blockIdx.y, blockIdx.z, splits);
  if (work.b < 0) return;
  const int b = work.b, start = work.start, end = work.end;
  const int32_t* table = p.block_table + static_cast<int64_t>(b) * p.max_blocks;
  const auto* cache = reinterpret_cast<const uint8_t*>(p.kv_cache);

  const auto* q = reinterpret_cast<const uint8_t*>(p.q) +
                  (static_cast<int64_t>(b) * p.heads + h0) * (kMlaHeadDim * 2);
  mla_wgmma_load_rows(q_s, tid, q, [&](int r) { return q + r * (kMlaHeadDim * 2); });
  auto load_tile = [&](uint32_t stage, int tile) {
    mla_wgmma_load_rows(stage, tid, cache, [&](int r) -> const uint8_t* {
      const int token = tile + r;
      if (token >= end) return nullptr;  // zeros: p = 0 must not meet NaN garbage in P V
      const int64_t row =
          static_cast<int64_t>(table[token / p.block_size]) * p.block_size + token % p.block_size;
      return cache + row * (kMlaHeadDim * 2);
    });
  };
  if (start < end) load_tile(k_s, start);
  cp_async_commit();

  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  // Rows of this thread: heads 16 warp + g (r = 0) and + 8 (r = 1); accumulator register i
  // belongs to row (i / 2) % 2 (wgmma_layout.h's acc_row).
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // l: this thread's part
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  constexpr int kN = kSplitS ? 32 : 64;  // S columns (tokens) of this warpgroup
  constexpr int kS = kN / 2;             // S registers per thread
  const int tok0 = kSplitS ? 32 * wg : 0;

  int it = 0;
  for (int tile = start; tile < end; tile += kWgmmaMlaTile, ++it) {
    const uint32_t stage = k_s + (it & 1) * wgmma::kMlaTileBytes;
    if (tile + kWgmmaMlaTile < end)
      load_tile(k_s + ((it + 1) & 1) * wgmma::kMlaTileBytes, tile + kWgmmaMlaTile);
    cp_async_commit();
    cp_async_wait<1>();   // this tile (and Q) landed for this thread's copies
    fence_proxy_async();  // ... and is visible to wgmma's async proxy
    __syncthreads();      // ... for every thread's copies

    // S = Q K^T over K = 576 (tokens tok0 ..): k16 step k reads column block k / 4, 32 bytes per
    // step inside it; token row tok0 is tok0 * 128 bytes into each block.
    float s[kS];
#pragma unroll
    for (int i = 0; i < kS; ++i) s[i] = 0.0f;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kMlaHeadDim / 16; ++k) {
      const uint32_t off = (k / 4) * wgmma::kMlaBlockBytes + (k % 4) * 32;
      const uint64_t da = wgmma::sw128_kmajor_desc(q_s + off);
      const uint64_t db = wgmma::sw128_kmajor_desc(stage + off + tok0 * wgmma::kSw128RowBytes);
      if constexpr (kSplitS)
        wgmma_m64n32k16_bf16_ss(s, da, db, k > 0);
      else
        wgmma_m64n64k16_bf16_ss(s, da, db, k > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold_n(s);

    // Online softmax of the thread's two rows (the 4 lanes of a row group hold its columns).
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < kS; ++i) {
      const int col = tok0 + 8 * (i / 4) + 2 * c + (i % 2);
      s[i] = tile + col < end ? s[i] * scale_log2 : -INFINITY;
      mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], s[i]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    if constexpr (kSplitS) {  // the row maximum over both warpgroups' tokens
      if (c == 0) {
        red_s[wg * 64 + 16 * warp + g] = mx[0];
        red_s[wg * 64 + 16 * warp + g + 8] = mx[1];
      }
      __syncthreads();
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = 16 * warp + g + 8 * r;
        mx[r] = fmaxf(red_s[row], red_s[64 + row]);
      }
    }
    float alpha[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(m_run[r], mx[r]);  // finite: token `tile` is valid
      alpha[r] = fast_exp2(m_run[r] - m_new);      // 2^-inf = 0 on the first tile
      m_run[r] = m_new;
    }
#pragma unroll
    for (int i = 0; i < kS; ++i) {
      s[i] = fast_exp2(s[i] - m_run[(i / 2) % 2]);  // masked: 0
      sum[(i / 2) % 2] += s[i];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * alpha[r] + sum[r];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] *= alpha[(i / 2) % 2];

    if constexpr (kSplitS) {
      // P (BF16) into the swizzled [64 heads][64 tokens] block: register pair (i, i + 1) is row
      // 16 warp + g (+ 8), tokens tok0 + 8 (i / 4) + 2c, + 1.
      uint8_t* pb = mla_wg_smem + (p_s - raw);
#pragma unroll
      for (int i = 0; i < kS; i += 2) {
        const int row = 16 * warp + g + 8 * ((i / 2) % 2);
        const int col = tok0 + 8 * (i / 4) + 2 * c;
        *reinterpret_cast<uint32_t*>(pb + wgmma::sw128_offset(row, 2 * col)) =
            pack_bf16x2(s[i], s[i + 1]);
      }
      fence_proxy_async();  // the generic-proxy P stores, for wgmma's reads
      __syncthreads();
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kWgmmaMlaTile / 16; ++kk)
        wgmma_m64n256k16_bf16_ss_t(
            o, wgmma::sw128_kmajor_desc(p_s + kk * 32),
            wgmma::mla_v_desc(stage + 4 * wg * wgmma::kMlaBlockBytes +
                              kk * 16 * wgmma::kSw128RowBytes));
    } else {
      // P as the A fragment of k16 step kk (tokens 16 kk ..): rows g / g + 8, columns 2c / 2c + 8.
      uint32_t a[4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          a[kk][j] = pack_bf16x2(s[8 * kk + 2 * j], s[8 * kk + 2 * j + 1]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kWgmmaMlaTile / 16; ++kk)
        wgmma_m64n256k16_bf16_rs_t(
            o, a[kk],
            wgmma::mla_v_desc(stage + 4 * wg * wgmma::kMlaBlockBytes +
                              kk * 16 * wgmma::kSw128RowBytes));
    }
    // O += P V: V rows = the tile's 16 tokens of step kk, columns 256 wg .. (4 column blocks).
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_hold_n(o);
    __syncthreads();  // both warpgroups are done with this stage (and P): the next tile refills it
  }
  cp_async_wait<0>();

  // Row sums over the 4 lanes of a row group, and with kSplitS over both warpgroups' tokens.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  if constexpr (kSplitS) {
    if (wg == 1 && c == 0) {
      red_s[16 * warp + g] = l_run[0];
      red_s[16 * warp + g + 8] = l_run[1];
    }
    __syncthreads();
    if (wg == 0) {
      l_run[0] += red_s[16 * warp + g];
      l_run[1] += red_s[16 * warp + g + 8];
    }
  }

  mla_wgmma_store_partials(p, o, m_run, l_run, h0 + 16 * warp + g, work.item, splits, wg, c);
}

}  // namespace hymoe::gpu::kernels
