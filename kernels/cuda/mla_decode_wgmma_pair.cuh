// MLA decode attention on wgmma in pairs of tiles (MlaDecodeImpl::kWgmmaPair, sm_90a only; block
// size 64 and MlaDecodeParams::cache_blocks given: tiles by TMA): the operation, tiles,
// descriptors and split-K workspace of mla_decode_wgmma.cuh, scheduled in pairs of tiles as
// FlashMLA's SM90 dense decode is, because the ping-pong of mla_decode_wgmma_pp.cuh leaves the
// tensor pipe idle through every softmax (docs/experiments.md, MLA decode).
// Block = (64-head group, split, sequence), 256 threads = two warpgroups, one block per SM. Pair
// i = tiles t0 = 2i (stage 0) and t1 = 2i + 1 (stage 1, absent when the split's tile count is odd
// and i is its last pair). Warpgroup 0 computes S of t0, warpgroup 1 S of t1; O columns
// 256 wg .. 256 wg + 255 live in warpgroup wg, which runs P V of both tiles on them. Both S of a
// pair are in flight together, so warpgroup 0's softmax runs under warpgroup 1's S, and warpgroup
// 1's softmax under warpgroup 0's P V. Per pair i (parity i & 1 on every barrier of the pair):
//   wg 0: wait S_a (t0); softmax with m_a = max(m, rowmax S_a), publish m_a (m_full[0]);
//         O *= alpha; issue P_a V0 (rs); wait m_full[1] for m_b; P_a' = P_a 2^(m_a - m_b) into
//         sP0, p_full[0]; wait P_a V0: its half of stage 0 (column blocks 0-3: only its P V
//         reads them besides S) gets tile t0 + 2; O *= 2^(m_a - m_b); wait p_full[1], issue
//         P_b V1 (ss); if there is a
//         next pair: S of t0 + 2 over its own half, wait<1> (P_b V1 done): its half of stage 1
//         gets tile t1 + 2; S of t0 + 2 over blocks 4-8.
//   wg 1: wait S_b (t1); wait m_full[0] for m_a; softmax with m_b = max(m_a, rowmax S_b), publish
//         m_b (m_full[1]); O *= 2^(m - m_b); P_b into sP1, p_full[1]; issue P_b V1 (rs); wait
//         p_full[0], issue P_a' V0 (ss); wait<1> (P_b V1 done): its half of stage 1 (blocks 4-8)
//         gets tile t1 + 2; wait<0>: its half of stage 0 gets tile t0 + 2; S of t1 + 2 (its
//         own half first).
// A half is refilled by thread 0 of the warpgroup that reads it in P V once the 4 warps of that
// warpgroup arrived on half_empty[stage][wg] (their parts of the wgmma read the whole tile as B);
// S of the tile was done before either P existed. Each column block has its own barrier (1
// arrival + 8 KB of TMA bytes a phase), waited for just before the wgmmas that read it. Q's rope
// columns (block 8) stay in registers as the A operand of S's last 4 wgmmas (rs), which leaves
// shared memory room for the two P buffers (Q 64 KB + 2 stages 144 KB + P 16 KB). Rows past the
// sequence's end arrive as the cache holds them: the warpgroup that computed the tile's S zeroes
// their V columns before any P V reads them. Each warpgroup keeps the row sums of its own tiles'
// P at the running maximum (the same in both), added at the end.
// tests/gpu/mla_pair_protocol_test.cpp runs this protocol on a CPU model of mbarriers.
#pragma once

#include <cuda.h>  // CUtensorMap (the type only: no driver call here)

#include "mla_decode_wgmma_pp.cuh"

namespace hymoe::gpu::kernels {

inline constexpr int kWgmmaPairThreads = 256;
inline constexpr int kWgmmaPairQBlocks = wgmma::kMlaTileBlocks - 1;  // Q's blocks in shared memory
inline constexpr int kWgmmaPairHalf = 4;  // blocks [0, 4): warpgroup 0's half; [4, 9): 1's
// Q (8 blocks) + two stages + two P blocks + exchanges [2][64] maxima, [64] row sums, then 26
// mbarriers (piece[2][9], half_empty[2][2], m_full[2], p_full[2]) + alignment slack.
inline constexpr size_t kWgmmaPairBarOffset =
    kWgmmaPairQBlocks * size_t{wgmma::kMlaBlockBytes} + 2 * size_t{wgmma::kMlaTileBytes} +
    2 * size_t{wgmma::kMlaBlockBytes} + 3 * 64 * sizeof(float);
inline constexpr size_t kWgmmaPairSmemBytes = kWgmmaPairBarOffset + 26 * 8 + 1024;
static_assert(kWgmmaPairSmemBytes <= 232448, "sm_90's shared memory per block");

// bar.sync on named barrier 1 + wg for warpgroup wg's 128 threads.
__device__ __forceinline__ void mla_pair_warpgroup_sync(int wg) {
  if (wg == 0) {
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  } else {
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
  }
}

__global__ void __launch_bounds__(kWgmmaPairThreads, 1)
    mla_decode_wgmma_pair_kernel(const __grid_constant__ MlaDecodeParams p, int chunk,
                                 const __grid_constant__ CUtensorMap cache_map) {
  extern __shared__ __align__(1024) uint8_t mla_pair_smem[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(mla_pair_smem));
  const uint32_t q_s = (raw + 1023u) & ~1023u;  // Q's column blocks 0-7
  const uint32_t k_s = q_s + kWgmmaPairQBlocks * wgmma::kMlaBlockBytes;  // 2 x [64 tokens] tile
  const uint64_t q_desc = wgmma::sw128_kmajor_desc(q_s);
  const uint32_t p_s = k_s + 2 * wgmma::kMlaTileBytes;                   // sP0, sP1
  float* m_x = reinterpret_cast<float*>(mla_pair_smem + (p_s + 2 * wgmma::kMlaBlockBytes - raw));
  float* l_x = m_x + 2 * 64;
  const uint32_t bars = q_s + static_cast<uint32_t>(kWgmmaPairBarOffset);
  auto piece = [&](int st, int cb) { return bars + (st * wgmma::kMlaTileBlocks + cb) * 8; };
  auto half_empty = [&](int st, int w) { return bars + (18 + 2 * st + w) * 8; };
  auto m_full = [&](int w) { return bars + (22 + w) * 8; };
  auto p_full = [&](int w) { return bars + (24 + w) * 8; };
  auto stage_of = [&](int st) { return k_s + st * wgmma::kMlaTileBytes; };
  auto p_buf = [&](int w) { return p_s + w * wgmma::kMlaBlockBytes; };

  const int h0 = blockIdx.x * kWgmmaMlaHeads, splits = gridDim.y;
  const int tid = threadIdx.x, t = tid % 128;
  const int wg = warpgroup_index();  // (uniform: the branches on it hold wgmmas)
  const int warp = t / kWarpSize, lane = t % kWarpSize, c = lane % 4, g = lane / 4;
  const bool lane0 = lane == 0;
  const MlaSplitWork work = mla_split_work(p, chunk, blockIdx.y, blockIdx.z, splits);
  if (work.b < 0) return;
  const int b = work.b, start = work.start, end = work.end;
  const int tiles = start < end ? (end - start + kWgmmaMlaTile - 1) / kWgmmaMlaTile : 0;
  const int pairs = (tiles + 1) / 2;
  const int32_t* table =  // this split's entries
      p.block_table + static_cast<int64_t>(b) * p.max_blocks + start / kWgmmaMlaTile;

  if (tid == 0) {
    for (int st = 0; st < 2; ++st) {
      for (int cb = 0; cb < wgmma::kMlaTileBlocks; ++cb) mbarrier_init(piece(st, cb), 1);
      for (int w = 0; w < 2; ++w) mbarrier_init(half_empty(st, w), 4);  // a warpgroup's warps
    }
    for (int w = 0; w < 2; ++w) {
      mbarrier_init(m_full(w), 128);
      mbarrier_init(p_full(w), 128);
    }
    // The first two tiles' loads before Q's (their latencies overlap), whole tiles by this thread
    // (the barriers' inits made visible to the copies' async proxy first).
    fence_proxy_async();
    for (int j = 0; j < 2 && j < tiles; ++j)
      for (int cb = 0; cb < wgmma::kMlaTileBlocks; ++cb) {
        mbarrier_arrive_expect_tx(piece(j, cb), wgmma::kMlaBlockBytes);
        tma_load_2d(stage_of(j) + cb * wgmma::kMlaBlockBytes, &cache_map, piece(j, cb),
                    cb * wgmma::kSw128RowBytes, table[j] * kWgmmaMlaTile);
      }
  }
  // Rows of this thread: heads 16 warp + g (r = 0) and + 8 (r = 1); accumulator register i
  // belongs to row (i / 2) % 2 (wgmma_layout.h's acc_row).
  const int rows[2] = {16 * warp + g, 16 * warp + g + 8};
  const auto* q = reinterpret_cast<const uint8_t*>(p.q) +
                  (static_cast<int64_t>(b) * p.heads + h0) * (kMlaHeadDim * 2);
  {  // Q's blocks 0-7 by cp.async: thread tid copies row tid / 4, 16-byte chunks tid % 4 + 4 j
    constexpr int kChunks = kWgmmaPairQBlocks * wgmma::kMlaBlockCols * 2 / 16;  // 64 a row
    const int r = tid / 4;
#pragma unroll
    for (int j = 0; j < kChunks / 4; ++j) {
      const int ch = tid % 4 + 4 * j;
      cp_async16_shared(q_s + wgmma::mla_tile_offset(r, ch * 8),
                        q + r * (kMlaHeadDim * 2) + ch * 16, true);
    }
    cp_async_commit();
  }
  // Q's rope block as the A fragments of S's k16 steps 32..35 (rows g / g + 8, columns 2c /
  // 2c + 8).
  uint32_t q8[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int row = rows[x % 2], col = kWgmmaPairQBlocks * 64 + 16 * kk + 2 * c + 8 * (x / 2);
      q8[kk][x] = *reinterpret_cast<const uint32_t*>(q + row * (kMlaHeadDim * 2) + col * 2);
    }
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();  // Q landed for every thread's copies; the barriers are initialised

  // Thread 0 of each warpgroup loads its half of every tile after the first two; the block of the
  // next tile of each parity is read ahead (the two halves of a pair's refill come in either
  // order).
  int next_block[2] = {0, 0};
  if (t == 0)
    for (int j = 2; j < 4 && j < tiles; ++j) next_block[j % 2] = table[j];
  const int half_begin = wg ? kWgmmaPairHalf : 0;
  const int half_end = wg ? wgmma::kMlaTileBlocks : kWgmmaPairHalf;
  auto load_half = [&](int j) {  // (thread 0) this warpgroup's blocks of tile j, stage j % 2
    const int st = j % 2, row = next_block[st] * kWgmmaMlaTile;
    if (j + 2 < tiles) next_block[st] = table[j + 2];
    for (int cb = half_begin; cb < half_end; ++cb) {
      mbarrier_arrive_expect_tx(piece(st, cb), wgmma::kMlaBlockBytes);
      tma_load_2d(stage_of(st) + cb * wgmma::kMlaBlockBytes, &cache_map, piece(st, cb),
                  cb * wgmma::kSw128RowBytes, row);
    }
  };
  uint32_t timed_out = 0;  // any wait timed out (a word: as a bool ptxas packed it with byte moves at every wait)
  // This warpgroup's release of its half of stage st after pair i (its P V there done), and the
  // refill with tile j when there is one.
  // (The whole warpgroup waits, so that the only code thread 0 runs alone is the copies' issue:
  // a wait loop there made ptxas serialise every wgmma of the kernel, C7520.)
  auto refill = [&](int st, int i, int j) {
    if (lane0) mbarrier_arrive(half_empty(st, wg));
    if (j < tiles) {
      timed_out |= mla_pp_wait_timed_out(half_empty(st, wg), static_cast<uint32_t>(i & 1));
      if (t == 0) load_half(j);
    }
  };

  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // l: this thread's part
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  float s[32];
  uint32_t a[4][4] = {};  // P of this warpgroup's tile as the A fragments of its rs P V
  // O *= f per row, skipped where no row of the warp changed its maximum (f 1: the product is O
  // itself), as on most tiles of a long context: 128 multiplies a thread off the path to P V.
  auto rescale_o = [&](const float (&f)[2]) {
    if (__all_sync(0xffffffffu, f[0] == 1.0f && f[1] == 1.0f)) return;
#pragma unroll
    for (int k = 0; k < 128; ++k) o[k] *= f[(k / 2) % 2];
  };
  auto hold_a = [&] {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int x = 0; x < 4; ++x) asm volatile("" : "+r"(a[kk][x])::"memory");
  };
  // S of tile j over column blocks [kC0, kC1) (block 8 from q8 in registers), each once it landed
  // (TMA writes are async-proxy, as wgmma reads); `zero`: the first wgmma starts the sum.
  auto issue_s = [&]<int kC0, int kC1>(int j, bool zero) {
    const uint32_t stage = stage_of(j % 2), use = static_cast<uint32_t>((j / 2) & 1);
    // Each wgmma's descriptors: one add from the tile's and Q's (building every descriptor from
    // its address cost ~1300 uniform instructions a tile in the ping-pong, by ncu).
    const uint64_t k_desc = wgmma::sw128_kmajor_desc(stage);
    constexpr int kSmemEnd = kC1 < kWgmmaPairQBlocks ? kC1 : kWgmmaPairQBlocks;
    // Q's shared-memory blocks in a loop (not unrolled: the kernel's code is large enough that
    // instruction fetch showed in its stalls, 17% of them with every block unrolled). The two
    // descriptors ride the loop, one add a block each, opaque to the compiler: left to itself it
    // rebuilt both from the stage's address every block (ncu: ~25 uniform instructions a block,
    // ~190 a tile, where FlashMLA's whole kernel issues ~60).
    uint64_t qd = wgmma::sw128_desc_advance(q_desc, kC0 * wgmma::kMlaBlockBytes);
    uint64_t kd = wgmma::sw128_desc_advance(k_desc, kC0 * wgmma::kMlaBlockBytes);
#pragma unroll 1
    for (int cb = kC0; cb < kSmemEnd; ++cb) {
      timed_out |= mla_pp_wait_timed_out(piece(j % 2, cb), use);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_m64n64k16_bf16_ss(s, wgmma::sw128_desc_advance(qd, kk * 32),
                                wgmma::sw128_desc_advance(kd, kk * 32),
                                !zero || cb > kC0 || kk > 0);
      qd = wgmma::sw128_desc_advance(qd, wgmma::kMlaBlockBytes);
      kd = wgmma::sw128_desc_advance(kd, wgmma::kMlaBlockBytes);
      asm volatile("" : "+l"(qd), "+l"(kd));
    }
    if constexpr (kC1 > kWgmmaPairQBlocks) {  // the rope block, Q from registers
      constexpr int cb = kWgmmaPairQBlocks;
      timed_out |= mla_pp_wait_timed_out(piece(j % 2, cb), use);
      wgmma_fence();  // q8's registers, after the wait's branches
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_m64n64k16_bf16_rs(
            s, q8[kk], wgmma::sw128_desc_advance(k_desc, cb * wgmma::kMlaBlockBytes + kk * 32),
            !zero || cb > kC0 || kk > 0);
    }
  };
  // Rows of tile j past the end came from the cache as they are: zero their V columns (S is done
  // with them: the warpgroup's barrier) before any P V reads them, visible to the wgmmas of both
  // warpgroups (the proxy fence and a second barrier; the other warpgroup's P V follows p_full).
  auto zero_tail = [&](int j) {
    const int valid = end - (start + j * kWgmmaMlaTile);
    if (valid >= kWgmmaMlaTile) return;
    mla_pair_warpgroup_sync(wg);  // every warp's part of S (which reads these rows) done
    uint8_t* st = mla_pair_smem + (stage_of(j % 2) - raw);
    for (int i = t; i < (kWgmmaMlaTile - valid) * (kMlaLatentDim / 8); i += 128) {
      const int r = valid + i / (kMlaLatentDim / 8), ch = i % (kMlaLatentDim / 8);
      *reinterpret_cast<uint4*>(st + wgmma::mla_tile_offset(r, ch * 8)) = make_uint4(0, 0, 0, 0);
    }
    fence_proxy_async();
    mla_pair_warpgroup_sync(wg);
  };
  // Online softmax of this thread's two rows of S (tile j) against the maxima m_ref
  // (mla_tile_softmax): the new maxima into m_new, P into s, its row sums into sum.
  auto softmax = [&](int j, const float (&m_ref)[2], float (&m_new)[2], float (&sum)[2]) {
    mla_tile_softmax(s, start + j * kWgmmaMlaTile, end, c, scale_log2, m_ref, m_new, sum);
  };
  auto pack_p = [&] {  // P (s) as the A fragments of P V's k16 steps (tokens 16 kk ..)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        a[kk][x] = pack_bf16x2(s[8 * kk + 2 * x], s[8 * kk + 2 * x + 1]);
  };
  // P (s times `scale` per row) into P block w, swizzled [64 heads][64 tokens], by stmatrix
  // (mla_p_stmatrix_row: the registers pack_p puts in a[kk], scaled).
  auto store_p = [&](int w, const float (&scale)[2]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t b[4];
#pragma unroll
      for (int x = 0; x < 4; ++x)
        b[x] = pack_bf16x2(s[8 * kk + 2 * x] * scale[x % 2], s[8 * kk + 2 * x + 1] * scale[x % 2]);
      stmatrix_x4(mla_p_stmatrix_row(p_buf(w), warp, lane, kk), b);
    }
    fence_proxy_async();  // the generic-proxy P stores, for the other warpgroup's wgmma
  };
  // This warpgroup's V columns (256 wg ..) of stage st.
  auto v_half = [&](int st) { return stage_of(st) + 4 * wg * wgmma::kMlaBlockBytes; };
  auto pv_rs = [&](int st) {
    const uint64_t v_desc = wgmma::mla_v_desc(v_half(st));
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgmmaMlaTile / 16; ++kk)
      wgmma_m64n256k16_bf16_rs_t(
          o, a[kk], wgmma::sw128_desc_advance(v_desc, kk * 16 * wgmma::kSw128RowBytes));
    wgmma_commit();
  };
  auto pv_ss = [&](int st, int w) {  // P from block w
    const uint64_t v_desc = wgmma::mla_v_desc(v_half(st));
    const uint64_t p_desc = wgmma::sw128_kmajor_desc(p_buf(w));
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgmmaMlaTile / 16; ++kk)
      wgmma_m64n256k16_bf16_ss_t(
          o, wgmma::sw128_desc_advance(p_desc, kk * 32),
          wgmma::sw128_desc_advance(v_desc, kk * 16 * wgmma::kSw128RowBytes));
    wgmma_commit();
  };
  // This warpgroup's V blocks of tile j, whose S the other warpgroup computed (landed: it waited
  // for them), waited for again for the async proxy's view in this warpgroup.
  auto wait_v = [&](int j) {
    for (int cb = 4 * wg; cb < 4 * wg + 4; ++cb)
      timed_out |= mla_pp_wait_timed_out(piece(j % 2, cb), static_cast<uint32_t>((j / 2) & 1));
  };

  // S of this warpgroup's first tile.
  // o and a defined before the first wgmma is in flight (else the compiler sank o's zeroing past
  // it, and ptxas serialised every wgmma of the kernel: C7515).
  wgmma_hold_n(o);
  hold_a();
  if (wg < tiles) {
    wgmma_fence();
    issue_s.template operator()<0, wgmma::kMlaTileBlocks>(wg, true);
    wgmma_commit();
  }

  // Every wgmma of this warpgroup done; a timed-out wait (a protocol bug) fails the launch.
  auto retire_all = [&] {
    wgmma_wait<0>();
    wgmma_hold_n(s);
    wgmma_hold_n(o);
    hold_a();
    if (timed_out) __trap();
  };
  // One loop per warpgroup (as FlashMLA's two subroutines).
  if (wg == 0) {
    for (int i = 0; i < pairs; ++i) {
      const int t0 = 2 * i, t1 = 2 * i + 1;
      const bool has_b = t1 < tiles, next = t0 + 2 < tiles;
      const uint32_t use = static_cast<uint32_t>(i & 1);
      retire_all();  // this warpgroup's S of the pair (and all before it) done
      zero_tail(t0);
      float m_a[2], sum[2], alpha[2];
      softmax(t0, m_run, m_a, sum);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        alpha[r] = fast_exp2(m_run[r] - m_a[r]);  // 2^-inf = 0 on the first tile
        l_run[r] = l_run[r] * alpha[r] + sum[r];
        m_run[r] = m_a[r];
      }
      if (c == 0) {
        m_x[rows[0]] = m_a[0];
        m_x[rows[1]] = m_a[1];
      }
      mbarrier_arrive(m_full(0));
      rescale_o(alpha);
      pack_p();
      pv_rs(0);
      timed_out |= mla_pp_wait_timed_out(m_full(1), use);
      float beta[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m_b = m_x[64 + rows[r]];
        beta[r] = fast_exp2(m_a[r] - m_b);
        l_run[r] *= beta[r];
        m_run[r] = m_b;
      }
      store_p(0, beta);
      mbarrier_arrive(p_full(0));
      // P_a V0 done: this warpgroup's half of stage 0 gets tile t0 + 2. (Waited for after the P
      // store: waited for before it, ptxas serialised every wgmma of the kernel, C7515.)
      wgmma_wait<0>();
      wgmma_hold_n(o);
      hold_a();
      refill(0, i, t0 + 2);
      rescale_o(beta);
      if (has_b) {
        timed_out |= mla_pp_wait_timed_out(p_full(1), use);
        wait_v(t1);
        fence_proxy_async();
        pv_ss(1, 1);
      }
      if (next) {
        wgmma_fence();
        issue_s.template operator()<0, kWgmmaPairHalf>(t0 + 2, true);
        wgmma_commit();
        wgmma_wait<1>();  // P_b V1 done (S's first group in flight)
        wgmma_hold_n(o);
        refill(1, i, t1 + 2);
        wgmma_fence();
        issue_s.template operator()<kWgmmaPairHalf, wgmma::kMlaTileBlocks>(t0 + 2, false);
        wgmma_commit();
      }
    }
  } else {
    for (int i = 0; i < pairs; ++i) {
      const int t0 = 2 * i, t1 = 2 * i + 1;
      const bool has_b = t1 < tiles;
      const uint32_t use = static_cast<uint32_t>(i & 1);
      retire_all();  // this warpgroup's S of the pair (and all before it) done
      if (has_b) zero_tail(t1);
      timed_out |= mla_pp_wait_timed_out(m_full(0), use);
      float m_a[2], m_b[2], sum[2] = {0.0f, 0.0f}, gamma[2];
      m_a[0] = m_x[rows[0]];
      m_a[1] = m_x[rows[1]];
      if (has_b) {
        softmax(t1, m_a, m_b, sum);
      } else {
        m_b[0] = m_a[0];
        m_b[1] = m_a[1];
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        gamma[r] = fast_exp2(m_run[r] - m_b[r]);
        l_run[r] = l_run[r] * gamma[r] + sum[r];
        m_run[r] = m_b[r];
      }
      if (c == 0) {
        m_x[64 + rows[0]] = m_b[0];
        m_x[64 + rows[1]] = m_b[1];
      }
      mbarrier_arrive(m_full(1));
      rescale_o(gamma);
      if (has_b) {
        const float one[2] = {1.0f, 1.0f};
        store_p(1, one);
        mbarrier_arrive(p_full(1));
        pack_p();
        pv_rs(1);
      } else {
        mbarrier_arrive(p_full(1));
      }
      timed_out |= mla_pp_wait_timed_out(p_full(0), use);
      wait_v(t0);
      fence_proxy_async();
      pv_ss(0, 0);
      if (has_b) {
        wgmma_wait<1>();  // P_b V1 done (P_a V0 in flight)
        hold_a();
        refill(1, i, t1 + 2);
      }
      wgmma_wait<0>();
      wgmma_hold_n(o);
      hold_a();
      refill(0, i, t0 + 2);
      if (t1 + 2 < tiles) {
        wgmma_fence();
        issue_s.template operator()<kWgmmaPairHalf, wgmma::kMlaTileBlocks>(t1 + 2, true);
        issue_s.template operator()<0, kWgmmaPairHalf>(t1 + 2, false);
        wgmma_commit();
      }
    }
  }
  retire_all();
  mla_wgmma_store_split(p, o, m_run, l_run, l_x, rows, h0, work.item, splits, wg, c);
}

}  // namespace hymoe::gpu::kernels
