#include "hymoe/cpu/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <chrono>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"

namespace hymoe::cpu {
namespace {

inline void cpu_relax() { __builtin_ia32_pause(); }

bool pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

}  // namespace

ThreadPool::ThreadPool(const Topology& topology, const ThreadPoolOptions& options)
    : spin_us_(options.spin_us), caller_spin_us_(options.caller_spin_us) {
  const int cores = topology.num_cores();
  const int want = options.threads > 0 ? options.threads : cores;
  HYMOE_CHECK(want <= cores, kInvalidArgument, "thread pool: {} threads but {} cores ({})", want,
              cores, topology.describe());
  // Round-robin over nodes so that every node gets workers even when threads < cores.
  const int n_nodes = topology.num_nodes();
  std::vector<int> per_node(n_nodes, 0);
  for (int t = 0, node = 0; t < want; node = (node + 1) % n_nodes) {
    if (per_node[node] < static_cast<int>(topology.nodes()[node].cpus.size())) {
      ++per_node[node];
      ++t;
    }
  }
  const bool pin = options.pin && topology.is_this_system();
  for (int node = 0; node < n_nodes; ++node) {
    if (per_node[node] == 0) continue;
    const int group = static_cast<int>(group_sizes_.size());
    group_sizes_.push_back(per_node[node]);
    for (int i = 0; i < per_node[node]; ++i) {
      WorkerInfo w;
      w.index = static_cast<int>(workers_.size());
      w.node = group;
      w.index_in_node = i;
      w.threads_in_node = per_node[node];
      workers_.push_back(w);
      cpus_.push_back(pin ? topology.nodes()[node].cpus[i] : -1);
    }
  }
  threads_.reserve(workers_.size());
  for (int i = 0; i < size(); ++i) threads_.emplace_back([this, i] { worker_loop(i); });
  log::get("moe")->debug("thread pool: {} workers in {} groups ({}), pinned: {}", size(),
                         num_groups(), topology.describe(), pin);
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::run_impl(Trampoline fn, void* ctx) {
  job_ = fn;
  job_ctx_ = ctx;
  error_ = nullptr;
  pending_.store(size(), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(caller_spin_us_);
  for (int i = 0, left = pending_.load(std::memory_order_acquire); left != 0;
       ++i, left = pending_.load(std::memory_order_acquire)) {
    if ((i & 63) != 63) {
      cpu_relax();
    } else if (std::chrono::steady_clock::now() > spin_until) {
      pending_.wait(left, std::memory_order_acquire);
    } else {
      sched_yield();
    }
  }
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker_loop(int index) {
  if (cpus_[index] >= 0 && !pin_to_cpu(cpus_[index])) {
    log::get("moe")->warn("thread pool: could not pin worker {} to cpu {}", index, cpus_[index]);
  }
  const WorkerInfo& me = workers_[index];
  uint32_t seen = 0;
  for (;;) {
    // Spin for a while, then sleep until the generation moves.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen; ++i) {
      if ((i & 63) != 63) {
        cpu_relax();
      } else if (std::chrono::steady_clock::now() > spin_until) {
        generation_.wait(seen, std::memory_order_acquire);
      } else {
        // Every few microseconds of spinning, let another thread of this core run: the thread
        // that called run() is not pinned and often shares a worker's core (always when the
        // pool has a worker on every core). Without the yield it waited out the whole spin.
        sched_yield();
      }
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    try {
      job_(job_ctx_, me);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace hymoe::cpu
