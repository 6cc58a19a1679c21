// The special codes of every FP8 matrix of a model (hymoe/kernels/fp8_special_codes.h), found
// once at startup on the CPU pool and attached to the weight views, so that the CPU GEMVs decode
// by shifts (5 instructions per 64 codes, no byte permute) and correct those few codes per row.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "hymoe/cpu/thread_pool.h"
#include "hymoe/kernels/fp8_special_codes.h"
#include "hymoe/model/model_weights.h"

namespace hymoe {

class Fp8SpecialIndex {
 public:
  // A matrix keeps the table decode (no codes attached) when its special codes are more than
  // this fraction of its codes: each costs a scalar correction.
  static constexpr double kMaxFraction = 1.0 / 256;

  // Scans every FP8 matrix of `weights` on the pool's workers and sets each one's
  // Fp8Matrix::specials (pointing into the returned index, which must outlive those views' use).
  static Fp8SpecialIndex attach(ModelWeights& weights, cpu::ThreadPool& pool);

  size_t matrices() const { return matrices_; }       // FP8 matrices scanned
  size_t attached() const { return codes_.size(); }   // of those, with codes attached
  size_t codes() const { return special_codes_; }     // special codes attached, in all
  size_t scanned_codes() const { return scanned_; }   // codes scanned, in all
  size_t bytes() const;                               // the index's memory (~4 bytes per row)

 private:
  std::vector<std::unique_ptr<Fp8SpecialCodes>> codes_;
  size_t matrices_ = 0, special_codes_ = 0, scanned_ = 0;
};

}  // namespace hymoe
