// hymoe-bench-cpu: the CPU benchmarks in one run (Google Benchmark), in this order: the read
// bandwidth probe (the ceiling), the thread pool's run() cost, FP8 GEMV with L2-resident weights (one core's decode speed) and by
// thread count, the rates of the GEMV's inner-loop instructions (one core), GEMV latency against
// OpenBLAS, one MoE layer, the prefill GEMM, MLA attention.
// Afterwards prints a summary table and, with --out FILE, writes it
// as JSON: {"context": {...}, "records": [{name, threads, value, unit, ceiling, ratio, note}]}.
// Google Benchmark's own flags (--benchmark_filter, --benchmark_out, ...) work as usual.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_context.h"
#include "hymoe/common/cpu_features.h"
#include "hymoe/kernels/fp8_gemm.h"
#include "hymoe/kernels/isa.h"

int main(int argc, char** argv) {
  std::string out;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());

  hymoe::bench::BenchContext ctx;
  hymoe::bench::register_bandwidth(ctx);
  hymoe::bench::register_pool(ctx);
  hymoe::bench::register_gemv(ctx);
  hymoe::bench::register_bf16_gemv(ctx);
  hymoe::bench::register_op_rate(ctx);
  hymoe::bench::register_openblas(ctx);
  hymoe::bench::register_moe(ctx);
  hymoe::bench::register_gemm(ctx);
  hymoe::bench::register_mla(ctx);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  fmt::print("\n{:<34} {:>7} {:>12} {:<8} {:>12} {:>7}\n", "case", "threads", "value", "unit",
             "ceiling", "ratio");
  for (const auto& r : ctx.records()) {
    fmt::print("{:<34} {:>7} {:>12.3f} {:<8} {:>12.3f} {:>7.3f}\n", r.name, r.threads, r.value,
               r.unit, r.ceiling, r.ratio);
  }
  if (!out.empty()) {
    nlohmann::json j;
    j["context"] = {{"cpu_features", hymoe::cpu_features().describe()},
                    {"topology", ctx.topology().describe()},
                    {"cores", ctx.topology().num_cores()},
                    {"l3_bytes", ctx.l3_bytes()},
                    {"gemv_isa", std::string(hymoe::kernels::isa_name(hymoe::kernels::best_isa()))},
                    {"gemm_impl", hymoe::kernels::gemm_impl_name(hymoe::kernels::best_gemm_impl())}};
    j["records"] = nlohmann::json::array();
    for (const auto& r : ctx.records()) {
      j["records"].push_back({{"name", r.name}, {"threads", r.threads}, {"value", r.value},
                              {"unit", r.unit}, {"ceiling", r.ceiling}, {"ratio", r.ratio},
                              {"note", r.note}});
    }
    std::ofstream f(out);
    f << j.dump(2) << "\n";
    if (!f) {
      fmt::print(stderr, "bench-cpu: could not write {}\n", out);
      return 1;
    }
    fmt::print("wrote {}\n", out);
  }
  return 0;
}
