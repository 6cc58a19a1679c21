// Worker threads for the CPU engine, one group per NUMA node, each worker pinned to one core.
//
// run(fn) executes fn(worker) once on every worker and returns when all have finished: one
// global synchronisation. Idle workers spin briefly on a generation counter and then sleep on it
// (futex), so back-to-back layers start with little latency while an idle server burns no CPU.
// The calling thread is not pinned and, when every core has a worker, shares a core with one:
// so both spin politely (a sched_yield every 64 pauses) instead of holding the core. The caller
// waits that way for up to caller_spin_us (1 ms), then sleeps on a futex. (Before, a spinning
// worker held the caller off its core for its whole 50 us spin: ~55 us per run() when the pool
// filled the machine, measured on a 2-core VM; ~5 us now.) run() is not reentrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
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

struct ThreadPoolOptions {
  int threads = 0;    // 0: one per core; fewer are spread round-robin over the nodes
  bool pin = true;    // pin each worker to its core (ignored for synthetic topologies)
  int spin_us = 50;   // how long an idle worker spins before sleeping
  // How long run()'s caller waits for the workers by polite spinning before it sleeps: a futex
  // wake-up of a halted vCPU costs 10-20 us on a VM, a tenth of a 200 us GEMV call. Yielding, the
  // caller takes little from a worker that shares its core; on an oversubscribed machine it
  // still burns up to this long per run().
  int caller_spin_us = 1000;
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

  std::vector<WorkerInfo> workers_;
  std::vector<int> cpus_;
  std::vector<int> group_sizes_;
  int spin_us_ = 50;
  int caller_spin_us_ = 1000;
  std::vector<std::thread> threads_;

  // The current job; written by run_impl before the generation is bumped.
  Trampoline job_ = nullptr;
  void* job_ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<bool> stop_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace hymoe::cpu
