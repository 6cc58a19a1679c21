// Worker threads for the CPU engine, one group per NUMA node, each worker pinned to one core.
//
// run(fn) executes fn(worker) once on every worker and returns when all have finished: one
// global synchronisation. Protocol (one cache line per shared word):
// - The caller writes the job, sets `pending` to the worker count and bumps `generation`; idle
//   workers spin politely on `generation` (a sched_yield every 64 pauses) for spin_us, then sleep
//   on it with a futex. A worker counts itself in `sleepers` before it sleeps, and run() makes
//   its one FUTEX_WAKE (all waiters at once) only when that count is non-zero: back-to-back runs
//   make no system call.
// - Each worker decrements `pending` after its job; the one that reaches 0 wakes the caller only
//   when the caller sleeps (flag `caller_sleeping`).
// - The caller is not pinned. By default (CallerWait::kSpin) it waits by polite spinning for up
//   to caller_spin_us, then sleeps, also when every CPU it may run on has a pinned worker (the
//   full-machine pool: it then shares a worker's core). CallerWait::kAuto instead spins at most
//   5 us, then sleeps, in that case or when it finds itself on a worker's CPU at run(); kSleep
//   sleeps at once.
//   Why kSpin: on the 16-core Xeon at 16 threads one FP8 GEMV call per run() took 174.0 us with
//   the spinning caller against 182.9 us with kAuto (2048x7168) and 185.5 against 193.3 us
//   (7168x2048): the sleeping caller pays its futex wake per call. A 100 us job cost the same
//   with either wait (~106 us), and so did streaming GEMVs (0.88-0.89 of the probe). kAuto dates
//   from before this futex protocol, when a 100 us job cost 214 us per run() with the caller
//   spinning; with the protocol that cost did not come back. On a 2-core VM the spinning caller
//   is also ahead after an idle gap (waking a sleeping caller ~20 us). docs/experiments.md (CPU:
//   FP8 GEMV) has the measurements.
//   bench-cpu's pool_* records measure kAuto and kSleep beside the default at 8 threads and the
//   full pool; fp8_gemv_*_auto records the kAuto caller on the GEMV and OpenBLAS cases.
// run() is not reentrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hymoe/cpu/topology.h"

namespace hymoe::cpu {

struct WorkerInfo {
  int index = 0;            // 0 .. size()-1, grouped by node
  int node = 0;             // index into Topology::nodes() (and the pool's groups)
  int index_in_node = 0;    // 0 .. threads_in_node-1
  int threads_in_node = 1;
};

// How run()'s caller waits for the workers (default kSpin, see the header comment).
enum class CallerWait {
  // kSpin; but a spin of at most kSharedCallerSpinUs (short jobs end within it) before sleeping
  // when every CPU the constructing thread may run on has a pinned worker, or when run()'s caller
  // finds itself on a worker's CPU (checked per run).
  kAuto,
  kSpin,   // polite spin for up to caller_spin_us, then sleep
  kSleep,  // sleep on a futex at once
};

// "auto", "spin", "sleep".
const char* caller_wait_name(CallerWait wait);

inline constexpr int kSharedCallerSpinUs = 5;

struct ThreadPoolOptions {
  int threads = 0;    // 0: one per core; fewer are spread round-robin over the nodes
  bool pin = true;    // pin each worker to its core (ignored for synthetic topologies)
  int spin_us = 50;   // how long an idle worker spins before sleeping
  // How long run()'s caller waits for the workers by polite spinning before it sleeps: a futex
  // wake-up of a halted vCPU costs 10-20 us on a VM, a tenth of a 200 us GEMV call. Yielding, the
  // caller takes little from a worker that shares its core; on an oversubscribed machine it
  // still burns up to this long per run().
  int caller_spin_us = 1000;
  CallerWait caller_wait = CallerWait::kSpin;
};

// Slow-path counters (only sleeps are counted, so the fast path stays free of shared writes).
struct ThreadPoolStats {
  uint64_t runs = 0;
  uint64_t worker_sleeps = 0;  // futex waits entered by workers (summed over workers)
  uint64_t caller_sleeps = 0;  // futex waits entered by run()'s caller
};

class ThreadPool {
 public:
  // Throws hymoe::Error (kInvalidArgument) when threads exceeds the topology's cores.
  ThreadPool(const Topology& topology, const ThreadPoolOptions& options = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }
  int num_groups() const { return static_cast<int>(group_sizes_.size()); }
  int group_size(int node) const { return group_sizes_[node]; }
  const WorkerInfo& worker(int index) const { return workers_[index]; }
  // OS CPU of a worker (-1 when not pinned).
  int worker_cpu(int index) const { return cpus_[index]; }
  // How long run()'s caller spins before it sleeps (us; 0: sleeps at once), CallerWait resolved
  // at construction (kAuto may still cut it to kSharedCallerSpinUs per run, see CallerWait).
  int caller_spin_limit_us() const { return caller_spin_limit_us_; }
  ThreadPoolStats stats() const;

  // Calls fn(const WorkerInfo&) on every worker; returns when all are done. fn must outlive the
  // call. The first exception thrown by fn on any worker is rethrown here.
  template <typename F>
  void run(F&& fn) {
    run_impl(
        [](void* ctx, const WorkerInfo& w) { (*static_cast<std::remove_reference_t<F>*>(ctx))(w); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Trampoline = void (*)(void*, const WorkerInfo&);
  void run_impl(Trampoline fn, void* ctx);
  void worker_loop(int index);
  void wait_for_workers();

  // Per-worker counter on its own cache line.
  struct alignas(64) WorkerSlot {
    std::atomic<uint64_t> sleeps{0};
  };

  std::vector<WorkerInfo> workers_;
  std::vector<int> cpus_;
  std::vector<int> group_sizes_;
  int spin_us_ = 50;
  int caller_spin_us_ = 1000;
  int caller_spin_limit_us_ = 1000;
  std::vector<uint8_t> cpu_has_worker_;  // kAuto, pinned: by OS CPU, 1 where a worker is pinned
  std::unique_ptr<WorkerSlot[]> slots_;
  std::vector<std::thread> threads_;

  // The current job; written by run_impl before the generation is bumped.
  Trampoline job_ = nullptr;
  void* job_ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<uint32_t> sleepers_{0};  // workers in (or entering) a futex wait
  alignas(64) std::atomic<uint32_t> pending_{0};
  alignas(64) std::atomic<uint32_t> caller_sleeping_{0};
  std::atomic<bool> stop_{false};
  uint64_t runs_ = 0;
  uint64_t caller_sleeps_ = 0;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace hymoe::cpu
