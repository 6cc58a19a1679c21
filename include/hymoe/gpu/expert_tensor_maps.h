// Host-side bookkeeping of the grouped expert GEMM's per-expert TMA tensor maps
// (GemmBackend::kWgmmaWsTmaGrouped): slot e of a device array of 128-byte maps (128-byte aligned:
// cuda.h's alignment, above PTX's 64 bytes for a tensor map in global memory)
// describes expert e's weight [n][k]. A slot is (re)encoded only when its expert has rows in this
// launch and its weight pointer differs from the one the slot was encoded for; slots of experts
// without rows keep whatever they held (the kernel never reads them: grouped_advance skips
// experts with no row tiles). Pure host logic (no CUDA call), tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace hymoe::gpu {

// The bytes of one CUtensorMap (cuda.h's type: 128 bytes, 128-byte aligned; the launcher checks
// the match with a static_assert).
struct alignas(128) TensorMapBytes {
  uint8_t bytes[128];
};
inline constexpr size_t kTensorMapBytes = sizeof(TensorMapBytes);

class ExpertTensorMapTable {
 public:
  // The experts whose slot must be encoded before the next launch: rows > 0 (offsets[e + 1] >
  // offsets[e]) and weights[e] not the pointer the slot holds. Marks them as holding weights[e]
  // (the caller encodes them before the launch, or calls invalidate() if encoding fails).
  // offsets: [experts + 1]; weight(e): expert e's weight pointer, e < experts. The returned span
  // is valid until the next call.
  template <class WeightOf>
  std::span<const int> stale(std::span<const int32_t> offsets, size_t experts, WeightOf weight) {
    if (encoded_.size() != experts) encoded_.assign(experts, nullptr);
    stale_.clear();
    for (size_t e = 0; e < experts; ++e) {
      const void* w = weight(e);
      if (offsets[e + 1] <= offsets[e] || encoded_[e] == w) continue;
      encoded_[e] = w;
      stale_.push_back(static_cast<int>(e));
    }
    return stale_;
  }
  // Forgets every slot (after a failed encode: the next call re-encodes all experts with rows).
  void invalidate() { encoded_.assign(encoded_.size(), nullptr); }
  // Byte offset of expert e's map in the table (the table: cudaMalloc's 256-byte alignment).
  static constexpr size_t slot_offset(int e) { return static_cast<size_t>(e) * kTensorMapBytes; }

 private:
  std::vector<const void*> encoded_;  // the weight each slot was encoded for (nullptr: none)
  std::vector<int> stale_;
};

}  // namespace hymoe::gpu
