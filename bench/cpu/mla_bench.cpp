// Absorbed MLA attention of one layer at DeepSeek-V3 dims (128 heads, q_nope 128, rope 64,
// v 128, kv_lora 512), through kernels::mla_attention_heads as the CPU executor runs it (each
// worker a block of heads): decode (1 query) at contexts 1K/4K/16K, a decode step of 8 sequences
// at 4K (W_UK/W_UV read once for all 8), a prefill chunk of 512 queries ending at 512 and 4K. Reported: GB/s of cache + W_UK/W_UV read (each counted once per
// layer) against the read probe of the same threads, and GFLOP/s (scores, P V and the two
// absorptions) against the register-only vdpbf16ps loop. Decode cycles through enough layers
// (each its own weights and cache) to exceed the L3, so its bytes come from memory.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>

#include "bench_context.h"
#include "hymoe/common/numeric.h"
#include "hymoe/kernels/mla_attention.h"

namespace hymoe::bench {
namespace {

constexpr int64_t kHeads = 128, kNope = 128, kRope = 64, kV = 128, kLora = 512, kPage = 64;
constexpr int64_t kWidth = kLora + kRope;
constexpr size_t kWeightBytes = 2 * kHeads * kLora * kNope * sizeof(uint16_t);  // W_UK + W_UV

// Random finite BF16 in +-[2^-7, 1) from a xorshift stream (fast enough for gigabytes).
void fill_bf16(uint16_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const uint32_t r = static_cast<uint32_t>(x >> 24);
    p[i] = static_cast<uint16_t>((r & 0x8000u) | ((120u + (r >> 16) % 7u) << 7) | (r & 0x7Fu));
  }
}

// Per layer: its W_UK / W_UV and the caches of `seqs` sequences of kv tokens.
struct MlaLayers {
  int64_t kv_len = 0, layers = 0, seqs = 0, pages_per_seq = 0;
  std::vector<uint16_t> w_uk, w_uv_t, cache;
  std::vector<const uint16_t*> pages;  // [layer][sequence][page]
  std::vector<kernels::MlaHeadsScratch> scratch;

  MlaLayers(int64_t kv, int64_t n_layers, int64_t n_seqs, cpu::ThreadPool& pool)
      : kv_len(kv), layers(n_layers), seqs(n_seqs) {
    pages_per_seq = (kv + kPage - 1) / kPage;
    const int64_t pages_per_layer = seqs * pages_per_seq;
    const size_t w = static_cast<size_t>(kHeads * kLora * kNope);
    const size_t c = static_cast<size_t>(pages_per_layer * kPage * kWidth);
    w_uk.resize(w * static_cast<size_t>(layers));
    w_uv_t.resize(w * static_cast<size_t>(layers));
    cache.resize(c * static_cast<size_t>(layers));
    pool.run([&](const cpu::WorkerInfo& wi) {
      for (int64_t l = wi.index; l < layers; l += pool.size()) {
        const uint64_t s = static_cast<uint64_t>(l) * 3;
        fill_bf16(w_uk.data() + static_cast<size_t>(l) * w, w, s);
        fill_bf16(w_uv_t.data() + static_cast<size_t>(l) * w, w, s + 1);
        fill_bf16(cache.data() + static_cast<size_t>(l) * c, c, s + 2);
      }
    });
    // Pages of a layer in reverse order: the kernel must follow the table, not the addresses.
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t i = 0; i < pages_per_layer; ++i) {
        pages.push_back(cache.data() + static_cast<size_t>(l) * c + static_cast<size_t>((pages_per_layer - 1 - i) * kPage * kWidth));
      }
    }
    scratch.resize(static_cast<size_t>(pool.size()));
  }
  const uint16_t* const* seq_pages(int64_t layer, int64_t seq) const {
    return pages.data() + (layer * seqs + seq) * pages_per_seq;
  }
};

// `seqs` sequences of `tokens` queries each, ending at position kv_len - 1, in one step.
void bm_mla(benchmark::State& state, BenchContext* ctx, int64_t kv_len, int64_t tokens, int64_t seqs) {
  cpu::ThreadPool& pool = ctx->pool(ctx->max_threads());
  const size_t layer_bytes = static_cast<size_t>(seqs * kv_len * kWidth) * sizeof(uint16_t) + kWeightBytes;
  // Decode: enough layers to exceed the L3; prefill (compute-bound): one.
  const int64_t layers = tokens == 1 ? static_cast<int64_t>((ctx->streaming_bytes() + layer_bytes - 1) / layer_bytes) : 1;
  const std::string key = std::to_string(kv_len) + "/" + std::to_string(layers) + "/" + std::to_string(seqs);
  MlaLayers& set = ctx->cached<MlaLayers>("mla", key, [&] {
    ctx->drop("gemv");
    ctx->drop("probe");
    ctx->drop("paired_probe");
    return new MlaLayers(kv_len, layers, seqs, pool);
  });
  const int64_t total = tokens * seqs;
  std::vector<float> q(static_cast<size_t>(total * kHeads * (kNope + kRope)));
  std::vector<float> out(static_cast<size_t>(total * kHeads * kV));
  std::vector<kernels::MlaSequence> sequences(static_cast<size_t>(seqs));
  {
    std::vector<uint16_t> qb(q.size());
    fill_bf16(qb.data(), qb.size(), 99);
    for (size_t i = 0; i < q.size(); ++i) q[i] = 4.0f * bf16_to_float(qb[i]);
  }
  const int64_t first = kv_len - tokens;
  double seconds = 0;
  int64_t iters = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t l = 0; l < set.layers; ++l) {
      for (int64_t i = 0; i < seqs; ++i) {
        sequences[static_cast<size_t>(i)] = {.first_position = first, .tokens = tokens, .pages = set.seq_pages(l, i)};
      }
      pool.run([&](const cpu::WorkerInfo& wi) {
        kernels::MlaHeadsParams p;
        p.heads = kHeads;
        p.nope = kNope;
        p.rope = kRope;
        p.v_dim = kV;
        p.lora = kLora;
        p.head_begin = kHeads * wi.index / pool.size();
        p.head_end = kHeads * (wi.index + 1) / pool.size();
        p.sequences = sequences.data();
        p.n_sequences = seqs;
        p.q = q.data();
        p.w_uk = set.w_uk.data() + static_cast<size_t>(l * kHeads * kLora * kNope);
        p.w_uv_t = set.w_uv_t.data() + static_cast<size_t>(l * kHeads * kLora * kV);
        p.page_tokens = kPage;
        p.scale = 1.0f / std::sqrt(192.0f);
        p.out = out.data();
        kernels::mla_attention_heads(p, set.scratch[static_cast<size_t>(wi.index)]);
      });
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(dt);
    seconds += dt;
    ++iters;
  }
  benchmark::DoNotOptimize(out.data());
  // Per layer: every query row (token x head) against its keys 0..position.
  const double keys = static_cast<double>(tokens) * (first + 1) + static_cast<double>(tokens) * (tokens - 1) / 2;
  const double flops_layer = seqs * kHeads * (keys * 2.0 * (kWidth + kLora) + tokens * 2.0 * 2.0 * kNope * kLora);
  const double n = static_cast<double>(iters * set.layers);
  const double gbps = n * static_cast<double>(layer_bytes) / seconds / 1e9;
  const double gflops = n * flops_layer / seconds / 1e9;
  const double probe = ctx->probe_gbps(pool.size());
  const double peak = dpbf16_peak_tflops(*ctx) * 1e3;
  state.counters["GBps"] = gbps;
  state.counters["GFLOPs"] = gflops;
  state.counters["ms_per_layer"] = seconds / n * 1e3;
  const std::string name = std::string("mla_attention_") +
                           (tokens == 1 ? "decode" + (seqs > 1 ? "x" + std::to_string(seqs) : std::string()) : "prefill" + std::to_string(tokens)) +
                           "_ctx" + std::to_string(kv_len);
  const std::string note = std::string(kernels::isa_name(kernels::best_isa())) + ", " + std::to_string(set.layers) +
                           " layers, " + std::to_string(seconds / n * 1e3) + " ms per layer";
  ctx->put({name, pool.size(), gbps, "GB/s", probe, probe > 0 ? gbps / probe : 0, note + "; cache + W_UK/W_UV once"});
  ctx->put({name + "_flops", pool.size(), gflops, "GFLOP/s", peak, peak > 0 ? gflops / peak : 0,
            note + "; ceiling = register-only vdpbf16ps loop"});
}

}  // namespace

void register_mla(BenchContext& ctx) {
  struct Case {
    int64_t kv_len, tokens, seqs;
  };
  for (Case c : {Case{1024, 1, 1}, Case{4096, 1, 1}, Case{16384, 1, 1}, Case{4096, 1, 8}, Case{512, 512, 1},
                 Case{4096, 512, 1}}) {
    const std::string name = std::string("mla_attention/") +
                             (c.tokens == 1 ? "decode:" + std::to_string(c.seqs) + "seq" : std::string("prefill:512")) +
                             "/ctx:" + std::to_string(c.kv_len) + "/threads:" + std::to_string(ctx.max_threads());
    benchmark::RegisterBenchmark(name.c_str(), bm_mla, &ctx, c.kv_len, c.tokens, c.seqs)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.5);
  }
}

}  // namespace hymoe::bench
