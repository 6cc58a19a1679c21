#include "hymoe/engine/peer_kv_executor.h"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/common/stopwatch.h"
#include "hymoe/engine/gpu_model.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/device.h"

namespace hymoe {
namespace {

void enable_peer(int from, int to) {
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || !can) return;
  gpu::DeviceGuard guard(from);
  // Already enabled (another executor) or refused: the copies still work, staged by the driver.
  if (cudaDeviceEnablePeerAccess(to, 0) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace

PeerKvExecutor::PeerKvExecutor(std::unique_ptr<Executor> inner, std::shared_ptr<GpuModel> here,
                               std::shared_ptr<GpuModel> main)
    : inner_(std::move(inner)), here_(std::move(here)), main_(std::move(main)) {
  HYMOE_CHECK(inner_ && here_ && main_, kInvalidArgument, "peer KV executor: missing executor or model");
  HYMOE_CHECK(&here_->kv_cache() == &main_->kv_cache() && &inner_->kv_cache() == &main_->kv_cache(), kInvalidArgument,
              "peer KV executor: the executor's model must mirror the main model's KV pool (GpuModelOptions::mirror_kv)");
  HYMOE_CHECK(here_->device() != main_->device(), kInvalidArgument,
              "peer KV executor: both models are on device {} (nothing to move)", here_->device());
  enable_peer(here_->device(), main_->device());
  enable_peer(main_->device(), here_->device());
  gpu::DeviceGuard guard(here_->device());
  stream_ = std::make_unique<gpu::Stream>();
  name_ = fmt::format("{}@gpu{}", inner_->name(), here_->device());
}

PeerKvExecutor::~PeerKvExecutor() {
  gpu::DeviceGuard guard(here_->device());
  stream_.reset();
}

void PeerKvExecutor::forward(std::span<const StepItem> items, std::span<float> logits) {
  const int64_t bt = kv_cache().shape().block_tokens;
  std::vector<KvRowRun> in, out;
  for (const StepItem& it : items) {
    for (const KvRowRun& r : kv_row_runs(*it.table, 0, it.start, bt)) in.push_back(r);
    for (const KvRowRun& r : kv_row_runs(*it.table, it.start, it.start + static_cast<int64_t>(it.tokens.size()), bt))
      out.push_back(r);
  }
  {
    gpu::DeviceGuard guard(here_->device());
    const auto t0 = SteadyClock::now();
    traffic_.bytes_in += main_->copy_kv_rows(*here_, in, stream_->get());
    stream_->synchronize();
    traffic_.seconds += seconds_since(t0);
  }
  inner_->forward(items, logits);
  gpu::DeviceGuard guard(here_->device());
  const auto t0 = SteadyClock::now();
  traffic_.bytes_out += here_->copy_kv_rows(*main_, out, stream_->get());
  stream_->synchronize();
  traffic_.seconds += seconds_since(t0);
}

std::string PeerKvExecutor::placement_summary() const {
  return fmt::format("{} (on GPU {}, its KV copied to GPU {})", inner_->placement_summary(), here_->device(),
                     main_->device());
}

}  // namespace hymoe
