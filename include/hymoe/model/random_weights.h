// Random model weights with the statistics of a trained checkpoint where it matters for
// numerics (activations stay O(1)): what hymoe-make-model writes and WeightStore::dummy holds.
// Deterministic per (seed, tensor name), whatever the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "hymoe/model/checkpoint_layout.h"

namespace hymoe {

// Destination of one layout tensor: `data` is spec.nbytes() writable bytes.
struct FillTarget {
  const LayoutTensor* tensor = nullptr;
  std::span<std::byte> data;
};

// Fills every target. Values:
//  - kFp8Weight: N(0, 1/in) quantised per 128x128 block to E4M3 with scale = max|w|/448 (the
//    full E4M3 range is used); its kFp8Scale (the target named "<weight>_scale_inv", which must
//    be among `targets`) receives the scales (weight_scale_inv holds the dequantisation factor).
//  - kEmbedding: N(0, 1); kLmHead and kRouter: N(0, 1/hidden); kNorm: 1 + N(0, 0.05^2);
//    kRouterBias: N(0, 0.02^2).
// Throws hymoe::Error (kInvalidArgument) for a weight without its scale target.
void fill_random_weights(std::span<const FillTarget> targets, uint64_t seed, int threads);

// Round-to-nearest-even float -> E4M3FN for |x| in the finite range (saturates at +-448 above
// it; NaN is not expected). Bit-exact with float_to_fp8_e4m3, several times faster.
uint8_t encode_e4m3_fast(float x);

}  // namespace hymoe
