#include "hymoe/engine/slp_moe.h"

#include <algorithm>

#include "hymoe/common/error.h"
#include "hymoe/common/stopwatch.h"
#include "hymoe/gpu/activation.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/fp8_quant.h"
#include "hymoe/gpu/gemm.h"
#include "hymoe/gpu/stream.h"
#include "hymoe/gpu/upload.h"

namespace hymoe {
namespace {
constexpr int kMaxLaunchRows = 65535;
}  // namespace

void slp_batch_offsets(std::span<const int32_t> offsets, int64_t e0, int64_t e1, std::span<int32_t> absolute,
                       std::span<int32_t> relative) {
  const auto n = static_cast<int64_t>(offsets.size());
  HYMOE_CHECK(n >= 2 && e0 >= 0 && e0 < e1 && e1 < n && static_cast<int64_t>(absolute.size()) == n &&
                  static_cast<int64_t>(relative.size()) == n,
              kInvalidArgument, "SLP batch offsets: experts [{}, {}) of {}, outputs {} and {}", e0, e1, n - 1,
              absolute.size(), relative.size());
  const int32_t r0 = offsets[static_cast<size_t>(e0)], r1 = offsets[static_cast<size_t>(e1)];
  for (size_t g = 0; g < offsets.size(); ++g) {
    absolute[g] = std::clamp(offsets[g], r0, r1);
    relative[g] = absolute[g] - r0;
  }
}

struct SlpMoe::Impl {
  const ModelConfig& c;
  int64_t hidden, inter, E, K, max_rows;
  int64_t batch_rows;  // the most rows a batch of experts takes (>= max_tokens: one expert's most)
  gpu::GroupedFp8Gemm gate, up, down;
  gpu::DeviceBuffer xq, xq_scales, offsets, cursor, slot_rows, xp, xp_scales, gu, act, act_q, act_scales, y;
  // Per batch (at most one an expert): the offsets collapsed onto the batch (absolute rows, for
  // gate and up over the whole permuted A) and the same shifted to the batch's first row (for the
  // batch's own activations and down), [2][E + 1] each, on the host (pinned, written before the
  // copy is enqueued and not again this layer) and the device.
  gpu::PinnedBuffer h_offsets, h_batch;
  gpu::DeviceBuffer d_batch;
  gpu::Event offsets_ready{false, true};  // blocking: the host waits here for the layer's attention
  bool timing = false;
  Times times;
  // With timing: waits for the stream and adds the time since `t` to `into`; restarts t.
  void lap(cudaStream_t stream, SteadyClock::time_point& t, double& into) {
    if (!timing) return;
    HYMOE_CUDA_CHECK(cudaStreamSynchronize(stream));
    into += seconds_since(t);
    t = SteadyClock::now();
  }

  Impl(const ModelConfig& config, const gpu::CublasLt& lt, int64_t max_tokens, gpu::MemoryBudget* budget)
      : c(config),
        hidden(config.hidden_size),
        inter(config.moe_intermediate_size),
        E(config.n_routed_experts),
        K(config.num_experts_per_tok),
        max_rows(max_tokens * config.num_experts_per_tok),
        batch_rows(std::min(max_tokens * config.num_experts_per_tok, 2 * max_tokens)),
        gate(lt, static_cast<int>(inter), static_cast<int>(hidden)),
        up(lt, static_cast<int>(inter), static_cast<int>(hidden)),
        down(lt, static_cast<int>(hidden), static_cast<int>(inter)) {
    const auto T = static_cast<size_t>(max_tokens), R = static_cast<size_t>(max_rows),
               B = static_cast<size_t>(batch_rows);
    const int hb = static_cast<int>((hidden + 127) / 128), ib = static_cast<int>((inter + 127) / 128);
    auto make = [&](size_t bytes) { return gpu::DeviceBuffer(std::max<size_t>(bytes, 16), budget); };
    xq = make(T * static_cast<size_t>(hidden));
    xq_scales = make(static_cast<size_t>(hb) * T * 4);
    offsets = make(static_cast<size_t>(E + 1) * 4);
    cursor = make(static_cast<size_t>(E) * 4);
    slot_rows = make(R * 4);
    xp = make(R * static_cast<size_t>(hidden));
    xp_scales = make(static_cast<size_t>(gpu::grouped_scale_floats(hb, max_rows, static_cast<int>(E))) * 4);
    // A batch's rows only: its gate/up, activations and outputs (the sum accumulates in FP32).
    gu = make(B * static_cast<size_t>(2 * inter) * 2);
    act = make(B * static_cast<size_t>(inter) * 2);
    act_q = make(B * static_cast<size_t>(inter));
    act_scales = make(static_cast<size_t>(gpu::grouped_scale_floats(ib, batch_rows, static_cast<int>(E))) * 4);
    y = make(B * static_cast<size_t>(hidden) * 2);
    h_offsets = gpu::PinnedBuffer(static_cast<size_t>(E + 1) * 4);
    h_batch = gpu::PinnedBuffer(static_cast<size_t>(E) * 2 * static_cast<size_t>(E + 1) * 4);
    d_batch = make(static_cast<size_t>(E) * 2 * static_cast<size_t>(E + 1) * 4);
  }

  void run(const Params& p, ExpertStreamer& streamer, const ExpertRing& ring, cudaStream_t stream);
};

SlpMoe::SlpMoe(const ModelConfig& config, const gpu::CublasLt& lt, int64_t max_tokens, gpu::MemoryBudget* budget)
    : impl_(std::make_unique<Impl>(config, lt, max_tokens, budget)), max_tokens_(max_tokens) {
  HYMOE_CHECK(max_tokens >= 1 && config.n_routed_experts >= 1 && config.num_experts_per_tok >= 1, kInvalidArgument,
              "SLP MoE: {} tokens, {} experts, top {}", max_tokens, config.n_routed_experts, config.num_experts_per_tok);
}

SlpMoe::~SlpMoe() = default;
void SlpMoe::set_timing(bool on) { impl_->timing = on; }
const SlpMoe::Times& SlpMoe::times() const { return impl_->times; }
void SlpMoe::reset_times() { impl_->times = {}; }

void SlpMoe::run(const Params& p, ExpertStreamer& streamer, const ExpertRing& ring, cudaStream_t stream) {
  HYMOE_CHECK(p.tokens >= 1 && p.tokens <= max_tokens_ && p.x && p.topk_ids && p.topk_weights && p.out,
              kInvalidArgument, "SLP MoE: {} tokens (1..{}) or a null pointer", p.tokens, max_tokens_);
  const int64_t E = impl_->E, end = p.expert_end < 0 ? E : p.expert_end;
  HYMOE_CHECK(p.expert_begin >= 0 && p.expert_begin < end && end <= E, kInvalidArgument,
              "SLP MoE: experts [{}, {}) of {}", p.expert_begin, end, E);
  Params q = p;
  q.expert_end = end;
  impl_->run(q, streamer, ring, stream);
}

void SlpMoe::Impl::run(const Params& p, ExpertStreamer& streamer, const ExpertRing& ring, cudaStream_t stream) {
  auto t = SteadyClock::now();
  const int T = static_cast<int>(p.tokens), rows = static_cast<int>(p.tokens * K);
  const int64_t scale_ld = max_rows / K;  // max_tokens: the quantiser's token-fastest scale rows
  // 1. Quantise, group by expert, bring the offsets to the host.
  gpu::quantize_fp8_per_token_block({.x = p.x, .out = xq.as<gpu::Fp8E4M3>(), .scales = xq_scales.as<float>(), .tokens = T,
                                     .cols = static_cast<int>(hidden), .x_stride = hidden, .out_stride = hidden,
                                     .scale_ld = scale_ld},
                                    stream);
  gpu::moe_expert_offsets({.topk_ids = p.topk_ids, .expert_offsets = offsets.as<int32_t>(), .cursor = cursor.as<int32_t>(),
                           .slot_rows = slot_rows.as<int32_t>(), .tokens = T, .top_k = static_cast<int>(K),
                           .experts = static_cast<int>(E)},
                          stream);
  offsets.copy_to_host(h_offsets.data(), static_cast<size_t>(E + 1) * 4, stream);
  gpu::moe_permute_fp8({.x = xq.as<gpu::Fp8E4M3>(), .x_scales = xq_scales.as<float>(), .topk_ids = p.topk_ids,
                        .slot_rows = slot_rows.as<int32_t>(), .expert_offsets = offsets.as<int32_t>(),
                        .out = xp.as<gpu::Fp8E4M3>(), .out_scales = xp_scales.as<float>(), .tokens = T,
                        .top_k = static_cast<int>(K), .cols = static_cast<int>(hidden), .x_scale_ld = scale_ld},
                       stream);
  offsets_ready.record(stream);
  offsets_ready.synchronize();  // sleeping through the layer's attention, not spinning
  const int32_t* off = h_offsets.as<int32_t>().data();
  HYMOE_CHECK(off[E] == rows, kInternal, "SLP MoE: expert offsets end at {}, {} rows routed", off[E], rows);
  lap(stream, t, times.prep_s);

  // 2. Batches of half the ring, in expert order (the loader fills the other half meanwhile), cut
  // short where their rows would pass batch_rows; each adds its experts' weighted outputs to out.
  HYMOE_CUDA_CHECK(cudaMemsetAsync(p.out, 0, static_cast<size_t>(T) * static_cast<size_t>(hidden) * sizeof(float), stream));
  const int slots = p.resident ? static_cast<int>(E) : std::max(1, ring.slots() / 2);
  const auto n = static_cast<size_t>(E + 1);
  std::vector<gpu::ExpertWeight> gw(static_cast<size_t>(E), ring.gate(0)), uw(static_cast<size_t>(E), ring.up(0)),
      dw(static_cast<size_t>(E), ring.down(0));
  int batch = 0;
  const int64_t first = p.expert_begin, last = p.expert_end;  // the experts computed
  for (int64_t e0 = first, e1 = first; e0 < last; e0 = e1, ++batch) {
    e1 = std::min<int64_t>(last, e0 + slots);
    while (e1 - e0 > 1 && off[e1] - off[e0] > batch_rows) --e1;
    HYMOE_CHECK(off[e1] - off[e0] <= batch_rows, kInternal, "SLP MoE: expert {} has {} rows, a batch holds {}", e0,
                off[e1] - off[e0], batch_rows);
    int64_t acquired = e0;
    // A failure between acquire and release hands the batch's slots back (behind what the stream
    // has enqueued) before it propagates: the ring keeps its length for the next prompt.
    const auto release_acquired = [&] {
      for (int64_t e = e0; e < acquired; ++e) streamer.release(p.first_item + static_cast<size_t>(e - first), stream);
    };
    try {
      if (p.resident) {
        for (int64_t e = e0; e < e1; ++e) {
          const auto i = static_cast<size_t>(e);
          gw[i] = p.resident[i];
          uw[i] = p.resident[static_cast<size_t>(E) + i];
          dw[i] = p.resident[static_cast<size_t>(2 * E) + i];
        }
      }
      for (; !p.resident && acquired < e1; ++acquired) {
        const int slot = streamer.acquire(p.first_item + static_cast<size_t>(acquired - first), stream);
        gw[static_cast<size_t>(acquired)] = ring.gate(slot);
        uw[static_cast<size_t>(acquired)] = ring.up(slot);
        dw[static_cast<size_t>(acquired)] = ring.down(slot);
      }
      lap(stream, t, times.wait_s);
      ++times.batches;
      const int32_t r0 = off[e0], r1 = off[e1];
      if (r1 > r0) {
        int32_t* abs = h_batch.as<int32_t>().data() + static_cast<size_t>(batch) * 2 * n;
        int32_t* rel = abs + n;
        slp_batch_offsets({off, n}, e0, e1, {abs, n}, {rel, n});
        int32_t* d_abs = d_batch.as<int32_t>() + static_cast<size_t>(batch) * 2 * n;
        int32_t* d_rel = d_abs + n;
        gpu::upload_inline(d_abs, abs, 2 * n * 4, stream);  // not behind the expert copies (upload.h)
        const std::span<const int32_t> habs(abs, n), hrel(rel, n);
        // Gate and up write each row at its index in the layer's order (the grouped scales of
        // the permuted tokens are laid out by the absolute offsets): a base shifted back by the
        // batch's first row puts row r0 at gu's first row.
        auto* g_out = reinterpret_cast<gpu::Bf16*>(reinterpret_cast<uintptr_t>(gu.data()) -
                                                   static_cast<uintptr_t>(r0) * static_cast<uintptr_t>(2 * inter) *
                                                       sizeof(gpu::Bf16));
        gate.run(habs, d_abs, gw, xp.as<gpu::Fp8E4M3>(), xp_scales.as<float>(), g_out, 2 * inter, stream);
        up.run(habs, d_abs, uw, xp.as<gpu::Fp8E4M3>(), xp_scales.as<float>(), g_out + inter, 2 * inter, stream);
        const int rb = r1 - r0;
        for (int s0 = 0; s0 < rb; s0 += kMaxLaunchRows) {  // the grid's row limit
          gpu::silu_mul({.gate_up = gu.as<gpu::Bf16>() + static_cast<int64_t>(s0) * 2 * inter,
                         .out = act.as<gpu::Bf16>() + static_cast<int64_t>(s0) * inter,
                         .rows = std::min(kMaxLaunchRows, rb - s0), .cols = static_cast<int>(inter),
                         .in_stride = 2 * inter, .out_stride = inter},
                        stream);
        }
        // The batch's activations as a problem of their own: rows from 0, offsets shifted.
        gpu::quantize_fp8_per_token_block({.x = act.as<gpu::Bf16>(), .out = act_q.as<gpu::Fp8E4M3>(),
                                           .scales = act_scales.as<float>(), .tokens = rb, .cols = static_cast<int>(inter),
                                           .x_stride = inter, .out_stride = inter, .scale_ld = rb, .group_offsets = d_rel,
                                           .groups = static_cast<int>(E)},
                                          stream);
        down.run(hrel, d_rel, dw, act_q.as<gpu::Fp8E4M3>(), act_scales.as<float>(), y.as<gpu::Bf16>(), hidden, stream);
        lap(stream, t, times.gemm_s);
        // 3. The batch's share of the weighted un-permute, into the FP32 sum.
        gpu::moe_unpermute_add({.y = y.as<gpu::Bf16>(), .slot_rows = slot_rows.as<int32_t>(), .topk_ids = p.topk_ids,
                                .topk_weights = p.topk_weights, .out = p.out, .tokens = T, .top_k = static_cast<int>(K),
                                .cols = static_cast<int>(hidden), .ldy = hidden, .ldo = hidden,
                                .expert_begin = static_cast<int>(e0), .expert_end = static_cast<int>(e1),
                                .row_begin = r0},
                               stream);
        lap(stream, t, times.combine_s);
      }
    } catch (...) {
      release_acquired();
      throw;
    }
    release_acquired();
  }
}

}  // namespace hymoe
