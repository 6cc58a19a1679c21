// The step plan every executor computes from: a step's items flattened into token rows (decode
// tokens first, then prompt chunks, each in step order), each row's item, position and id, the
// runs of rows of one sequence, and the rows whose logits the step returns (in item order).
// Built once per step into buffers reused across steps (no allocation once sized). Decode rows
// first lets every stage give decode tokens their own kernel path (batch invariance).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hymoe/engine/executor.h"

namespace hymoe {

class KvCache;

struct StepPlan {
  std::vector<size_t> order;                // item indices: decode items first, then the others
  int64_t decode_rows = 0;                  // rows [0, decode_rows) are decode tokens
  std::vector<const StepItem*> token_item;  // per row
  std::vector<int64_t> token_pos;           // per row: absolute position
  std::vector<int32_t> token_id;            // per row
  std::vector<int64_t> run_begin;           // runs of rows of one item: [run_begin[i], run_begin[i+1])
  std::vector<int64_t> logit_rows;          // rows producing logits, in item order (want_logits)

  int64_t tokens() const { return static_cast<int64_t>(token_id.size()); }
  int64_t runs() const { return static_cast<int64_t>(run_begin.size()) - 1; }

  // Flattens `items`. Throws hymoe::Error: kInvalidArgument for a token id outside [0, vocab),
  // kInternal for an item out of sync with its KV table or without its blocks reserved.
  void build(std::span<const StepItem> items, const KvCache& kv, int64_t vocab);
  // Advances every item's table past its new tokens (after the layers ran).
  static void advance(std::span<const StepItem> items);

 private:
  std::vector<int64_t> item_last_row_;
};

}  // namespace hymoe
