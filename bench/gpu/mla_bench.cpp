// hymoe-bench-gpu's MLA attention sections (mla_bench.h).
#include "mla_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/cuda_check.h"
#include "hymoe/gpu/mla_decode_plan.h"
#include "hymoe/gpu/mla_prefill.h"
#include "hymoe/gpu/mla_prefill_cudnn.h"

namespace hymoe::gpu::bench {

// Contexts of 1K, 8K and 64K tokens at batch 1, 2, 4 and 8, then three batches of mixed lengths
// (one long sequence beside seven or 39 of 1K: uniform splits follow the longest, the rest leave
// theirs empty; rows tagged "-plan" take a work list instead, chunks of one length across the
// batch); cases whose longest sequence is below min_len, or whose label does not hold only_case,
// left out (one shape under ncu).
void bench_mla_decode(Bench& bench, const Ceilings& c, const DeviceInfo& info, int min_len,
                      std::initializer_list<MlaDecodeImpl> impls, const std::string& only_case,
                      bool steady) {
  cudaStream_t s = bench.stream();
  const int heads = 128, block_size = 64;
  const double mscale = 0.1 * std::log(40.0) + 1.0;
  struct Case {
    std::vector<int> lens;
    std::string label;  // the records' "ctx=... batch=..."
  };
  std::vector<Case> cases;
  for (int len : {1024, 8192, 65536})
    for (int batch : {1, 2, 4, 8})
      cases.push_back({std::vector<int>(size_t(batch), len), fmt::format("ctx={} batch={}", len, batch)});
  for (int len : {8192, 65536}) {
    std::vector<int> lens(8, 1024);
    lens[0] = len;
    cases.push_back({lens, fmt::format("ctx={}+7x1024 batch=8", len)});
  }
  {  // a batch of nearly a wave of 64-head blocks' sequences (uniform splits: 1 a sequence)
    std::vector<int> lens(40, 1024);
    lens[0] = 65536;
    cases.push_back({lens, "ctx=65536+39x1024 batch=40"});
  }
  for (const Case& cs : cases) {
    const int len = *std::max_element(cs.lens.begin(), cs.lens.end());
    if (len < min_len || cs.label.find(only_case) == std::string::npos) continue;
    const int batch = static_cast<int>(cs.lens.size());
    const double total_tokens = std::accumulate(cs.lens.begin(), cs.lens.end(), 0.0);
    const int max_blocks = (len + block_size - 1) / block_size;
    const int num_blocks = batch * max_blocks;
    DeviceBuffer cache = random_bf16(size_t(num_blocks) * block_size * kMlaHeadDim, s);
    DeviceBuffer q = random_bf16(size_t(batch) * heads * kMlaHeadDim, s);
    DeviceBuffer table(size_t(num_blocks) * 4), lens(size_t(batch) * 4);
    std::vector<int32_t> host_table(num_blocks), host_lens(cs.lens.begin(), cs.lens.end());
    for (int i = 0; i < num_blocks; ++i) host_table[i] = (i * 7919) % num_blocks;  // scattered
    table.copy_from_host(host_table.data(), table.bytes(), s);
    lens.copy_from_host(host_lens.data(), lens.bytes(), s);
    MlaDecodeParams p;
    p.batch = batch;
    p.heads = heads;
    p.block_size = block_size;
    p.max_blocks = max_blocks;
    p.max_seq_len = len;
    p.cache_blocks = num_blocks;  // kWgmmaPingPong: TMA loads (block size 64)
    // The kernels' common splits (~2 waves), and for the wgmma kernels also
    // mla_decode_wgmma_splits' (at most one wave: rows tagged "-1wave", kAuto's splits);
    // kWgmmaPingPong with its TMA loads and, with those splits, with cp.async
    // ("wgmma-pingpong-cpasync-1wave").
    const int splits = mla_decode_splits(info.multiprocessors, batch, heads, len);
    const int splits_1wave = mla_decode_wgmma_splits(info.multiprocessors, batch, heads, len);
    // A work list (mla_decode_plan: chunks of one length across the sequences), made once as a
    // decode step makes it for all its layers; the planner's own time in a row of its own. Its
    // splits: from the lengths ("-plan": as a scheduler that knows them picks them), or one wave
    // whatever the lengths ("-plan-wave": as a step captured once would).
    const int splits_wave = mla_decode_plan_splits(info.multiprocessors, batch, heads);
    const int splits_plan = mla_decode_plan_splits(info.multiprocessors, heads, host_lens);
    const int wave_items = mla_decode_wave_items(info.multiprocessors, heads);
    DeviceBuffer work_list(mla_decode_work_list_bytes(batch, splits_wave));
    // A segmented list ("-seg": blocks walk runs of items, the batch's tiles cut evenly).
    const int slots = mla_decode_segment_slots(info.multiprocessors, heads, batch);
    const int splits_seg = mla_decode_segment_splits(batch, slots);
    DeviceBuffer seg_list(mla_decode_work_list_bytes(batch, splits_seg));
    mla_decode_plan_segments(lens.as<int32_t>(), batch, splits_seg, slots, seg_list.as<int32_t>(), s);
    p.softmax_scale = static_cast<float>(mscale * mscale / std::sqrt(192.0));
    DeviceBuffer out(size_t(batch) * heads * kMlaLatentDim * 2);
    DeviceBuffer ws(mla_decode_workspace_bytes(batch, heads,
                                               std::max({splits, splits_1wave, splits_wave,
                                                         splits_seg})));
    p.q = q.as<Bf16>();
    p.kv_cache = cache.as<Bf16>();
    p.block_table = table.as<int32_t>();
    p.seq_lens = lens.as<int32_t>();
    p.out = out.as<Bf16>();
    p.workspace = ws.as<float>();
    // graph: 8 calls (as 8 layers of a decode step) captured in one CUDA graph and replayed,
    // per call: without the host's launch rate (a call is two launches), as the engine's
    // captured decode step runs them; rows tagged ",graph".
    if (!steady) {  // (the planners' rows once, with the kernels' first rows)
      const double plan_ms = bench.time_ms([&] {
        mla_decode_plan(lens.as<int32_t>(), batch, splits_plan, wave_items, work_list.as<int32_t>(), s);
      });
      bench.add({fmt::format("mla_decode_plan/{} (us per call)", cs.label), plan_ms * 1e3, "us", 0, ""});
      const double seg_plan_ms = bench.time_ms([&] {
        mla_decode_plan_segments(lens.as<int32_t>(), batch, splits_seg, slots, seg_list.as<int32_t>(), s);
      });
      bench.add({fmt::format("mla_decode_plan_segments/{} (us per call)", cs.label),
                 seg_plan_ms * 1e3, "us", 0, ""});
    }
    // planned: with a work list for num_splits (0: mla_decode_plan_splits'); segmented: with the
    // segmented list (num_splits ignored; planned above, once).
    auto run = [&](MlaDecodeImpl impl, int num_splits, const std::string& tag, bool graph = false,
                   bool planned = false, bool segmented = false) {
      p.impl = impl;
      p.num_splits = segmented ? splits_seg : planned && num_splits == 0 ? splits_plan : num_splits;
      p.work_list = segmented ? seg_list.as<int32_t>() : planned ? work_list.as<int32_t>() : nullptr;
      p.work_slots = segmented ? slots : 0;
      if (planned && !segmented)  // (outside the timing: a step plans once for all its layers)
        mla_decode_plan(lens.as<int32_t>(), batch, p.num_splits, wave_items, work_list.as<int32_t>(), s);
      constexpr int kGraphCalls = 8;
      const double ms = graph ? time_enqueue(bench, tag, true, [&] {
        for (int i = 0; i < kGraphCalls; ++i) mla_decode(p, s);
      }, steady) / kGraphCalls : bench.time_ms([&] { mla_decode(p, s); });
      if (ms <= 0) return;
      const std::string name = graph ? tag + (steady ? ",steady" : ",graph") : tag;
      const double bytes = total_tokens * kMlaHeadDim * 2;
      const double mhz = steady && graph ? bench.last_steady_mhz() : 0.0;  // the clock it ran at
      bench.add({fmt::format("mla_decode[{}]/{} (cache bytes)", name, cs.label),
                 bytes / (ms * 1e-3) / 1e9, "GB/s", c.copy_gbs, "d2d copy", mhz});
      const double flops = 2.0 * heads * total_tokens * (kMlaHeadDim + kMlaLatentDim);
      bench.add({fmt::format("mla_decode[{}]/{} (compute)", name, cs.label),
                 flops / (ms * 1e-3) / 1e12, "TFLOP/s", c.bf16_tflops, "bf16 gemm", mhz});
    };
    for (const MlaDecodeImpl impl : impls) {
      const char* tag = impl == MlaDecodeImpl::kWgmma         ? "wgmma"
                        : impl == MlaDecodeImpl::kWgmmaSplitS ? "wgmma-split-s"
                        : impl == MlaDecodeImpl::kWgmmaPingPong ? "wgmma-pingpong"
                        : impl == MlaDecodeImpl::kWgmmaPair     ? "wgmma-pair"
                        : impl == MlaDecodeImpl::kTensorCores ? "mma"
                                                              : "cuda-cores";
      if (impl == MlaDecodeImpl::kAuto) {
        // What a caller gets without choosing (mla_decode_resolve: the pair kernel for splits
        // of >= kMlaPairMinSplitTokens or <= kMlaPairMaxShortSplitTokens, else the ping-pong),
        // with kAuto's own splits.
        run(impl, mla_decode_splits_for(impl, info.multiprocessors, batch, heads, len),
            "wgmma-auto-1wave", true);
        continue;
      }
      if (steady) {
        // The power-limited steady state: the rows that decide kAuto's rule and the comparison
        // with FlashMLA (its driver's --steady), each timed after 500 ms of its own calls, so
        // that no row inherits the clocks its predecessors left (the H200's SM clock moved
        // between 1.3 and 1.97 GHz across 100 ms rows: docs/experiments.md, MLA decode).
        if (impl == MlaDecodeImpl::kWgmmaPingPong) {
          run(impl, splits_1wave, "wgmma-pingpong-1wave", true);
          run(impl, 0, "wgmma-pingpong-plan", true, true);
          run(impl, 0, "wgmma-pingpong-seg", true, false, true);
        } else if (impl == MlaDecodeImpl::kWgmmaPair) {
          run(impl, splits_1wave, "wgmma-pair-1wave", true);
        }
        continue;
      }
      run(impl, splits, tag);
      if (impl == MlaDecodeImpl::kWgmmaPingPong) {
        run(impl, splits_1wave, "wgmma-pingpong-1wave");
        run(impl, splits_1wave, "wgmma-pingpong-1wave", true);
        run(impl, 0, "wgmma-pingpong-plan", false, true);
        run(impl, 0, "wgmma-pingpong-plan", true, true);
        run(impl, splits_wave, "wgmma-pingpong-plan-wave", true, true);
        run(impl, 0, "wgmma-pingpong-seg", true, false, true);
        // Fewer splits than one wave (fewer partials to store and merge, SMs left idle): where
        // the fixed costs of a split outweigh its share of the work.
        for (const int eighths : {1, 2, 4, 6}) {
          const int n = splits_1wave * eighths / 8;
          if (n >= 1 && n * 128 <= len) run(impl, n, fmt::format("wgmma-pingpong-s{}", n), true);
        }
        p.cache_blocks = 0;  // its cp.async loads, for comparison
        run(impl, splits_1wave, "wgmma-pingpong-cpasync-1wave");
        p.cache_blocks = num_blocks;
      }
      if (impl == MlaDecodeImpl::kWgmmaSplitS)
        run(impl, splits_1wave, "wgmma-split-s-1wave");
      if (impl == MlaDecodeImpl::kWgmmaPair) {
        run(impl, splits_1wave, "wgmma-pair-1wave");
        run(impl, splits_1wave, "wgmma-pair-1wave", true);
        run(impl, 0, "wgmma-pair-plan", true, true);
        run(impl, splits_wave, "wgmma-pair-plan-wave", true, true);
      }
    }
  }
}

// Causal MLA prefill attention (naive form) at 128 heads; kv_b's [tokens, heads, 256] layout.
// hymoe's kernels and cuDNN's fused attention (where cuDNN loads), whole prompts and a chunk of
// 4096 new tokens after a cached prefix (chunked prefill).
void bench_mla_prefill(Bench& bench, const Ceilings& c, const Ceilings& steady, int max_tokens) {
  cudaStream_t s = bench.stream();
  const int heads = 128;
  const double mscale = 0.1 * std::log(40.0) + 1.0;
  std::string why;
  std::unique_ptr<MlaPrefillCudnn> cudnn, tuned;  // heuristics' first engine / fastest engine
  if (MlaPrefillCudnn::available(&why)) {
    cudnn = std::make_unique<MlaPrefillCudnn>();
    tuned = std::make_unique<MlaPrefillCudnn>(nullptr, /*autotune=*/true);
  } else {
    fmt::print("mla_prefill[cudnn]: skipped ({})\n", why);
  }
  struct Shape {
    int tokens, past;
  };
  for (const Shape shape : {Shape{4096, 0}, Shape{16384, 0}, Shape{32768, 0}, Shape{65536, 0},
                            Shape{4096, 28672}}) {
    const int tokens = shape.tokens, keys = shape.past + shape.tokens;
    if (keys > std::max(4096, max_tokens)) continue;
    DeviceBuffer q = random_bf16(size_t(tokens) * heads * kMlaQkDim, s);
    DeviceBuffer kv = random_bf16(size_t(keys) * heads * 256, s);
    DeviceBuffer kpe = random_bf16(size_t(keys) * 64, s);
    DeviceBuffer out(size_t(tokens) * heads * kMlaVDim * 2);
    MlaPrefillParams p;
    p.q = q.as<Bf16>();
    p.k_nope = kv.as<Bf16>();
    p.v = kv.as<Bf16>() + kMlaNopeDim;
    p.k_pe = kpe.as<Bf16>();
    p.out = out.as<Bf16>();
    p.tokens = tokens;
    p.kv_tokens = keys;
    p.past = shape.past;
    p.heads = heads;
    p.q_token_stride = int64_t{heads} * kMlaQkDim;
    p.q_head_stride = kMlaQkDim;
    p.k_token_stride = p.v_token_stride = int64_t{heads} * 256;
    p.k_head_stride = p.v_head_stride = 256;
    p.k_pe_token_stride = 64;
    p.out_token_stride = int64_t{heads} * kMlaVDim;
    p.out_head_stride = kMlaVDim;
    p.softmax_scale = static_cast<float>(mscale * mscale / std::sqrt(192.0));
    // Scores computed: the causal triangle of the chunk plus its whole cached prefix.
    const double pairs = double(tokens) * (tokens + 1) / 2 + double(tokens) * shape.past;
    const double flops = 2.0 * heads * pairs * (kMlaQkDim + kMlaVDim);
    const std::string what = shape.past == 0
                                 ? fmt::format("causal {} tokens x 128 heads", tokens)
                                 : fmt::format("chunk {} after {} x 128 heads", tokens, shape.past);
    for (const MlaPrefillImpl impl : {MlaPrefillImpl::kTensorCores, MlaPrefillImpl::kCudaCores}) {
      if (impl == MlaPrefillImpl::kCudaCores && keys > 4096) continue;  // ~19 TFLOP/s: slow
      p.impl = impl;
      const double ms = bench.time_ms([&] { mla_prefill(p, s); });
      bench.add({fmt::format("mla_prefill[{}]/{}",
                             impl == MlaPrefillImpl::kCudaCores ? "cuda-cores" : "mma", what),
                 flops / (ms * 1e-3) / 1e12, "TFLOP/s", c.bf16_tflops, "bf16 gemm"});
    }
    if (cudnn) {
      if (!cudnn->supports(p, &why)) {
        fmt::print("mla_prefill[cudnn]/{}: not supported ({})\n", what, why);
        continue;
      }
      bench.add({fmt::format("mla_prefill[cudnn]/{} (plan build, ms)", what),
                 cudnn->last_build_ms(), "ms", 0, ""});
      const double ms = bench.time_ms([&] { cudnn->run(p, s); });
      bench.add({fmt::format("mla_prefill[cudnn]/{}", what), flops / (ms * 1e-3) / 1e12,
                 "TFLOP/s", c.bf16_tflops, "bf16 gemm"});
      {  // K read in place from a [keys, heads, 320] k_nope | k_pe | v buffer (no gather).
        DeviceBuffer kv320 = random_bf16(size_t(keys) * heads * 320, s);
        MlaPrefillParams pi = p;
        pi.k_nope = kv320.as<Bf16>();
        pi.k_pe = kv320.as<Bf16>() + kMlaNopeDim;
        pi.v = kv320.as<Bf16>() + kMlaQkDim;
        pi.k_token_stride = pi.k_pe_token_stride = pi.v_token_stride = int64_t{heads} * 320;
        pi.k_head_stride = pi.k_pe_head_stride = pi.v_head_stride = 320;
        const double ims = bench.time_ms([&] { cudnn->run(pi, s); });
        bench.add({fmt::format("mla_prefill[cudnn, K in place]/{}", what),
                   flops / (ims * 1e-3) / 1e12, "TFLOP/s", c.bf16_tflops, "bf16 gemm"});
        // The same in the power-limited steady state, against the BF16 ceiling timed that way
        // (a 4K prompt's call is ~1 ms: its short run reads the clock its predecessors left).
        const double sms = bench.steady_ms([&] { cudnn->run(pi, s); });
        bench.add({fmt::format("mla_prefill[cudnn, K in place]/{}, steady state", what),
                   flops / (sms * 1e-3) / 1e12, "TFLOP/s", steady.bf16_tflops,
                   "bf16 gemm, steady state", bench.last_steady_mhz()});
      }
      // The warm-up call tunes: every engine once, the fastest kept.
      const double tms = bench.time_ms([&] { tuned->run(p, s); });
      bench.add({fmt::format("mla_prefill[cudnn-tuned of {}]/{}", tuned->engines(p), what),
                 flops / (tms * 1e-3) / 1e12, "TFLOP/s", c.bf16_tflops, "bf16 gemm"});
    }
  }
}

}  // namespace hymoe::gpu::bench
