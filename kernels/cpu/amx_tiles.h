// Internal, for TUs compiled with AMX-TILE: the tile configuration and its scope.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hymoe::kernels::detail {

// The 64-byte operand of ldtilecfg (palette 1): per tile its rows and bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  void set(int tile, int rows_, int bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(rows_);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
  }
};
static_assert(sizeof(TileConfig) == 64);

// Loads a tile configuration on construction and releases the tile state on destruction.
// Not _tile_loadconfig: GCC 12's tells the compiler that ldtilecfg reads 8 bytes of the
// configuration, so the stores of the tile shapes could be (and were) dropped as dead, and every
// tile instruction then faulted. The whole 64 bytes are this asm's operand.
class TileScope {
 public:
  explicit TileScope(const TileConfig& cfg) { asm volatile("ldtilecfg %0" ::"m"(cfg)); }
  ~TileScope() { _tile_release(); }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};

}  // namespace hymoe::kernels::detail
