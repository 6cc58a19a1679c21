#include "hymoe/engine/step_plan.h"

#include "hymoe/common/error.h"
#include "hymoe/engine/kv_cache.h"

namespace hymoe {

void StepPlan::build(std::span<const StepItem> items, const KvCache& kv, int64_t vocab) {
  token_item.clear();
  token_pos.clear();
  token_id.clear();
  run_begin.clear();
  logit_rows.clear();
  order.clear();
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].decode) order.push_back(i);
  decode_rows = static_cast<int64_t>(order.size());
  for (size_t i = 0; i < items.size(); ++i)
    if (!items[i].decode) order.push_back(i);
  item_last_row_.assign(items.size(), 0);
  for (const size_t i : order) {
    const StepItem& it = items[i];
    HYMOE_CHECK(!it.decode || it.tokens.size() == 1, kInternal, "decode item with {} tokens", it.tokens.size());
    HYMOE_CHECK(it.table && it.start == it.table->tokens, kInternal, "step item out of sync with its KV table");
    HYMOE_CHECK(kv.blocks_for(it.start + static_cast<int64_t>(it.tokens.size())) <=
                    static_cast<int64_t>(it.table->blocks.size()),
                kInternal, "step item without reserved KV blocks");
    if (!it.tokens.empty()) run_begin.push_back(tokens());
    for (size_t k = 0; k < it.tokens.size(); ++k) {
      HYMOE_CHECK(it.tokens[k] >= 0 && it.tokens[k] < vocab, kInvalidArgument, "token id {} out of range",
                  it.tokens[k]);
      token_item.push_back(&it);
      token_pos.push_back(it.start + static_cast<int64_t>(k));
      token_id.push_back(it.tokens[k]);
    }
    item_last_row_[i] = tokens() - 1;
  }
  run_begin.push_back(tokens());
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].want_logits) logit_rows.push_back(item_last_row_[i]);
}

void StepPlan::advance(std::span<const StepItem> items) {
  for (const StepItem& it : items) it.table->tokens = it.start + static_cast<int64_t>(it.tokens.size());
}

}  // namespace hymoe
