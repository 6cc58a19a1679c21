#include "hymoe/engine/dslp_moe.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

#include "hymoe/common/error.h"
#include "hymoe/engine/slp_moe.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/stream.h"

namespace hymoe {

struct DslpMoe::Impl {
  const ModelConfig& c;
  int rank, ranks;
  int64_t max_local, hidden, K, e_begin = 0, e_end = 0;
  SlpMoe moe;
  // The padded send rows, every rank's rows, their routing, the partial sums over every row.
  gpu::DeviceBuffer send, gathered, topk_ids, topk_w, partial;
  gpu::Event to_comm{false}, to_compute{false};

  Impl(const ModelConfig& config, const gpu::CublasLt& lt, int r, int n, int64_t max_local_rows, gpu::MemoryBudget* budget)
      : c(config),
        rank(r),
        ranks(n),
        max_local(max_local_rows),
        hidden(config.hidden_size),
        K(config.num_experts_per_tok),
        moe(config, lt, max_local_rows * n, budget) {
    const int E = static_cast<int>(config.n_routed_experts);
    e_begin = E;
    for (int e = 0; e < E; ++e) {
      if (expert_rank(e, E, n) != r) continue;
      e_begin = std::min<int64_t>(e_begin, e);
      e_end = e + 1;
    }
    HYMOE_CHECK(e_end > e_begin, kInvalidArgument, "DSLP MoE: rank {} of {} has none of the {} experts", r, n, E);
    auto make = [&](size_t bytes) { return gpu::DeviceBuffer(std::max<size_t>(bytes, 16), budget); };
    const auto rows = static_cast<size_t>(max_local * n), h = static_cast<size_t>(hidden);
    send = make(static_cast<size_t>(max_local) * h * 2);
    gathered = make(rows * h * 2);
    topk_ids = make(rows * static_cast<size_t>(K) * 4);
    topk_w = make(rows * static_cast<size_t>(K) * 4);
    partial = make(rows * h * 4);
  }
  // The work enqueued on `from` so far, before what is enqueued on `to` next.
  static void order(gpu::Event& e, cudaStream_t from, cudaStream_t to) {
    e.record(from);
    e.wait_on(to);
  }
};

DslpMoe::DslpMoe(const ModelConfig& config, const gpu::CublasLt& lt, int rank, int ranks, int64_t max_local_rows,
                 gpu::MemoryBudget* budget) {
  HYMOE_CHECK(ranks >= 1 && rank >= 0 && rank < ranks && max_local_rows >= 1, kInvalidArgument,
              "DSLP MoE: rank {} of {}, {} rows a rank", rank, ranks, max_local_rows);
  impl_ = std::make_unique<Impl>(config, lt, rank, ranks, max_local_rows, budget);
}

DslpMoe::~DslpMoe() = default;
int64_t DslpMoe::expert_begin() const { return impl_->e_begin; }
int64_t DslpMoe::expert_end() const { return impl_->e_end; }

SmallEpTraffic DslpMoe::run(Communicator& comm, const Params& p, const Route& route, ExpertStreamer& streamer,
                            const ExpertRing& ring, cudaStream_t stream) {
  Impl& m = *impl_;
  HYMOE_CHECK(comm.size() == m.ranks && comm.rank() == m.rank && comm.stream(), kInvalidArgument,
              "DSLP MoE: built for rank {} of {}, called on rank {} of {}{}", m.rank, m.ranks, comm.rank(), comm.size(),
              comm.stream() ? "" : " (a host communicator: device buffers need a device one)");
  HYMOE_CHECK(p.x && p.out && route && p.local_rows >= 0 && p.local_rows <= p.pad && p.pad >= 1 && p.pad <= m.max_local,
              kInvalidArgument, "DSLP MoE: {} rows padded to {} (at most {}) or a null pointer", p.local_rows, p.pad,
              m.max_local);
  const auto comm_stream = static_cast<cudaStream_t>(comm.stream());
  const size_t row_bytes = static_cast<size_t>(m.hidden) * 2, local = static_cast<size_t>(p.local_rows),
               pad = static_cast<size_t>(p.pad);
  // 1. The rank's rows, zero-padded, to every rank.
  if (local) HYMOE_CUDA_CHECK(cudaMemcpyAsync(m.send.data(), p.x, local * row_bytes, cudaMemcpyDeviceToDevice, stream));
  if (pad > local)
    HYMOE_CUDA_CHECK(cudaMemsetAsync(m.send.as<std::byte>() + local * row_bytes, 0, (pad - local) * row_bytes, stream));
  Impl::order(m.to_comm, stream, comm_stream);
  comm.all_gather(m.send.data(), m.gathered.data(), pad * row_bytes);
  Impl::order(m.to_compute, comm_stream, stream);
  // 2-3. Route every row; this rank's experts into the partial sums of every row.
  const int64_t rows = p.pad * m.ranks;
  route(m.gathered.as<gpu::Bf16>(), rows, m.topk_ids.as<int32_t>(), m.topk_w.as<float>(), stream);
  m.moe.run({.x = m.gathered.as<gpu::Bf16>(), .topk_ids = m.topk_ids.as<int32_t>(), .topk_weights = m.topk_w.as<float>(),
             .out = m.partial.as<float>(), .tokens = rows, .expert_begin = m.e_begin, .expert_end = m.e_end,
             .first_item = p.first_item, .resident = p.resident},
            streamer, ring, stream);
  // 4. Each rank's rows summed over the ranks, to that rank.
  Impl::order(m.to_comm, stream, comm_stream);
  comm.reduce_scatter_sum(m.partial.as<float>(), p.out, pad * static_cast<size_t>(m.hidden));
  Impl::order(m.to_compute, comm_stream, stream);
  const size_t peers = static_cast<size_t>(m.ranks - 1);
  return {peers * pad * row_bytes, peers * pad * static_cast<size_t>(m.hidden) * 4};
}

}  // namespace hymoe
