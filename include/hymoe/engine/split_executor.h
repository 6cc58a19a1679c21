// SplitExecutor: one Executor over two that share a KV pool: prompt chunks of at least
// `threshold` tokens go to the long-prompt path (SlpExecutor), every other item (decode tokens,
// shorter prompt chunks) to the short path (HybridExecutor). The policy of issue 42 in its
// simplest form: the two paths run one after the other within a step (running them side by side
// is the scheduler's job). Logits come back in item order whichever path computed them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hymoe/engine/executor.h"

namespace hymoe {

class SplitExecutor final : public Executor {
 public:
  // Both paths must use the same KvCache object and model (kInvalidArgument otherwise);
  // threshold >= 1.
  SplitExecutor(std::unique_ptr<Executor> short_path, std::unique_ptr<Executor> long_path, int64_t threshold);

  const ModelConfig& config() const override { return short_->config(); }
  KvCache& kv_cache() override { return short_->kv_cache(); }
  void forward(std::span<const StepItem> items, std::span<float> logits) override;
  const char* name() const override { return "hybrid+slp"; }
  std::string placement_summary() const override;

  int64_t threshold() const { return threshold_; }
  Executor& short_path() { return *short_; }
  Executor& long_path() { return *long_; }

 private:
  // Runs the items of one path and scatters its logits rows to their places in `logits`.
  void run(Executor& path, bool is_long, std::span<const StepItem> items, std::span<float> logits);

  std::unique_ptr<Executor> short_, long_;
  int64_t threshold_;
  std::vector<StepItem> sub_;
  std::vector<size_t> row_of_;  // per sub-item with logits: its row in the step's logits
  std::vector<float> sub_logits_;
};

}  // namespace hymoe
