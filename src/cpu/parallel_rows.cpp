#include "hymoe/cpu/parallel_rows.h"

#include <algorithm>

#include "hymoe/common/error.h"

namespace hymoe::cpu {

RowSplit::RowSplit(int64_t n, int64_t align, int workers, RowSplitShape shape)
    : n_(n),
      align_(align),
      units_(align > 0 ? (n + align - 1) / align : 0),
      workers_(workers),
      shape_(shape) {
  HYMOE_CHECK(n >= 0 && align > 0 && workers > 0, kInvalidArgument,
              "row split: {} rows in units of {} over {} workers", n, align, workers);
  HYMOE_CHECK(shape.head_quarters >= 0 && shape.head_quarters <= 4 && shape.pieces > 0,
              kInvalidArgument, "row split: a head of {} quarters, {} tail pieces",
              shape.head_quarters, shape.pieces);
}

int64_t RowSplit::head_end(int w) const {
  const int64_t b = share_begin(w), e = share_begin(w + 1);
  return e - (e - b) * (4 - shape_.head_quarters) / 4;  // the tail rounded down
}

RowRange RowSplit::rows(int64_t unit_begin, int64_t unit_end) const {
  return {std::min(n_, unit_begin * align_), std::min(n_, unit_end * align_)};
}

RowRange RowSplit::head(int w) const { return rows(share_begin(w), head_end(w)); }

RowRange RowSplit::piece(int p) const {
  const int w = p % workers_, k = p / workers_;
  const int64_t b = head_end(w), len = share_begin(w + 1) - b;
  return rows(b + len * k / shape_.pieces, b + len * (k + 1) / shape_.pieces);
}

}  // namespace hymoe::cpu
