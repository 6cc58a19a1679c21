#include "hymoe/engine/split_executor.h"

#include <algorithm>

#include "hymoe/common/error.h"

namespace hymoe {

SplitExecutor::SplitExecutor(std::unique_ptr<Executor> short_path, std::unique_ptr<Executor> long_path, int64_t threshold)
    : short_(std::move(short_path)), long_(std::move(long_path)), threshold_(threshold) {
  HYMOE_CHECK(short_ && long_ && threshold >= 1, kInvalidArgument, "split executor: two paths and a threshold >= 1 ({})",
              threshold);
  HYMOE_CHECK(&short_->kv_cache() == &long_->kv_cache(), kInvalidArgument,
              "split executor: the {} and {} paths must share one KV pool", short_->name(), long_->name());
  HYMOE_CHECK(short_->config().vocab_size == long_->config().vocab_size &&
                  short_->config().num_hidden_layers == long_->config().num_hidden_layers,
              kInvalidArgument, "split executor: the two paths run different models");
}

std::string SplitExecutor::placement_summary() const {
  return long_->placement_summary() + "; prompt chunks of " + std::to_string(threshold_) + "+ tokens on " +
         long_->name() + ", the rest on " + short_->name();
}

void SplitExecutor::forward(std::span<const StepItem> items, std::span<float> logits) {
  const int64_t vocab = config().vocab_size;
  int64_t rows = 0;
  bool any_long = false, any_short = false;
  for (const StepItem& it : items) {
    rows += it.want_logits ? 1 : 0;
    const bool is_long = !it.decode && static_cast<int64_t>(it.tokens.size()) >= threshold_;
    (is_long ? any_long : any_short) = true;
  }
  HYMOE_CHECK(static_cast<int64_t>(logits.size()) == rows * vocab, kInternal,
              "logits buffer holds {} values, {} rows of {} needed", logits.size(), rows, vocab);
  if (!any_long) return short_->forward(items, logits);
  if (!any_short) return long_->forward(items, logits);
  run(*long_, true, items, logits);
  run(*short_, false, items, logits);
}

void SplitExecutor::run(Executor& path, bool is_long, std::span<const StepItem> items, std::span<float> logits) {
  const auto vocab = static_cast<size_t>(config().vocab_size);
  sub_.clear();
  row_of_.clear();
  size_t row = 0;
  for (const StepItem& it : items) {
    const bool it_long = !it.decode && static_cast<int64_t>(it.tokens.size()) >= threshold_;
    if (it_long == is_long) {
      sub_.push_back(it);
      if (it.want_logits) row_of_.push_back(row);
    }
    row += it.want_logits ? 1 : 0;
  }
  sub_logits_.resize(row_of_.size() * vocab);
  path.forward(sub_, sub_logits_);
  for (size_t i = 0; i < row_of_.size(); ++i)
    std::copy_n(sub_logits_.begin() + static_cast<std::ptrdiff_t>(i * vocab), vocab,
                logits.begin() + static_cast<std::ptrdiff_t>(row_of_[i] * vocab));
}

}  // namespace hymoe
