// The wgmma kernel's shared-memory addressing and accumulator layout (wgmma_layout.h), checked
// on the CPU against the layouts of the PTX ISA: the 128-byte swizzle, the matrix descriptor's
// bit fields, the address the hardware derives from a descriptor for each operand element of
// each k32 step, and the m64nNk32 FP32 accumulator fragment; MLA decode's [64][576] BF16 tile and
// its K-major and MN-major descriptors. Host-only (GpuHost.*: run anywhere).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "hymoe/gpu/wgmma_layout.h"

namespace hymoe::gpu::wgmma {
namespace {

// Where the PTX ISA's 128-byte swizzle puts byte k of row r of an atom-aligned K-major tile,
// written from its definition: 16-byte chunk index XOR (row mod 8), rows 128 bytes apart.
uint32_t ptx_sw128(int r, int k) { return r * 128 + (((k / 16) ^ (r % 8)) * 16) + k % 16; }

TEST(GpuHost, WgmmaSwizzleMatchesPtxAndIsABijection) {
  std::vector<int> hits(128 * 128, 0);
  for (int r = 0; r < 128; ++r)
    for (int k = 0; k < 128; ++k) {
      ASSERT_EQ(sw128_offset(r, k), ptx_sw128(r, k)) << r << "," << k;
      ++hits[sw128_offset(r, k)];
    }
  for (int h : hits) ASSERT_EQ(h, 1);
  // A 16-byte chunk stays contiguous (one cp.async each), and rows stay inside their 128 bytes.
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      const uint32_t base = sw128_offset(r, c * 16);
      EXPECT_EQ(base % 16, 0u);
      EXPECT_EQ(base / 128, uint32_t(r));
      for (int b = 1; b < 16; ++b) EXPECT_EQ(sw128_offset(r, c * 16 + b), base + b);
    }
  // Spot values: row 0 is unswizzled, row 1 swaps chunk pairs, row 7 reverses the chunks.
  EXPECT_EQ(sw128_offset(0, 48), 48u);
  EXPECT_EQ(sw128_offset(1, 0), 128u + 16u);
  EXPECT_EQ(sw128_offset(1, 16), 128u);
  EXPECT_EQ(sw128_offset(7, 0), 7u * 128u + 112u);
  EXPECT_EQ(sw128_offset(9, 5), 9u * 128u + 16u + 5u);
}

TEST(GpuHost, WgmmaDescriptorBitFields) {
  // Start address 0x400 (>> 4 = 0x40, bits 0-13), LBO 16 (1, bits 16-29), SBO 1024 (64, bits
  // 32-45), base offset 0 (bits 49-51), 128-byte swizzle = 1 (bits 62-63).
  EXPECT_EQ(sw128_kmajor_desc(0x400), 0x4000004000010040ull);
  EXPECT_EQ(smem_desc(0x3FFF0, 0x3FFF0, 0x3FFF0, 3),
            0x3FFFull | (0x3FFFull << 16) | (0x3FFFull << 32) | (3ull << 62));
  // Addresses above the 18 bits the field holds do not leak into the next field.
  EXPECT_EQ(smem_desc(0x40000 + 0x20, 0, 0, 0), 0x2ull);
  // A k32 step (32 bytes) moves the start field by 2 and nothing else.
  EXPECT_EQ(sw128_kmajor_desc(0x2000 + 32) - sw128_kmajor_desc(0x2000), 2ull);
  // Advancing a ring base's descriptor equals building the descriptor of the advanced address,
  // over every 16-byte offset of a ring that ends at the top of shared memory.
  for (const uint32_t base : {0x400u, 0x1400u, 0x3000u})
    for (uint32_t off = 0; base + off < 228u * 1024u; off += 16)
      ASSERT_EQ(sw128_desc_advance(sw128_kmajor_desc(base), off), sw128_kmajor_desc(base + off))
          << "base " << base << " offset " << off;
  // The same for the MLA kernels' V operand (its own LBO): a stage's V columns advanced by k16
  // steps of 16 token rows, over stages up to the top of shared memory.
  for (const uint32_t v0 : {0x12000u, 0x1e000u, 0x2a000u})
    for (uint32_t off = 0; v0 + off < 228u * 1024u; off += 16)
      ASSERT_EQ(sw128_desc_advance(mla_v_desc(v0), off), mla_v_desc(v0 + off))
          << "V base " << v0 << " offset " << off;
}

// Every element of each k32 step of an operand, read through the descriptor the kernel builds
// (tile base + 32 bytes per step), is the byte the loader placed there (sw128_offset), for A
// (64 rows from a warpgroup's 8 KB offset) and B (128 rows), at 1024-aligned stage addresses.
TEST(GpuHost, WgmmaDescriptorAddressesTheLoadedBytes) {
  for (const uint32_t stage : {0x0u, 0x8000u, 0x18400u}) {
    ASSERT_EQ(stage % kSw128AtomBytes, 0u);
    for (const auto& [first_row, rows] : {std::pair{0, 64}, std::pair{64, 64}, std::pair{0, 128}}) {
      const uint32_t tile = stage + first_row * kSw128RowBytes;
      std::set<uint32_t> seen;
      for (int step = 0; step < 4; ++step) {
        const uint64_t desc = sw128_kmajor_desc(tile + 32 * step);
        for (int r = 0; r < rows; ++r)
          for (int kb = 0; kb < 32; ++kb) {
            const uint32_t hw = sw128_desc_address(desc, r, kb);
            ASSERT_EQ(hw, stage + sw128_offset(first_row + r, 32 * step + kb))
                << "stage " << stage << " row " << first_row + r << " step " << step << " k " << kb;
            seen.insert(hw);
          }
      }
      EXPECT_EQ(seen.size(), size_t(rows) * 128);  // the four steps cover the rows exactly once
    }
  }
}

TEST(GpuHost, WgmmaAccumulatorFragmentMatchesPtx) {
  // PTX ISA, "Matrix fragments for wgmma .m64nNk32" D (FP32): warp w of the warpgroup owns rows
  // 16w..16w+15; lane l holds rows l/4 and l/4 + 8, columns 2(l%4) + {0, 1} of each 8-column
  // group; registers {d0, d1} row l/4, {d2, d3} row l/4 + 8, then the next 8 columns.
  EXPECT_EQ(acc_row(0, 0), 0);  EXPECT_EQ(acc_col(0, 0), 0);
  EXPECT_EQ(acc_row(0, 1), 0);  EXPECT_EQ(acc_col(0, 1), 1);
  EXPECT_EQ(acc_row(0, 2), 8);  EXPECT_EQ(acc_col(0, 2), 0);
  EXPECT_EQ(acc_row(0, 3), 8);  EXPECT_EQ(acc_col(0, 3), 1);
  EXPECT_EQ(acc_row(0, 4), 0);  EXPECT_EQ(acc_col(0, 4), 8);
  EXPECT_EQ(acc_row(1, 0), 0);  EXPECT_EQ(acc_col(1, 0), 2);
  EXPECT_EQ(acc_row(3, 1), 0);  EXPECT_EQ(acc_col(3, 1), 7);
  EXPECT_EQ(acc_row(4, 0), 1);  EXPECT_EQ(acc_col(4, 0), 0);
  EXPECT_EQ(acc_row(31, 63), 15);  EXPECT_EQ(acc_col(31, 63), 127);
  EXPECT_EQ(acc_row(32, 0), 16);
  EXPECT_EQ(acc_row(127, 2), 63);  EXPECT_EQ(acc_col(127, 62), 126);
  // A bijection of 128 threads x 64 registers onto the 64 x 128 tile.
  std::vector<int> hits(64 * 128, 0);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < 64; ++i) {
      const int r = acc_row(t, i), c = acc_col(t, i);
      ASSERT_TRUE(r >= 0 && r < 64 && c >= 0 && c < 128) << t << "," << i;
      ++hits[r * 128 + c];
      // The kernel's pairing: registers i and i + 1 (i even) are adjacent columns of one row,
      // and a thread's rows are only acc_row(t, 0) and acc_row(t, 2).
      if (i % 2 == 0) {
        EXPECT_EQ(acc_row(t, i + 1), r);
        EXPECT_EQ(acc_col(t, i + 1), c + 1);
      }
      EXPECT_EQ(r, (i / 2) % 2 ? acc_row(t, 2) : acc_row(t, 0));
    }
  for (int h : hits) ASSERT_EQ(h, 1);
}

// kWgmmaWsTmaGroupedSt's output staging: a bijection of the 16 KB tile; each fragment store
// (register pair i of a warp's 32 threads) hits 32 distinct banks; each 16-byte read of 8
// threads (chunks 0..7 of a row) 8 distinct 16-byte bank groups.
TEST(GpuHost, WgmmaOutputStagingIsABijectionWithoutBankConflicts) {
  std::vector<int> hits(kOutStageBytes, 0);
  for (int r = 0; r < 64; ++r)
    for (int b = 0; b < kOutStageRowBytes; ++b) {
      const uint32_t o = out_stage_offset(r, b);
      ASSERT_LT(o, uint32_t(kOutStageBytes));
      ASSERT_EQ(o / kOutStageRowBytes, uint32_t(r)) << "stays in its row";
      ++hits[o];
    }
  for (int h : hits) ASSERT_EQ(h, 1);
  for (int warp = 0; warp < 4; ++warp)
    for (int i = 0; i < 64; i += 2) {
      std::set<uint32_t> banks;
      for (int lane = 0; lane < 32; ++lane) {
        const int t = warp * 32 + lane;
        const uint32_t o = out_stage_offset(acc_row(t, i), 2 * acc_col(t, i));
        EXPECT_EQ(o % 4, 0u);
        banks.insert((o / 4) % 32);
      }
      EXPECT_EQ(banks.size(), 32u) << "warp " << warp << " pair " << i;
    }
  for (int t0 = 0; t0 < 128; t0 += 8) {  // the reader: thread t, chunk t % 16 of row t / 16 + 8j
    std::set<uint32_t> groups;
    for (int t = t0; t < t0 + 8; ++t) {
      const uint32_t o = out_stage_offset(t / 16 + 8 * 3, (t % 16) * 16);
      EXPECT_EQ(o % 16, 0u);
      groups.insert((o / 16) % 8);
    }
    EXPECT_EQ(groups.size(), 8u);
  }
}

// The 128 x 192 tiles' staging (ws_store_wide_smem): each 64-column pass of a consumer's 64 x 192
// fragment (registers 32 pass .. 32 pass + 31) lands once in the 8 KB, a warp's 4-byte pair
// writes hit 32 distinct banks, and the readers (thread t: chunk t % 8 of row t / 8 + 16 j) take
// a whole 128-byte row per 8 threads, its 8 chunks in 8 distinct 16-byte bank groups.
TEST(GpuHost, WgmmaWideOutputPassIsABijectionWithoutBankConflicts) {
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<int> hits(kOutPassBytes, 0);
    for (int t = 0; t < 128; ++t)
      for (int i = 32 * pass; i < 32 * pass + 32; i += 2) {
        const int col = acc_col(t, i) - 64 * pass;
        ASSERT_TRUE(col >= 0 && col + 1 < 64) << "pass " << pass << " register " << i;
        const uint32_t o = out_pass_offset(acc_row(t, i), 2 * col);
        ASSERT_LT(o + 3, uint32_t(kOutPassBytes));
        for (uint32_t b = o; b < o + 4; ++b) ++hits[b];
      }
    for (int h : hits) ASSERT_EQ(h, 1) << "pass " << pass;
    for (int warp = 0; warp < 4; ++warp)
      for (int i = 32 * pass; i < 32 * pass + 32; i += 2) {
        std::set<uint32_t> banks;
        for (int lane = 0; lane < 32; ++lane) {
          const int t = warp * 32 + lane;
          banks.insert((out_pass_offset(acc_row(t, i), 2 * (acc_col(t, i) - 64 * pass)) / 4) % 32);
        }
        EXPECT_EQ(banks.size(), 32u) << "pass " << pass << " warp " << warp << " pair " << i;
      }
  }
  for (int j = 0; j < 4; ++j)
    for (int t0 = 0; t0 < 128; t0 += 8) {
      std::set<uint32_t> groups;
      for (int t = t0; t < t0 + 8; ++t) {
        const uint32_t o = out_pass_offset(t / 8 + 16 * j, (t % 8) * 16);
        EXPECT_EQ(o % 16, 0u);
        EXPECT_EQ(o / kOutPassRowBytes, uint32_t(t / 8 + 16 * j)) << "stays in its row";
        groups.insert((o / 16) % 8);
      }
      EXPECT_EQ(groups.size(), 8u);
    }
}

TEST(GpuHost, WgmmaRasterCoversEveryTileOnce) {
  for (const auto& [tm, tn] : {std::pair{1, 1}, std::pair{128, 144}, std::pair{13, 5},
                               std::pair{7, 3}, std::pair{33, 56}, std::pair{1, 40}}) {
    std::vector<int> hits(size_t(tm) * tn, 0);
    for (int id = 0; id < tm * tn; ++id) {
      const TileCoord c = raster_tile(id, tm, tn, 8);
      ASSERT_TRUE(c.m >= 0 && c.m < tm && c.n >= 0 && c.n < tn) << tm << "x" << tn << " id " << id;
      ++hits[size_t(c.m) * tn + c.n];
    }
    for (int h : hits) ASSERT_EQ(h, 1) << tm << "x" << tn;
  }
  // Inside a full group, consecutive ids walk the group's 8 row tiles of one column tile.
  EXPECT_EQ(raster_tile(0, 128, 144, 8).m, 0);
  EXPECT_EQ(raster_tile(7, 128, 144, 8).m, 7);
  EXPECT_EQ(raster_tile(7, 128, 144, 8).n, 0);
  EXPECT_EQ(raster_tile(8, 128, 144, 8).m, 0);
  EXPECT_EQ(raster_tile(8, 128, 144, 8).n, 1);
  EXPECT_EQ(raster_tile(8 * 144, 128, 144, 8).m, 8);
}

// kWgmmaTmaGroupedTx's cluster pairs: every (pair row, column tile) once; inside a full group consecutive
// ids walk its kTxPairGroup pair rows of one column tile; grouped_seek lands on the expert that
// holds the row tile whatever order the row tiles come in.
TEST(GpuHost, TxPairsCoverEveryTileOnceAndSeekFindsTheExpert) {
  for (const auto& [row_tiles, tiles_n] : {std::pair{1, 1}, std::pair{2, 16}, std::pair{7, 3},
                                           std::pair{9, 56}, std::pair{20, 11}, std::pair{33, 1}}) {
    const int pair_rows = (row_tiles + 1) / 2;
    std::vector<int> hits(size_t(pair_rows) * tiles_n, 0);
    for (int id = 0; id < tx_pair_count(row_tiles, tiles_n); ++id) {
      const TxPair p = tx_pair(id, row_tiles, tiles_n);
      ASSERT_TRUE(p.pair_row >= 0 && p.pair_row < pair_rows && p.x >= 0 && p.x < tiles_n)
          << row_tiles << "x" << tiles_n << " id " << id;
      ++hits[size_t(p.pair_row) * tiles_n + p.x];
    }
    for (int h : hits) ASSERT_EQ(h, 1) << row_tiles << "x" << tiles_n;
  }
  EXPECT_EQ(tx_pair(3, 40, 16).pair_row, 3);
  EXPECT_EQ(tx_pair(3, 40, 16).x, 0);
  EXPECT_EQ(tx_pair(4, 40, 16).pair_row, 0);
  EXPECT_EQ(tx_pair(4, 40, 16).x, 1);
  EXPECT_EQ(tx_pair(kTxPairGroup * 16, 40, 16).pair_row, kTxPairGroup);

  // Experts of 0, 300, 0, 0, 128, 1, 0, 700 rows: 128-row tiles 3, 1, 1, 6 (11 in all).
  const std::vector<int> rows = {0, 300, 0, 0, 128, 1, 0, 700};
  std::vector<int32_t> offsets(1, 0);
  std::vector<int> owner;  // the expert of each row tile
  for (size_t e = 0; e < rows.size(); ++e) {
    offsets.push_back(offsets.back() + rows[e]);
    for (int t = 0; t < (rows[e] + 127) / 128; ++t) owner.push_back(int(e));
  }
  const int experts = int(rows.size());
  GroupedCursor c;
  for (const int y : {0, 10, 3, 2, 4, 5, 9, 1, 0, 8, 6, 7, 10, 0}) {
    grouped_seek(c, y, offsets.data(), experts, 128);
    ASSERT_EQ(c.expert, owner[size_t(y)]) << "row tile " << y;
    EXPECT_LE(c.first, y);
    EXPECT_LT(y, c.first + grouped_tiles(offsets.data(), c.expert, 128));
  }
}

// MLA decode's [64][576] BF16 tile: every element has its own 2 bytes inside the 72 KB tile and
// each 16-byte chunk (8 columns, one cp.async) stays contiguous.
TEST(GpuHost, WgmmaMlaTileIsABijection) {
  std::vector<int> hits(kMlaTileBytes / 2, 0);
  for (int r = 0; r < kMlaTileRows; ++r)
    for (int col = 0; col < 576; ++col) {
      const uint32_t o = mla_tile_offset(r, col);
      ASSERT_LT(o, uint32_t(kMlaTileBytes));
      ASSERT_EQ(o % 2, 0u);
      ++hits[o / 2];
      if (col % 8 == 0) ASSERT_EQ(o % 16, 0u) << r << "," << col;
      else ASSERT_EQ(o, mla_tile_offset(r, col - 1) + 2) << r << "," << col;
    }
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_EQ(mla_tile_offset(0, 64), uint32_t(kMlaBlockBytes));  // column block 1
  EXPECT_EQ(mla_tile_offset(1, 0), 128u + 16u);                 // row 1: swizzled chunk
}

// The descriptors the kernel builds read, through the hardware's addressing (the models above),
// exactly the elements the loader wrote: S = Q K^T (K-major, k16 step k: 16 columns) and
// O += P V (MN-major: element (token 16 kk + k, column 256 wg + n) of the same cache tile).
TEST(GpuHost, WgmmaMlaDescriptorsAddressTheLoadedElements) {
  const uint32_t base = 5 * 1024;  // a 1024-aligned tile base
  for (int k = 0; k < 576 / 16; ++k) {
    const uint32_t off = (k / 4) * kMlaBlockBytes + (k % 4) * 32;
    const uint64_t desc = sw128_kmajor_desc(base + off);
    for (int row = 0; row < 64; ++row)
      for (int kbyte = 0; kbyte < 32; ++kbyte)
        ASSERT_EQ(sw128_desc_address(desc, row, kbyte),
                  base + mla_tile_offset(row, 16 * k + kbyte / 2) + kbyte % 2)
            << "k " << k << " row " << row << " byte " << kbyte;
  }
  for (int wg = 0; wg < 2; ++wg)
    for (int kk = 0; kk < 4; ++kk) {
      const uint64_t desc = mla_v_desc(base + 4 * wg * kMlaBlockBytes + kk * 16 * kSw128RowBytes);
      EXPECT_EQ((desc >> 16) & 0x3FFFu, uint64_t(kMlaBlockBytes / 16));  // leading byte offset
      EXPECT_EQ((desc >> 32) & 0x3FFFu, 1024u / 16);                     // stride byte offset
      EXPECT_EQ(desc >> 62, 1u);                                         // 128-byte swizzle
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 256; ++n)
          ASSERT_EQ(sw128_mn_desc_address(desc, k, n),
                    base + mla_tile_offset(16 * kk + k, 256 * wg + n))
              << "wg " << wg << " kk " << kk << " k " << k << " n " << n;
    }
}

}  // namespace
}  // namespace hymoe::gpu::wgmma
