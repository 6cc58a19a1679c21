// MLA decode attention on wgmma, ping-pong (MlaDecodeImpl::kWgmmaPingPong, sm_90a only): the same
// operation, tiles, shared-memory layout, descriptors and split-K workspace as
// mla_decode_wgmma.cuh, with FlashMLA's division of the work between the two warpgroups and
// mbarriers instead of block-wide barriers.
// Block = (64-head group, split, sequence), 256 threads = two warpgroups, one block per SM; O
// columns 256 wg .. 256 wg + 255 in warpgroup wg. Tile j (64 tokens) belongs to warpgroup j % 2
// and lives in stage j % 2 (a warpgroup's tiles always use its own stage):
//   the owner loads it (cp.async through the block table, rows past the end zeroed; each thread
//     arrives on full[wg] once its copies landed: 128 per phase), computes its scores alone (36
//     wgmma m64n64k16: no duplicated S as in kWgmma, full-width instructions unlike
//     kWgmmaSplitS), the softmax, publishes P_j (BF16, swizzled, one shared 8 KB block) and the new
//     row maxima m_j, arrives on p_full[wg] (128 per phase), and runs its P V with P from
//     registers (rs wgmma);
//   the other warpgroup waits on p_full, rescales its O by 2^(m_{j-1} - m_j) and runs P V with P
//     from shared memory (ss wgmma). Once a warp's part of a warpgroup's wgmmas on tile j is done
//     (wgmma.wait_group covers the warp's own part; every part reads the whole tile as B), the
//     warp arrives on empty[j % 2] (8 per phase: every warp of both warpgroups), which the owner
//     waits for before loading tile j + 2 into the stage.
// While one warpgroup does a softmax, the other's P V (and its loads) run. Per tile j, in warpgroup
// wg (in flight before it: wg's P V of tile j - 1):
//   owner:  wait full[wg]; issue S_j; wait<1> (P V_{j-1} done: release stage (j-1) % 2, and the
//           P buffer that P V_{j-1} read is free); wait<0>; softmax; store P_j and m_j; arrive on
//           p_full[wg]; O *= alpha; issue P V_j (rs). (With cp.async: wait<0> and the release
//           first, then wait full[wg] and issue S_j: kEarly below.)
//   other:  wait<0> (own P V_{j-1} done: release stage wg); if tile j + 1 exists (and j >= 1):
//           wait empty[wg] (every warp done with tile j - 1), load tile j + 1 into stage wg;
//           wait p_full[wg ^ 1]; read
//           m_j; O *= alpha, l *= alpha; issue P V_j (ss).
// kTma (block size 64 and a tensor map over the cache's rows: the launcher's choice when
// MlaDecodeParams::cache_blocks is given): tile j is cache block table[tile / 64], loaded by one
// thread of its owner as nine TMA boxes of 64 rows x 128 bytes (one swizzled column block each)
// with a barrier each
// (piece[wg][0..8], 1 arrival + 8 KB of transactions a phase), so the owner issues the 4 wgmmas
// of a column block as soon as that block has landed instead of after the whole 72 KB tile; rows
// past the sequence's end arrive too (the cache's contents there, possibly NaN), so the owner
// zeroes their 512 V columns after its scores are done and before P V_j (the other warpgroup's
// P V waits for p_full, which follows the zeroing and its proxy fence). Without kTma, full[wg]
// as above. The rest of the protocol is the same.
// The P buffer alternates between the warpgroups' tiles: a warpgroup stores P_j only after its
// own P V_{j-1} (which read P_{j-1}) completed, and the other stored P_{j-1} only after its
// P V_{j-2} read P_{j-2} (per warp: the part of a wgmma in warp w reads P's rows 16 w.., the
// rows warp w of either warpgroup stores). m_j goes to slot j % 2 of a [2][64] exchange for the
// same reason. The P barriers are each completed by one warpgroup and waited for by the other;
// full and empty are waited for by warps that saw their previous phase complete: so a parity
// wait never sees the phase before last. Each warpgroup
// keeps the row sums of its own tiles' P, both rescaled by every alpha (the same maxima in
// both), added at the end.
#pragma once

#include <cuda.h>  // CUtensorMap (the type only: no driver call here)

#include "mla_decode_wgmma.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kWgmmaPpThreads = 256;
// Q + two stages + P + m exchange [2][64] + row-sum exchange [64] + 6 + 18 mbarriers (full,
// empty, p_full; kTma's pieces) + alignment slack.
inline constexpr size_t kWgmmaPpBarOffset =
    3 * size_t{wgmma::kMlaTileBytes} + wgmma::kMlaBlockBytes + 3 * 64 * sizeof(float);
inline constexpr int kWgmmaPpPieces = wgmma::kMlaTileBlocks;  // 9 column blocks a tile
inline constexpr size_t kWgmmaPpSmemBytes = kWgmmaPpBarOffset + (6 + 2 * kWgmmaPpPieces) * 8 + 1024;
static_assert(kWgmmaPpSmemBytes <= 232448, "sm_90's shared memory per block");

// A warpgroup's copy of 64 rows of 576 BF16 into a swizzled MLA tile at `dst`: thread t (0..127)
// copies row t / 2, 16-byte chunks t % 2 + 2 j (row_src as mla_wgmma_load_rows).
template <typename RowSrc>
__device__ __forceinline__ void mla_pp_load_rows(uint32_t dst, int t, const void* any,
                                                 RowSrc row_src) {
  constexpr int kChunks = kMlaHeadDim * 2 / 16;  // 72 per row
  const int r = t / 2;
  const uint8_t* src = row_src(r);
  const bool ok = src != nullptr;
#pragma unroll 4
  for (int j = 0; j < kChunks / 2; ++j) {
    const int ch = t % 2 + 2 * j;
    cp_async16_shared(dst + wgmma::mla_tile_offset(r, ch * 8),
                      ok ? static_cast<const void*>(src + ch * 16) : any, ok);
  }
}

// Online softmax of one thread's two rows of a 64-token S tile (the ping-pong's and the pair
// kernel's: register i of s holds row (i / 2) % 2, token tile + 8 (i / 4) + 2c + i % 2; the 4 lanes
// of a row group hold its columns) against the running maxima m_ref, in log2 units: the raw row
// maximum times scale_log2 (> 0: the same value as the maximum of the scaled scores), each
// score's scale folded into its exponent's FFMA. Tokens from `end` on are masked; only a split's
// last tile has any (masking every tile cost ~400 instructions a tile, on the path from S to
// P). The new maxima into m_new (finite: token `tile` is valid), P into s (masked: 0), its
// row sums into sum.
__device__ __forceinline__ void mla_tile_softmax(float (&s)[32], int tile, int end, int c,
                                                 float scale_log2, const float (&m_ref)[2],
                                                 float (&m_new)[2], float (&sum)[2]) {
  if (tile + kWgmmaMlaTile > end) {
#pragma unroll
    for (int i = 0; i < 32; ++i)
      if (tile + 8 * (i / 4) + 2 * c + (i % 2) >= end) s[i] = -INFINITY;
  }
  float mx[2] = {-INFINITY, -INFINITY}, neg_m[2];
#pragma unroll
  for (int i = 0; i < 32; ++i) mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], s[i]);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    m_new[r] = fmaxf(m_ref[r], mx[r] * scale_log2);
    neg_m[r] = -m_new[r];
    sum[r] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    s[i] = fast_exp2(fmaf(s[i], scale_log2, neg_m[(i / 2) % 2]));
    sum[(i / 2) % 2] += s[i];
  }
}

// Lane `lane`'s stmatrix.x4 row address for k16 step kk of warp `warp`'s 16 rows in a swizzled
// [64 heads][64 tokens] P block at p_block (the ping-pong's and the pair kernel's): the step's four
// 8x8 matrices m (rows 8 (m % 2) .. + 7 of the warp's 16, tokens 16 kk + 8 (m / 2) .. + 7) are
// the pairs of P as the rs wgmma's A fragment a[kk][m]; lane l gives row l % 8 of matrix l / 8
// (16 4-byte stores and their swizzled addresses a thread were ~270 instructions a tile where
// FlashMLA's stmatrix needs 16).
__device__ __forceinline__ uint32_t mla_p_stmatrix_row(uint32_t p_block, int warp, int lane,
                                                       int kk) {
  const int m = lane / 8;
  return p_block +
         wgmma::sw128_offset(16 * warp + 8 * (m % 2) + lane % 8, 2 * (16 * kk + 8 * (m / 2)));
}

// mbarrier_wait for a point where a wgmma is in flight: the timeout does not trap there (ptxas
// would then retire the wgmma first: "warpgroup.wait is injected"), it returns true and the
// caller traps after its next wgmma wait.
__device__ __forceinline__ bool mla_pp_wait_timed_out(uint32_t bar, uint32_t parity) {
  if (mbarrier_try_wait(bar, parity)) return false;
  const long long start = clock64();
  while (!mbarrier_try_wait(bar, parity))
    if (clock64() - start > kMbarrierTimeoutClocks) return true;
  return false;
}

template <bool kTma>
__global__ void __launch_bounds__(kWgmmaPpThreads, 1)
    mla_decode_wgmma_pp_kernel(const __grid_constant__ MlaDecodeParams p, int chunk,
                               const __grid_constant__ CUtensorMap cache_map) {
  extern __shared__ __align__(1024) uint8_t mla_pp_smem[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(mla_pp_smem));
  const uint32_t q_s = (raw + 1023u) & ~1023u;         // [64 heads] MLA tile
  const uint32_t k_s = q_s + wgmma::kMlaTileBytes;      // 2 x [64 tokens] MLA tile
  const uint32_t p_s = k_s + 2 * wgmma::kMlaTileBytes;  // P, one 8 KB column block
  float* m_x = reinterpret_cast<float*>(mla_pp_smem + (p_s + wgmma::kMlaBlockBytes - raw));
  float* l_x = m_x + 2 * 64;                           // [2][64] maxima, [64] row sums
  // mbarriers: full[2], empty[2], p_full[2], index = the owning warpgroup (= the stage).
  const uint32_t bars = q_s + static_cast<uint32_t>(kWgmmaPpBarOffset);
  auto full = [&](int w) { return bars + w * 8; };
  auto empty = [&](int w) { return bars + (2 + w) * 8; };
  auto p_full = [&](int w) { return bars + (4 + w) * 8; };
  auto piece = [&](int w, int c) { return bars + (6 + kWgmmaPpPieces * w + c) * 8; };

  // The owner's release of the previous tile's stage: with cp.async, as soon as its own P V_{j-1}
  // is done, before it waits for tile j (the next load then starts while tile j is still landing:
  // 1.18-1.21x at 64K, 1.12-1.20x at 8K batch 4-8); with TMA, after issuing S_j, so that S_j
  // queues behind P V_{j-1} (releasing early was 0-3% slower there).
  constexpr bool kEarly = !kTma;
  const int h0 = blockIdx.x * kWgmmaMlaHeads, splits = p.num_splits;
  const int tid = threadIdx.x, t = tid % 128;
  const int wg = warpgroup_index();  // (uniform: the branches on it hold wgmmas)
  const int warp = t / kWarpSize, lane = t % kWarpSize, c = lane % 4, g = lane / 4;
  const bool lane0 = lane == 0;
  // The block's items, one after another (a segmented list's run; else one item or none), each
  // from a fresh start: barriers initialised, Q and the first tiles loaded, partials stored.
  const MlaSplitItems run = mla_split_items(p, blockIdx.y, blockIdx.z);
  for (int item = run.first; item < run.end; ++item) {
    const MlaSplitWork work = mla_split_item(p, chunk, item);
    const int b = work.b, start = work.start, end = work.end;
    if (item > run.first) {  // every thread is done with the last item's barriers and buffers
      __syncthreads();
      if (tid == 0)
        for (int i = 0; i < 6 + (kTma ? 2 * kWgmmaPpPieces : 0); ++i) mbarrier_inval(bars + 8 * i);
    }
    const int tiles = start < end ? (end - start + kWgmmaMlaTile - 1) / kWgmmaMlaTile : 0;
    const int32_t* table = p.block_table + static_cast<int64_t>(b) * p.max_blocks;
    const auto* cache = reinterpret_cast<const uint8_t*>(p.kv_cache);

    if (tid == 0) {
      for (int w = 0; w < 2; ++w) {
        mbarrier_init(full(w), 128);
        mbarrier_init(empty(w), 8);
        mbarrier_init(p_full(w), 128);
        if constexpr (kTma)
          for (int c = 0; c < kWgmmaPpPieces; ++c) mbarrier_init(piece(w, c), 1);
      }
      if constexpr (kTma) {
        // The first two tiles' loads before Q's (their latencies overlap), both by this thread (the
        // barriers' inits made visible to the copies' async proxy first); tile j = cache block
        // table[(start + 64 j) / 64] (chunk and tiles 64-aligned) into stage j.
        fence_proxy_async();
        for (int j = 0; j < 2 && j < tiles; ++j) {
          const int row = table[start / kWgmmaMlaTile + j] * kWgmmaMlaTile;
          for (int c = 0; c < kWgmmaPpPieces; ++c) {
            mbarrier_arrive_expect_tx(piece(j, c), wgmma::kMlaBlockBytes);
            tma_load_2d(k_s + j * wgmma::kMlaTileBytes + c * wgmma::kMlaBlockBytes, &cache_map,
                        piece(j, c), c * wgmma::kSw128RowBytes, row);
          }
        }
      }
    }
    const auto* q = reinterpret_cast<const uint8_t*>(p.q) +
                    (static_cast<int64_t>(b) * p.heads + h0) * (kMlaHeadDim * 2);
    mla_wgmma_load_rows(q_s, tid, q, [&](int r) { return q + r * (kMlaHeadDim * 2); });
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();  // Q landed for every thread's copies; the barriers are initialised

    // Tile j (j % 2 == wg) into stage wg by this warpgroup, then the arrivals on full[wg].
    auto load_tile = [&](int j) {
      const int tile = start + j * kWgmmaMlaTile;
      if constexpr (kTma) {  // tile = cache block table[tile / 64] (chunk and tiles 64-aligned)
        if (t == 0) {
          const int row = table[tile / kWgmmaMlaTile] * kWgmmaMlaTile;
          const uint32_t dst = k_s + wg * wgmma::kMlaTileBytes;
          for (int c = 0; c < kWgmmaPpPieces; ++c) {
            mbarrier_arrive_expect_tx(piece(wg, c), wgmma::kMlaBlockBytes);
            tma_load_2d(dst + c * wgmma::kMlaBlockBytes, &cache_map, piece(wg, c),
                        c * wgmma::kSw128RowBytes, row);
          }
        }
        return;
      }
      mla_pp_load_rows(k_s + wg * wgmma::kMlaTileBytes, t, cache, [&](int r) -> const uint8_t* {
        const int token = tile + r;
        if (token >= end) return nullptr;  // zeros: p = 0 must not meet NaN garbage in P V
        const int64_t row =
            static_cast<int64_t>(table[token / p.block_size]) * p.block_size + token % p.block_size;
        return cache + row * (kMlaHeadDim * 2);
      });
      cp_async_arrive_noinc(full(wg));
    };
    if (!kTma && wg < tiles) load_tile(wg);  // (with TMA: issued above)

    const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
    // Rows of this thread: heads 16 warp + g (r = 0) and + 8 (r = 1); accumulator register i
    // belongs to row (i / 2) % 2 (wgmma_layout.h's acc_row).
    const int rows[2] = {16 * warp + g, 16 * warp + g + 8};
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // l: this thread's part
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    float s[32];
    // P of the last own tile as the A fragments of its P V (rs): live until that wgmma is waited
    // for (the PTX ISA: A's registers must not change while the wgmma is in flight).
    uint32_t a[4][4] = {};
    auto hold_a = [&] {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int x = 0; x < 4; ++x) asm volatile("" : "+r"(a[kk][x])::"memory");
    };
    const uint64_t q_desc = wgmma::sw128_kmajor_desc(q_s), p_desc = wgmma::sw128_kmajor_desc(p_s);
    const uint64_t v_col = static_cast<uint64_t>(4 * wg * wgmma::kMlaBlockBytes);

    for (int j = 0; j < tiles; ++j) {
      const int tile = start + j * kWgmmaMlaTile;
      const int owner = j % 2;
      const uint32_t stage = k_s + owner * wgmma::kMlaTileBytes;
      const uint32_t use = wgmma::mla_pp_tile_parity(j);  // parity of this tile's phases
      const uint32_t v0 = stage + static_cast<uint32_t>(v_col);
      // This tile's descriptors, each wgmma's one add from them (building every descriptor
      // from its address cost ~1300 uniform instructions a tile).
      const uint64_t k_desc = wgmma::sw128_kmajor_desc(stage), v_desc = wgmma::mla_v_desc(v0);
      if (owner == wg) {
        if constexpr (kEarly) {  // P V_{j-1} done: release stage (j-1) % 2, then wait for tile j
          wgmma_wait<0>();
          wgmma_hold_n(o);
          hold_a();
          if (j > 0 && lane0) mbarrier_arrive(empty(wg ^ 1));
        }
        bool timed_out = false;
        if constexpr (!kTma) {
          timed_out = mla_pp_wait_timed_out(full(wg), use);
          fence_proxy_async();  // cp.async writes (generic proxy) -> wgmma reads (async proxy)
        }
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < kMlaHeadDim / 16; ++k) {
          if constexpr (kTma)  // column block k / 4 landed (TMA: async proxy, as wgmma reads)
            if (k % 4 == 0) timed_out |= mla_pp_wait_timed_out(piece(wg, k / 4), use);
          const uint32_t off = (k / 4) * wgmma::kMlaBlockBytes + (k % 4) * 32;
          wgmma_m64n64k16_bf16_ss(s, wgmma::sw128_desc_advance(q_desc, off),
                                  wgmma::sw128_desc_advance(k_desc, off), k > 0);
        }
        wgmma_commit();
        // (Unconditional waits: ptxas then sees every path retire the accumulators before use.)
        if constexpr (!kEarly) {
          wgmma_wait<1>();  // P V of tile j - 1 (committed before S_j) done
          wgmma_hold_n(o);
          if (j > 0 && lane0) mbarrier_arrive(empty(wg ^ 1));  // stage of tile j - 1: refill it
        }
        wgmma_wait<0>();
        wgmma_hold_n(s);
        if (timed_out) __trap();  // a protocol bug: fail the launch rather than hang
        if constexpr (kTma) {
          // Rows past the end came from the cache as they are: zero their V columns (S is done
          // with them; P V_j of either warpgroup reads them after the fence before p_full).
          const int valid = end - tile;
          if (valid < kWgmmaMlaTile) {
            uint8_t* st = mla_pp_smem + (stage - raw);
            for (int i = t; i < (kWgmmaMlaTile - valid) * (kMlaLatentDim / 8); i += 128) {
              const int r = valid + i / (kMlaLatentDim / 8), ch = i % (kMlaLatentDim / 8);
              *reinterpret_cast<uint4*>(st + wgmma::mla_tile_offset(r, ch * 8)) =
                  make_uint4(0, 0, 0, 0);
            }
          }
        }

        // Online softmax of the thread's two rows (mla_tile_softmax), then O's and l's factor.
        float m_new[2], sum[2], alpha[2];
        mla_tile_softmax(s, tile, end, c, scale_log2, m_run, m_new, sum);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          alpha[r] = fast_exp2(m_run[r] - m_new[r]);  // 2^-inf = 0 on the first tile
          m_run[r] = m_new[r];
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * alpha[r] + sum[r];

        // P_j as the A fragments of k16 step kk (tokens 16 kk ..: rows g / g + 8, columns 2c /
        // 2c + 8), and into the swizzled [64 heads][64 tokens] block for the other warpgroup; m_j
        // into slot j % 2; then p_full.
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
#pragma unroll
          for (int x = 0; x < 4; ++x)
            a[kk][x] = pack_bf16x2(s[8 * kk + 2 * x], s[8 * kk + 2 * x + 1]);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)  // by stmatrix, four a thread (mla_p_stmatrix_row)
          stmatrix_x4(mla_p_stmatrix_row(p_s, warp, lane, kk), a[kk]);
        if (c == 0) {
          m_x[owner * 64 + rows[0]] = m_run[0];
          m_x[owner * 64 + rows[1]] = m_run[1];
        }
        fence_proxy_async();  // the generic-proxy P stores, for the other warpgroup's wgmma
        mbarrier_arrive(p_full(wg));

#pragma unroll
        for (int i = 0; i < 128; ++i) o[i] *= alpha[(i / 2) % 2];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kWgmmaMlaTile / 16; ++kk)
          wgmma_m64n256k16_bf16_rs_t(
              o, a[kk], wgmma::sw128_desc_advance(v_desc, kk * 16 * wgmma::kSw128RowBytes));
        wgmma_commit();
      } else {
        wgmma_wait<0>();  // own P V of tile j - 1 (rs: a) done
        wgmma_hold_n(o);
        hold_a();
        // This warp's part of the warpgroup's wgmmas on tile j - 1 is done; the other warps' parts
        // (which read the whole tile as B) may not be: the refill waits for all 8 warps.
        if (j > 0 && lane0) mbarrier_arrive(empty(wg));
        if (j >= 1 && j + 1 < tiles) {
          // Tile j + 1 (own) into stage wg once the other warpgroup's P V of tile j - 1 read it.
          mbarrier_wait(empty(wg), wgmma::mla_pp_tile_parity(j - 1));
          load_tile(j + 1);
        }
        mbarrier_wait(p_full(owner), use);
        if constexpr (kTma) {  // (complete: the owner waited for them) this warpgroup's V blocks
          for (int c = 4 * wg; c < 4 * wg + 4; ++c) mbarrier_wait(piece(owner, c), use);
        } else {
          mbarrier_wait(full(owner), use);  // (complete: the owner waited for it)
        }
        fence_proxy_async();
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float m_new = m_x[owner * 64 + rows[r]];
          alpha[r] = fast_exp2(m_run[r] - m_new);
          m_run[r] = m_new;
          l_run[r] *= alpha[r];
        }
#pragma unroll
        for (int i = 0; i < 128; ++i) o[i] *= alpha[(i / 2) % 2];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kWgmmaMlaTile / 16; ++kk)
          wgmma_m64n256k16_bf16_ss_t(
              o, wgmma::sw128_desc_advance(p_desc, kk * 32),
              wgmma::sw128_desc_advance(v_desc, kk * 16 * wgmma::kSw128RowBytes));
        wgmma_commit();
      }
    }
    wgmma_wait<0>();
    wgmma_hold_n(o);
    hold_a();

    mla_wgmma_store_split(p, o, m_run, l_run, l_x, rows, h0, work.item, splits, wg, c);
  }
}

}  // namespace hymoe::gpu::kernels
