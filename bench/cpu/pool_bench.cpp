// The cost of one ThreadPool::run() (a global synchronisation: every GEMV call, two per MoE
// layer), measured at every thread count, so the full-machine pool (the caller shares a core with
// a worker) is covered:
// - thread_pool_run_100us_job: a job of 100 us of busy work (by the wall clock) on every worker,
//   back to back (Google Benchmark's mean). Ceiling: the 100 us of work; ratio = work / run().
// - thread_pool_diag: what separates the causes of a slow run(), from per-worker clock stamps:
//   pool_empty: run() of an empty job; pool_100us: for the 100 us job the median run() time,
//   with _last / _median the start delay of the last and of the median worker (run() called ->
//   job entered) and _finish the latency from the last job's end to run()'s return; in the
//   notes their 90th percentiles, the share of runs whose last worker started > 20 us late, futex sleeps per run (workers, caller), how often the unpinned caller
//   sat on a worker's CPU, host steal time and involuntary context switches per run. At 8
//   threads and at the full pool the 100 us job also runs with the caller of CallerWait::kAuto
//   (5 us spin when it shares a worker's CPU: pool_100us_auto*, pool_wake_auto*) and sleeping at
//   once (kSleep: *_sleep*) beside the default (kSpin, up to 1 ms). pool_wake*:
//   an empty job after 1 ms idle, so every worker sleeps and is woken by run()'s one FUTEX_WAKE
//   (the first run() of each MoE layer after the GPU's attention): the spread of their start.
// - steady_clock_now: ns per clock read (the job and the stamps read it; a clocksource without a
//   vDSO path would show here), the clocksource's name in the note.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_context.h"

namespace hymoe::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kWorkUs = 100;

void busy_for_us(double us) {
  const auto end = Clock::now() + std::chrono::duration<double, std::micro>(us);
  while (Clock::now() < end) {
  }
}

void bm_pool_run(benchmark::State& state, BenchContext* ctx, int threads) {
  cpu::ThreadPool& pool = ctx->pool(threads);
  auto job = [](const cpu::WorkerInfo&) { busy_for_us(kWorkUs); };
  pool.run(job);
  double seconds = 0;
  int64_t n = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    pool.run(job);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(dt);
    seconds += dt;
    ++n;
  }
  const double us = seconds / static_cast<double>(n) * 1e6;
  state.counters["us"] = us;
  ctx->put({"thread_pool_run_100us_job", threads, us, "us", kWorkUs, kWorkUs / us,
            "one run() of 100 us busy work per worker; ratio = 100 us / run() time"});
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// Host steal time (ms) summed over the given CPUs (all when empty), from /proc/stat.
double steal_ms(const std::vector<int>& cpus) {
  std::ifstream f("/proc/stat");
  std::string line;
  const double tick_ms = 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  double total = 0;
  while (std::getline(f, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] == ' ') continue;
    std::istringstream in(line);
    std::string name;
    double user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> name >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
    const int cpu = std::stoi(name.substr(3));
    if (cpus.empty() || std::find(cpus.begin(), cpus.end(), cpu) != cpus.end()) total += steal * tick_ms;
  }
  return total;
}

long involuntary_switches() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nivcsw;
}

struct alignas(64) Stamp {
  Clock::time_point start, end;
};

// n runs of a job of work_us per worker (0: empty) with stamps; puts records named prefix_*.
// gap_us > 0: the caller sleeps that long before each run (the workers fall asleep).
void stamped_runs(BenchContext* ctx, cpu::ThreadPool& pool, int threads, double work_us, int n,
                  const std::string& prefix, bool detail, int gap_us = 0) {
  std::vector<Stamp> stamps(pool.size());
  std::vector<int> worker_cpus;
  for (int i = 0; i < pool.size(); ++i) worker_cpus.push_back(pool.worker_cpu(i));
  auto job = [&](const cpu::WorkerInfo& w) {
    stamps[w.index].start = Clock::now();
    if (work_us > 0) busy_for_us(work_us);
    stamps[w.index].end = Clock::now();
  };
  for (int i = 0; i < 20; ++i) pool.run(job);  // warm: workers awake, caller placed
  std::vector<double> run_us, start_max, start_med, finish;
  std::vector<double> starts(pool.size());
  int late = 0, caller_on_worker_cpu = 0;
  const cpu::ThreadPoolStats s0 = pool.stats();
  const double steal0 = steal_ms(worker_cpus), steal_all0 = steal_ms({});
  const long ivcsw0 = involuntary_switches();
  auto us = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  for (int r = 0; r < n; ++r) {
    if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    const int cpu = sched_getcpu();
    caller_on_worker_cpu += std::find(worker_cpus.begin(), worker_cpus.end(), cpu) != worker_cpus.end();
    const auto t0 = Clock::now();
    pool.run(job);
    const auto t1 = Clock::now();
    Clock::time_point last_end = t0;
    for (int i = 0; i < pool.size(); ++i) {
      starts[i] = us(stamps[i].start - t0);
      last_end = std::max(last_end, stamps[i].end);
    }
    run_us.push_back(us(t1 - t0));
    start_max.push_back(*std::max_element(starts.begin(), starts.end()));
    start_med.push_back(median(starts));
    finish.push_back(us(t1 - last_end));
    late += start_max.back() > 20;
  }
  const cpu::ThreadPoolStats s1 = pool.stats();
  const double per_run = 1.0 / n;
  const std::string common = fmt::format(
      "{} runs; caller spins <= {} us; p90 run {:.1f} us, last start {:.1f}, median start {:.1f}, finish {:.1f}; "
      "last start > 20 us in {:.1f}% of runs; sleeps per run: workers {:.2f}, caller {:.2f}; caller on a "
      "worker's CPU in {:.1f}% of runs; steal per run {:.2f} us on the workers' CPUs ({:.2f} us all CPUs); "
      "involuntary context switches per run {:.3f}",
      n, pool.caller_spin_limit_us(), percentile(run_us, 0.9),
      percentile(start_max, 0.9), percentile(start_med, 0.9), percentile(finish, 0.9), 100.0 * late * per_run,
      static_cast<double>(s1.worker_sleeps - s0.worker_sleeps) * per_run,
      static_cast<double>(s1.caller_sleeps - s0.caller_sleeps) * per_run, 100.0 * caller_on_worker_cpu * per_run,
      (steal_ms(worker_cpus) - steal0) * 1000 * per_run, (steal_ms({}) - steal_all0) * 1000 * per_run,
      static_cast<double>(involuntary_switches() - ivcsw0) * per_run);
  const double run_med = median(run_us);
  const std::string what = gap_us > 0 ? fmt::format(" after {} us idle", gap_us) : std::string();
  if (work_us > 0) {
    ctx->put({prefix, threads, run_med, "us", work_us, work_us / run_med, "median run()" + what + "; " + common});
  } else {
    ctx->put({prefix, threads, run_med, "us", 0, 0, "median run() of an empty job" + what + "; " + common});
  }
  if (!detail) return;
  ctx->put({prefix + "_last", threads, median(start_max), "us", 0, 0,
            "median over runs of the last worker's start delay (run() called -> job entered)"});
  ctx->put({prefix + "_median", threads, median(start_med), "us", 0, 0,
            "median over runs of the median worker's start delay"});
  ctx->put({prefix + "_finish", threads, median(finish), "us", 0, 0,
            "median over runs of last job left -> run() returned"});
}

void bm_pool_diag(benchmark::State& state, BenchContext* ctx, int threads) {
  for (auto _ : state) {
    const auto t0 = Clock::now();
    cpu::ThreadPool& pool = ctx->pool(threads);
    stamped_runs(ctx, pool, threads, 0, 2000, "pool_empty", false);
    stamped_runs(ctx, pool, threads, kWorkUs, 1000, "pool_100us", true);
    stamped_runs(ctx, pool, threads, 0, 200, "pool_wake", true, 1000);  // workers asleep: futex wake-up
    if (threads == ctx->max_threads() || threads == 8) {
      for (const cpu::CallerWait wait : {cpu::CallerWait::kAuto, cpu::CallerWait::kSleep}) {
        cpu::ThreadPoolOptions options;  // the defaults but for the wait
        options.threads = threads;
        options.caller_wait = wait;
        cpu::ThreadPool variant(ctx->topology(), options);
        const std::string name = cpu::caller_wait_name(wait);
        stamped_runs(ctx, variant, threads, kWorkUs, 1000, "pool_100us_" + name, true);
        stamped_runs(ctx, variant, threads, 0, 200, "pool_wake_" + name, true, 1000);
      }
    }
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

void bm_clock(benchmark::State& state, BenchContext* ctx) {
  constexpr int kReads = 200000;
  double ns = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    Clock::time_point last{};
    for (int i = 0; i < kReads; ++i) last = std::max(last, Clock::now());
    benchmark::DoNotOptimize(last);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(dt);
    ns = dt * 1e9 / kReads;
  }
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source = "unknown";
  f >> source;
  state.counters["ns"] = ns;
  ctx->put({"steady_clock_now", 1, ns, "ns", 0, 0, "ns per steady_clock::now(); clocksource " + source});
}

}  // namespace

void register_pool(BenchContext& ctx) {
  benchmark::RegisterBenchmark("steady_clock_now", bm_clock, &ctx)->UseManualTime()->Iterations(1);
  for (int t : ctx.thread_counts()) {
    benchmark::RegisterBenchmark(("thread_pool_run/threads:" + std::to_string(t)).c_str(), bm_pool_run, &ctx, t)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.2);
  }
  for (int t : ctx.thread_counts()) {
    benchmark::RegisterBenchmark(("thread_pool_diag/threads:" + std::to_string(t)).c_str(), bm_pool_diag, &ctx, t)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
}

}  // namespace hymoe::bench
