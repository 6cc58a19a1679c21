// An executor on a second GPU over a mirror of the main GPU's KV pool (two-GPU P/D, issue 43):
// the main device decodes while this one prefills long prompts (stream-loading prefill), and the
// prompt's latent KV moves device to device. The second device's GpuModel mirrors the main one's
// pool (GpuModelOptions::mirror_kv: the same block ids and bookkeeping, its own rows), so the
// scheduler and both executors share one KvCache. Per step: the rows the step's items attend to
// and did not write here (tokens [0, start) of each: earlier chunks, prefix-cache hits) come over
// from the main device first; after the inner executor's step, the rows it wrote (tokens
// [start, start + n)) go back; forward() returns once both copies are done. Built with CUDA.
#pragma once

#include <memory>
#include <string>

#include "hymoe/engine/executor.h"
#include "hymoe/gpu/stream.h"

namespace hymoe {

class GpuModel;

class PeerKvExecutor final : public Executor {
 public:
  // `inner` runs on `here` (a GpuModel whose pool mirrors `main`'s: kInvalidArgument otherwise).
  // Enables peer access between the two devices where they support it (copies work either way).
  PeerKvExecutor(std::unique_ptr<Executor> inner, std::shared_ptr<GpuModel> here, std::shared_ptr<GpuModel> main);
  ~PeerKvExecutor() override;

  const ModelConfig& config() const override { return inner_->config(); }
  KvCache& kv_cache() override { return inner_->kv_cache(); }
  void forward(std::span<const StepItem> items, std::span<float> logits) override;
  const char* name() const override { return name_.c_str(); }
  std::string placement_summary() const override;

  Executor& inner() { return *inner_; }
  struct Traffic {
    size_t bytes_in = 0, bytes_out = 0;  // rows copied from / to the main device
    double seconds = 0;                  // spent waiting for those copies
  };
  Traffic traffic() const { return traffic_; }

 private:
  std::unique_ptr<Executor> inner_;
  std::shared_ptr<GpuModel> here_, main_;
  std::unique_ptr<gpu::Stream> stream_;  // on here's device
  std::string name_;
  Traffic traffic_;
};

}  // namespace hymoe
