// The seam between scheduling and computing: an Executor runs the model over a step, a batch of
// (sequence, token span) items, prefill chunks and single decode tokens mixed. Each backend
// (CpuExecutor, HybridExecutor, SlpExecutor, PeerKvExecutor; DSLP's next) implements it; the
// scheduler runs each step on its main executor or its long path and the server never sees which.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "hymoe/engine/kv_cache.h"
#include "hymoe/model/config.h"

namespace hymoe {

struct StepItem {
  BlockTable* table = nullptr;        // KV blocks already reserved for start + tokens.size()
  std::span<const int32_t> tokens;    // new tokens, at positions [start, start + tokens.size())
  int64_t start = 0;                  // == table->tokens before the step
  bool want_logits = true;            // produce the logits of the last new token
  // A decode token (one generated token, not part of a prompt). Executors give decode tokens and
  // prompt tokens each their own kernel path whatever the step's mix, so that a token's result
  // does not depend on which other requests share the step (batch invariance).
  bool decode = false;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const ModelConfig& config() const = 0;
  virtual KvCache& kv_cache() = 0;
  // Runs every item: writes their new tokens' latent KV rows, advances table->tokens, and writes
  // one row of config().vocab_size logits per item with want_logits, in item order, into
  // `logits`. Throws hymoe::Error on failure (the scheduler fails the step's requests).
  virtual void forward(std::span<const StepItem> items, std::span<float> logits) = 0;
  // Human-readable name of the backend ("cpu", "hybrid", ...), for logs and /v1/models.
  virtual const char* name() const = 0;
  // Where the model's bytes are (device, memory per class), one line for logs and /v1/models;
  // empty where everything is in host memory.
  virtual std::string placement_summary() const { return {}; }
};

}  // namespace hymoe
