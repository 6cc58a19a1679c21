#include "hymoe/engine/dslp_attention.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/engine/gpu_linear.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/layer_kernels.h"
#include "hymoe/gpu/mla_prefill.h"
#include "hymoe/gpu/stream.h"

namespace hymoe {

struct DslpAttention::Impl {
  int64_t heads, lora, rope, width, vdim, kvw, kvw3, max_local, window, chunk;
  GpuLinear linear;
  // The ring's two receive buffers, kv_b's output for a chunk, a window of assembled keys, one
  // attention call's output and log-sum-exp, the running output's log-sum-exp and its -inf reset.
  gpu::DeviceBuffer ring0, ring1, kvb, keys, part, part_lse, lse, lse_reset;
  gpu::Event to_comm{false}, to_compute{false};
  size_t received = 0;

  Impl(const ModelConfig& c, const gpu::CublasLt& lt, int64_t max_local_rows, int64_t win, gpu::MemoryBudget* budget)
      : heads(c.num_attention_heads),
        lora(c.kv_lora_rank),
        rope(c.qk_rope_head_dim),
        width(c.kv_lora_rank + c.qk_rope_head_dim),
        vdim(c.v_head_dim),
        kvw(c.num_attention_heads * (c.qk_nope_head_dim + c.v_head_dim)),
        kvw3(c.num_attention_heads * (c.qk_nope_head_dim + c.qk_rope_head_dim + c.v_head_dim)),
        max_local(max_local_rows),
        window(win),
        chunk(std::min<int64_t>(win, 2048)),
        linear(lt, std::min<int64_t>(win, 2048), c.kv_lora_rank, budget) {
    auto make = [&](size_t bytes) { return gpu::DeviceBuffer(std::max<size_t>(bytes, 16), budget); };
    const auto L = static_cast<size_t>(max_local), H = static_cast<size_t>(heads);
    ring0 = make(L * static_cast<size_t>(width) * 2);
    ring1 = make(L * static_cast<size_t>(width) * 2);
    kvb = make(static_cast<size_t>(chunk * kvw) * 2);
    keys = make(static_cast<size_t>(window * kvw3) * 2);
    part = make(L * H * static_cast<size_t>(vdim) * 2);
    part_lse = make(H * L * 4);
    lse = make(H * L * 4);
    lse_reset = make(H * L * 4);
    const std::vector<float> ninf(H * L, -std::numeric_limits<float>::infinity());
    HYMOE_CUDA_CHECK(cudaMemcpy(lse_reset.data(), ninf.data(), ninf.size() * 4, cudaMemcpyHostToDevice));
  }

  static void order(gpu::Event& e, cudaStream_t from, cudaStream_t to) {
    e.record(from);
    e.wait_on(to);
  }

  // Keys [k0, k1) of `kv` (latent rows) expanded and laid out per head as k_nope | k_pe | v.
  void expand(const DevFp8& kv_b, const gpu::Bf16* kv, int64_t k0, int64_t k1, cudaStream_t stream) {
    for (int64_t c0 = k0; c0 < k1; c0 += chunk) {
      const int64_t m = std::min(chunk, k1 - c0);
      linear.run(kv_b, kv + c0 * width, width, m, kvb.as<gpu::Bf16>(), kvw, stream);
      gpu::mla_assemble_kv({.kvb = kvb.as<gpu::Bf16>(), .latent = kv + c0 * width, .out = keys.as<gpu::Bf16>() + (c0 - k0) * kvw3,
                            .tokens = static_cast<int>(m), .heads = static_cast<int>(heads), .nope = gpu::kMlaNopeDim,
                            .rope = static_cast<int>(rope), .vdim = static_cast<int>(vdim), .lora = static_cast<int>(lora),
                            .latent_stride = width},
                           stream);
    }
  }

  // This rank's queries [q_begin, q_begin + q_rows) against the block's keys (source-local rows
  // [k_begin, k_begin + k_rows), query i seeing key j when j <= past + i), window by window, each
  // partial merged into out / lse.
  void attend_block(const Params& p, const gpu::Bf16* kv, const ZigzagStripes::Block& b, cudaStream_t stream) {
    for (int64_t w0 = 0; w0 < b.k_rows; w0 += window) {
      const int64_t w1 = std::min(b.k_rows, w0 + window);
      // Rows before r0 see none of this window's keys (their causal limit lies before it).
      const int64_t r0 = std::max<int64_t>(0, w0 - b.past);
      if (r0 >= b.q_rows) break;
      expand(*p.kv_b, kv, b.k_begin + w0, b.k_begin + w1, stream);
      const int64_t rows = b.q_rows - r0, q_first = b.q_begin + r0;
      gpu::MlaPrefillParams pp = gpu::mla_prefill_over_assembled(
          p.q + q_first * heads * gpu::kMlaQkDim, keys.as<gpu::Bf16>(), part.as<gpu::Bf16>(), static_cast<int>(rows),
          static_cast<int>(w1 - w0), static_cast<int>(heads), static_cast<int>(b.past + r0 - w0), p.softmax_scale);
      pp.lse = part_lse.as<float>();
      gpu::mla_prefill(pp, stream);
      gpu::mla_merge_attention({.out = p.out + q_first * heads * vdim, .lse = lse.as<float>() + q_first, .part = pp.out,
                                .part_lse = pp.lse, .rows = pp.tokens, .heads = static_cast<int>(heads),
                                .out_token_stride = heads * vdim, .out_head_stride = vdim,
                                .part_token_stride = heads * vdim, .part_head_stride = vdim,
                                .lse_head_stride = max_local, .part_lse_head_stride = pp.tokens},
                               stream);
    }
  }
};

DslpAttention::DslpAttention(const ModelConfig& config, const gpu::CublasLt& lt, int64_t max_local_rows, int64_t window,
                             gpu::MemoryBudget* budget) {
  HYMOE_CHECK(config.qk_nope_head_dim == gpu::kMlaNopeDim && config.qk_rope_head_dim == gpu::kMlaQkDim - gpu::kMlaNopeDim &&
                  config.v_head_dim == gpu::kMlaVDim,
              kUnsupported, "DSLP attention: head dimensions nope {} rope {} v {}; the prefill kernel takes 128 / 64 / 128",
              config.qk_nope_head_dim, config.qk_rope_head_dim, config.v_head_dim);
  HYMOE_CHECK(max_local_rows >= 1 && window >= 1, kInvalidArgument, "DSLP attention: {} rows a rank, windows of {} keys",
              max_local_rows, window);
  impl_ = std::make_unique<Impl>(config, lt, max_local_rows, window, budget);
}

DslpAttention::~DslpAttention() = default;
size_t DslpAttention::received_bytes() const { return impl_->received; }

void DslpAttention::run(Communicator& comm, const Params& p, cudaStream_t stream) {
  Impl& m = *impl_;
  HYMOE_CHECK(p.stripes && p.q && p.latent && p.kv_b && p.out && comm.stream(), kInvalidArgument,
              "DSLP attention: a null pointer or a host communicator");
  const ZigzagStripes& z = *p.stripes;
  const int me = comm.rank();
  HYMOE_CHECK(z.ranks == comm.size() && z.max_local_rows() <= m.max_local, kInvalidArgument,
              "DSLP attention: stripes of {} rows over {} ranks ({} a rank, at most {}) on a group of {}", z.rows, z.ranks,
              z.max_local_rows(), m.max_local, comm.size());
  const auto comm_stream = static_cast<cudaStream_t>(comm.stream());
  const int64_t local = z.local_rows(me);
  const size_t row_bytes = static_cast<size_t>(m.width) * 2;
  // The running output starts empty: out 0, lse -inf (a merge then takes the first part whole).
  if (local) {
    HYMOE_CUDA_CHECK(cudaMemsetAsync(p.out, 0, static_cast<size_t>(local * m.heads * m.vdim) * 2, stream));
    HYMOE_CUDA_CHECK(cudaMemcpyAsync(m.lse.data(), m.lse_reset.data(), m.lse.bytes(), cudaMemcpyDeviceToDevice, stream));
  }
  Impl::order(m.to_comm, stream, comm_stream);  // the latent rows written before they are sent
  m.received = 0;
  int step = 0;
  striped_attention_ring(
      comm, z, row_bytes, {reinterpret_cast<const std::byte*>(p.latent), static_cast<size_t>(local) * row_bytes},
      {std::span<std::byte>(m.ring0.as<std::byte>(), m.ring0.bytes()), std::span<std::byte>(m.ring1.as<std::byte>(), m.ring1.bytes())},
      [&](std::span<const std::byte> kv, int source) {
        // A received source after its transfer (this also waits for the pass enqueued since, one
        // transfer of overlap lost where there are more than two ranks).
        if (step++ > 0) {
          Impl::order(m.to_compute, comm_stream, stream);
          m.received += kv.size();
        }
        const auto* rows = reinterpret_cast<const gpu::Bf16*>(kv.data());
        if (p.kv_sink && !kv.empty()) p.kv_sink(rows, source, stream);
        for (const ZigzagStripes::Block& b : z.attention_blocks(me, source)) m.attend_block(p, rows, b, stream);
        // A ring buffer is received into again two passes later: after this attend has read it.
        Impl::order(m.to_comm, stream, comm_stream);
      });
  Impl::order(m.to_compute, comm_stream, stream);  // the ring's buffers and the peers' reads done
}

}  // namespace hymoe
