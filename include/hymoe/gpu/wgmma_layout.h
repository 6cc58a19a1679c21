// Addressing of Hopper's warpgroup MMA (wgmma, sm_90a) as used by the wgmma block-scaled FP8
// GEMM, in plain host/device functions so the CPU tests check them against the PTX ISA's layouts
// (tests/gpu/wgmma_layout_test.cpp) and the kernel (kernels/cuda/fp8_block_gemm_wgmma.cuh) runs
// the very same code.
//   Operand tiles in shared memory are K-major (A [rows][k], B [n][k]), one 128-byte row per row
//   (K = 128 FP8 codes = one scale block), in the 128-byte swizzle: atoms of 8 rows x 128 bytes
//   (1024 bytes, 1024-aligned), the 16-byte chunk c of row r stored at chunk c ^ (r % 8).
//   Matrix descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 start address >> 4,
//   16-29 leading byte offset >> 4 (unused for swizzled K-major operands; 1 by convention),
//   32-45 stride byte offset >> 4 (1024: from one 8-row group to the next), 49-51 base offset (0:
//   atoms are 1024-aligned), 62-63 swizzle mode (1 = 128-byte).
//   The k32 steps of one 128-byte row: start address + 32 bytes each; the hardware applies the
//   swizzle to the address bits (bits 4-6 ^= bits 7-9), which lands on the chunk the loader wrote.
//   Accumulator of m64nNk32 (FP32 D, N/2 registers per thread of the 128): thread t in warp w =
//   t / 32, lane l = t % 32; register i holds row 16w + l/4 (+8 when (i/2) is odd) and column
//   8*(i/4) + 2*(l%4) + (i%2).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HYMOE_WGMMA_HD __host__ __device__ __forceinline__
#else
#define HYMOE_WGMMA_HD inline
#endif

namespace hymoe::gpu::wgmma {

inline constexpr int kSw128RowBytes = 128;   // one K-major row of the swizzle atom
inline constexpr int kSw128AtomBytes = 1024; // 8 rows: the alignment atoms need

// Byte offset, from a 1024-aligned tile base, of byte kbyte (0..127) of row `row`.
HYMOE_WGMMA_HD uint32_t sw128_offset(int row, int kbyte) {
  const uint32_t chunk = static_cast<uint32_t>(kbyte >> 4) ^ static_cast<uint32_t>(row & 7);
  return static_cast<uint32_t>(row) * kSw128RowBytes + (chunk << 4) + static_cast<uint32_t>(kbyte & 15);
}

// A shared-memory matrix descriptor (byte quantities; the fields hold them >> 4).
HYMOE_WGMMA_HD uint64_t smem_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                  uint32_t swizzle_mode) {
  return static_cast<uint64_t>((smem_addr >> 4) & 0x3FFFu) |
         (static_cast<uint64_t>((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo_bytes >> 4) & 0x3FFFu) << 32) |
         (static_cast<uint64_t>(swizzle_mode & 3u) << 62);
}

// The descriptor of a K-major, 128-byte-swizzled operand starting at smem_addr (a 1024-aligned
// tile base plus 32 bytes per k32 step).
HYMOE_WGMMA_HD uint64_t sw128_kmajor_desc(uint32_t smem_addr) {
  return smem_desc(smem_addr, 16, kSw128AtomBytes, 1);
}

// sw128_kmajor_desc(smem_addr + bytes) from base = sw128_kmajor_desc(smem_addr) (and the same
// for mla_v_desc: only the start field moves): one add to the start field, valid while
// smem_addr + bytes stays below 2^18 (every shared address does) and bytes is a multiple of 16.
// The hot loops build one descriptor per ring and advance it, instead of masking and shifting
// each wgmma's address (~9 integer instructions per wgmma in the SASS).
HYMOE_WGMMA_HD uint64_t sw128_desc_advance(uint64_t base, uint32_t bytes) {
  return base + (bytes >> 4);
}

// Model of the hardware's side: the shared address wgmma reads for byte kbyte (0..31: one k32
// step of FP8) of operand row `row` (0..63 of A, 0..N-1 of B) of a K-major 128-byte-swizzled
// operand with descriptor desc. Rows step by 128 bytes inside an 8-row group and by the stride
// byte offset between groups; then the 128-byte swizzle XORs address bits 4-6 with bits 7-9.
HYMOE_WGMMA_HD uint32_t sw128_desc_address(uint64_t desc, int row, int kbyte) {
  const uint32_t start = static_cast<uint32_t>(desc & 0x3FFFu) << 4;
  const uint32_t sbo = static_cast<uint32_t>((desc >> 32) & 0x3FFFu) << 4;
  const uint32_t linear = start + static_cast<uint32_t>(row / 8) * sbo +
                          static_cast<uint32_t>(row % 8) * kSw128RowBytes + static_cast<uint32_t>(kbyte);
  return linear ^ (((linear >> 7) & 7u) << 4);
}

// Row (0..63) and column (0..N-1) of accumulator register i of thread t (0..127) of a warpgroup.
HYMOE_WGMMA_HD int acc_row(int t, int i) { return (t / 32) * 16 + (t % 32) / 4 + 8 * ((i / 2) % 2); }
HYMOE_WGMMA_HD int acc_col(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + (i % 2); }

// Launch order of a dense GEMM's output tiles (block id -> tile), grouped so that the blocks
// resident at once share B tiles: ids run over `group` row tiles x every column tile, column
// tile slowest inside a group. A wave then reads each B tile once per `group` row tiles instead
// of once per row tile (a 18432 x 7168 weight does not fit in the H200's 50 MB L2).
struct TileCoord {
  int m, n;
};
HYMOE_WGMMA_HD TileCoord raster_tile(int id, int tiles_m, int tiles_n, int group) {
  const int per_group = group * tiles_n;
  const int first_m = (id / per_group) * group;
  const int rows = tiles_m - first_m < group ? tiles_m - first_m : group;
  const int in_group = id % per_group;
  return {first_m + in_group % rows, in_group / rows};
}

// Output staging of kWgmmaWsTmaGroupedSt: a consumer warpgroup's 64 x 128 BF16 tile in 16 KB of
// shared memory, rows of 256 bytes, 16-byte chunk c of row r at chunk c ^ (r % 8). The fragment
// writes (a warp's 4-byte pairs of rows r..r+7, one chunk) then hit 32 distinct banks, and the
// 16-byte reads (8 threads: chunks 0..7 of one row) 8 distinct chunks of one 128-byte half.
inline constexpr int kOutStageRowBytes = 256;
inline constexpr int kOutStageBytes = 64 * kOutStageRowBytes;
HYMOE_WGMMA_HD uint32_t out_stage_offset(int row, int byte) {
  return static_cast<uint32_t>(row * kOutStageRowBytes +
                               (((byte / 16) ^ (row % 8)) * 16) + byte % 16);
}

// Output staging of the 128 x 192 tiles (kWgmmaWsTmaGroupedScMW): a consumer warpgroup's 64 x
// 192 tile in three passes of 64 x 64 BF16 (8 KB), rows of 128 bytes with the same chunk swizzle,
// so that each pass leaves as whole 128-byte row segments.
inline constexpr int kOutPassRowBytes = 128;
inline constexpr int kOutPassBytes = 64 * kOutPassRowBytes;
HYMOE_WGMMA_HD uint32_t out_pass_offset(int row, int byte) {
  return static_cast<uint32_t>(row * kOutPassRowBytes +
                               (((byte / 16) ^ (row % 8)) * 16) + byte % 16);
}

// --- The warp-specialised kernel (fp8_block_gemm_wgmma_ws.cuh) ---
// Ring of `stages` shared-memory slots between the producer warpgroup and the consumers, each
// slot with two mbarriers: full (the producer's copies landed) and empty (every consumer warp is
// done reading it). Both sides walk the slots in the same order, one K block per slot, across all
// the tiles a block runs (the ring does not drain between tiles). `phase` counts the passes over
// the ring modulo 2. An mbarrier's phase P completes when its pending count reaches 0;
// mbarrier.try_wait.parity q returns true once the phase of parity q completed, which for a
// barrier in phase P means q != P % 2 (q == P % 2 names the current, incomplete phase).
//   consumer: waits full[stage] with parity `phase` (pass 0 waits for the first fill);
//   producer: waits empty[stage] with parity `phase ^ 1` (pass 0 finds every slot free: parity 1
//   names the phase before the first, complete by definition).
struct RingPos {
  int stage;
  uint32_t phase;
};
HYMOE_WGMMA_HD RingPos ring_next(RingPos r, int stages) {
  return r.stage + 1 == stages ? RingPos{0, r.phase ^ 1u} : RingPos{r.stage + 1, r.phase};
}
HYMOE_WGMMA_HD uint32_t full_wait_parity(RingPos r) { return r.phase; }
HYMOE_WGMMA_HD uint32_t empty_wait_parity(RingPos r) { return r.phase ^ 1u; }

// Persistent grouped GEMM: row tile `y` (over all experts, each expert's rows in ceil(rows /
// tile_m) tiles, experts in order) -> expert and the first row tile of that expert. Each thread
// keeps a cursor and calls this with increasing y (a block's tiles come in increasing order), so
// the scan over the experts runs once per block, not once per tile. offsets: [experts + 1].
struct GroupedCursor {
  int expert = 0;      // the expert holding row tile `first`..
  int first = 0;       // its first row tile
};
// The row tiles of expert e (ceil(rows / tile_m)); offsets: [experts + 1].
HYMOE_WGMMA_HD int grouped_tiles(const int32_t* offsets, int e, int tile_m) {
  return (offsets[e + 1] - offsets[e] + tile_m - 1) / tile_m;
}
HYMOE_WGMMA_HD void grouped_advance(GroupedCursor& c, int y, const int32_t* offsets, int experts,
                                    int tile_m) {
  while (c.expert < experts) {
    const int tiles = grouped_tiles(offsets, c.expert, tile_m);
    if (y < c.first + tiles) return;
    c.first += tiles;
    ++c.expert;
  }
}

// --- MLA decode on wgmma (kernels/cuda/mla_decode_wgmma.cuh) ---
// A [64 rows][576 BF16] tile (64 heads of q, or 64 cache tokens) in shared memory: nine
// column blocks of 64 BF16 (128 bytes), each block [64 rows][128 bytes] in the 128-byte swizzle,
// 8 KB per block. Scores S = Q K^T read both tiles K-major (k16 step k: block k / 4, +32 bytes
// per step inside the block, as the FP8 GEMM's k32 steps); P V reads the same cache tile as an
// MN-major ("transposed") B operand: N = the 512 latent columns (64 per block, consecutive
// blocks kMlaBlockBytes apart: the leading byte offset), K = tokens (8-row groups 1024 bytes
// apart: the stride byte offset).
inline constexpr int kMlaTileRows = 64;
inline constexpr int kMlaBlockCols = 64;                          // BF16 per 128-byte row
inline constexpr int kMlaBlockBytes = kMlaTileRows * kSw128RowBytes;  // 8192
inline constexpr int kMlaTileBlocks = 9;                          // 576 / 64
inline constexpr int kMlaTileBytes = kMlaTileBlocks * kMlaBlockBytes;  // 73728

// Byte offset in a 1024-aligned tile of BF16 element `col` (0..575) of row `row` (0..63).
HYMOE_WGMMA_HD uint32_t mla_tile_offset(int row, int col) {
  return static_cast<uint32_t>((col / kMlaBlockCols) * kMlaBlockBytes) +
         sw128_offset(row, (col % kMlaBlockCols) * 2);
}

// Descriptor of the MN-major, 128-byte-swizzled B operand of P V at smem_addr (a tile base +
// the first column block * kMlaBlockBytes + 16 tokens * 128 bytes per k16 step).
HYMOE_WGMMA_HD uint64_t mla_v_desc(uint32_t smem_addr) {
  return smem_desc(smem_addr, kMlaBlockBytes, kSw128AtomBytes, 1);
}

// kWgmmaPingPong (kernels/cuda/mla_decode_wgmma_pp.cuh): tile j belongs to warpgroup j % 2 and
// its stage; the waits on tile j's full and P barriers (the (j / 2)-th phase of the owner's
// barriers) use parity mla_pp_tile_parity(j); before loading tile j + 1 at its step j (j >= 1)
// the loader waits for the other warpgroup's release of tile j - 1 (the ((j - 1) / 2)-th phase of
// its empty barrier): parity mla_pp_tile_parity(j - 1). tests/gpu/mla_pingpong_protocol_test.cpp
// runs the protocol on a CPU model of mbarriers.
HYMOE_WGMMA_HD uint32_t mla_pp_tile_parity(int j) { return static_cast<uint32_t>((j / 2) & 1); }

// Model of the hardware's side of an MN-major 128-byte-swizzled 16-bit operand (the PTX ISA's
// canonical layout ((8 x 16 bytes, m), (8 rows, k)) : ((16 bytes, LBO), (128 bytes, SBO))):
// the shared address read for element (k, n) (k: 0..15 of a k16 step, n: 0..N-1).
HYMOE_WGMMA_HD uint32_t sw128_mn_desc_address(uint64_t desc, int k, int n) {
  const uint32_t start = static_cast<uint32_t>(desc & 0x3FFFu) << 4;
  const uint32_t lbo = static_cast<uint32_t>((desc >> 16) & 0x3FFFu) << 4;
  const uint32_t sbo = static_cast<uint32_t>((desc >> 32) & 0x3FFFu) << 4;
  const uint32_t linear = start + static_cast<uint32_t>(n / 64) * lbo +
                          static_cast<uint32_t>(k / 8) * sbo +
                          static_cast<uint32_t>(k % 8) * kSw128RowBytes +
                          static_cast<uint32_t>(n % 64) * 2;
  return linear ^ (((linear >> 7) & 7u) << 4);
}

// Expert-major order of the same tiles (kWgmmaWsTmaGroupedX / ScX): the ids of expert e are
// first_e * tiles_n .. (first_e + R_e) * tiles_n - 1 (R_e its row tiles), column tile slowest:
// the R_e row tiles of one column tile (one weight tile) get consecutive ids, so a persistent
// grid runs them at the same time on neighbouring blocks and the weight tile is read from DRAM
// once, then from L2. Each thread calls this with increasing ids (the cursor only moves
// forward); expert == experts when id is past the last tile.
struct GroupedTile {
  int expert;  // experts: none
  int m_tile;  // row tile inside the expert (rows m_tile * tile_m..)
  int n_tile;  // column tile
};
HYMOE_WGMMA_HD GroupedTile grouped_expert_major(GroupedCursor& c, int id, const int32_t* offsets,
                                                int experts, int tile_m, int tiles_n) {
  while (c.expert < experts) {
    const int tiles = grouped_tiles(offsets, c.expert, tile_m);
    const int local = id - c.first * tiles_n;  // (>= 0: ids increase)
    if (local < tiles * tiles_n) return {c.expert, local % tiles, local / tiles};
    c.first += tiles;
    ++c.expert;
  }
  return {experts, 0, 0};
}

// The paired tiles of the A-multicast kernels (kWgmmaWsTmaGroupedScCM / ScMW: clusters of two
// CTAs): the row_tiles x tiles_n tiles in row-major order (tile f: row tile f / tiles_n, column
// tile f % tiles_n) go out in pairs, pair i = tiles 2i (rank 0) and 2i + 1 (rank 1), so
// pair_count = ceil(tiles / 2). The pair shares its row tile (multicast) unless an odd tiles_n
// puts its tiles on two row tiles. An odd tile count gives rank 1 of the last pair column tile
// tiles_n (past n) of rank 0's row tile: it multicasts its half of A for rank 0.
struct PairTile {
  int y;           // row tile
  int x;           // column tile (tiles_n: past n)
  bool multicast;  // both tiles of the pair on row tile y
};
HYMOE_WGMMA_HD int pair_count(int row_tiles, int tiles_n) { return (row_tiles * tiles_n + 1) / 2; }
HYMOE_WGMMA_HD PairTile pair_tile(int pair, int rank, int row_tiles, int tiles_n) {
  const int f0 = 2 * pair, y0 = f0 / tiles_n;
  const bool last = f0 + 1 == row_tiles * tiles_n;
  const int y1 = last ? y0 : (f0 + 1) / tiles_n;
  if (rank == 0) return {y0, f0 % tiles_n, y1 == y0};
  return {y1, last ? tiles_n : (f0 + 1) % tiles_n, y1 == y0};
}

// --- kWgmmaTmaGroupedTx (fp8_grouped_gemm_tx.cuh: clusters of two CTAs sharing B) ---
// Pair (pair_row, x): column tile x of row tiles 2 pair_row (rank 0) and 2 pair_row + 1 (rank 1)
// of all experts' 128-row tiles; with an odd row_tiles the last pair row's rank 1 has no tile
// of its own (tx_pair's caller checks y < row_tiles). Pair ids go out in groups of kTxPairGroup
// pair rows (8 row tiles), the pair row fastest inside a group: the clusters resident at once
// then share a group's A rows across all column tiles and read each weight tile about once per
// group, not once per resident row tile (DeepGEMM's L2 order for B multicast).
inline constexpr int kTxPairGroup = 4;
struct TxPair {
  int pair_row;
  int x;
};
HYMOE_WGMMA_HD int tx_pair_count(int row_tiles, int tiles_n) { return (row_tiles + 1) / 2 * tiles_n; }
HYMOE_WGMMA_HD TxPair tx_pair(int id, int row_tiles, int tiles_n) {
  const int pair_rows = (row_tiles + 1) / 2, per_group = kTxPairGroup * tiles_n;
  const int g = id / per_group, first = g * kTxPairGroup;
  const int rows = pair_rows - first < kTxPairGroup ? pair_rows - first : kTxPairGroup;
  const int in = id - g * per_group;
  return {first + in % rows, in / rows};
}

// grouped_advance for any order of y (tx_pair's row tiles go back and forth inside a group): the
// cursor steps back or forward over the experts to the one holding row tile y < all row tiles.
HYMOE_WGMMA_HD void grouped_seek(GroupedCursor& c, int y, const int32_t* offsets, int experts,
                                 int tile_m) {
  while (y < c.first) {
    --c.expert;
    c.first -= grouped_tiles(offsets, c.expert, tile_m);
  }
  grouped_advance(c, y, offsets, experts, tile_m);
}

}  // namespace hymoe::gpu::wgmma
