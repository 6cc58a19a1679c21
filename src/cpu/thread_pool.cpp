#include "hymoe/cpu/thread_pool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <set>

#include "hymoe/common/error.h"
#include "hymoe/common/log.h"

namespace hymoe::cpu {
namespace {

inline void cpu_relax() { __builtin_ia32_pause(); }

// The futex calls on a 32-bit atomic (its object representation is the integer on Linux).
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>& word, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

bool pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

}  // namespace

const char* caller_wait_name(CallerWait wait) {
  switch (wait) {
    case CallerWait::kAuto: return "auto";
    case CallerWait::kSpin: return "spin";
    case CallerWait::kSleep: return "sleep";
  }
  return "?";
}

ThreadPool::ThreadPool(const Topology& topology, const ThreadPoolOptions& options)
    : spin_us_(options.spin_us), caller_spin_us_(options.caller_spin_us) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
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
  caller_spin_limit_us_ = options.caller_wait == CallerWait::kSleep ? 0 : options.caller_spin_us;
  if (options.caller_wait == CallerWait::kAuto && pin) {
    // Spin briefly when the constructing thread (normally the one that calls run()) has no CPU
    // without a pinned worker.
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
      const std::set<int> used(cpus_.begin(), cpus_.end());
      bool free_cpu = false;
      for (int c = 0; c < CPU_SETSIZE && !free_cpu; ++c) free_cpu = CPU_ISSET(c, &allowed) && !used.contains(c);
      if (!free_cpu) caller_spin_limit_us_ = std::min(caller_spin_limit_us_, kSharedCallerSpinUs);
    }
    // Per run: a caller that finds itself on a worker's CPU spins briefly too.
    for (int c : cpus_) {
      if (c >= static_cast<int>(cpu_has_worker_.size())) cpu_has_worker_.resize(c + 1, 0);
      cpu_has_worker_[c] = 1;
    }
  }
  slots_ = std::make_unique<WorkerSlot[]>(workers_.size());
  threads_.reserve(workers_.size());
  for (int i = 0; i < size(); ++i) threads_.emplace_back([this, i] { worker_loop(i); });
  log::get("moe")->debug("thread pool: {} workers in {} groups ({}), pinned: {}, caller wait {}, spins <= {} us",
                         size(), num_groups(), topology.describe(), pin, caller_wait_name(options.caller_wait),
                         caller_spin_limit_us_);
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(generation_, INT_MAX);
  for (std::thread& t : threads_) t.join();
}

ThreadPoolStats ThreadPool::stats() const {
  ThreadPoolStats s{.runs = runs_, .worker_sleeps = 0, .caller_sleeps = caller_sleeps_};
  for (int i = 0; i < size(); ++i) s.worker_sleeps += slots_[i].sleeps.load(std::memory_order_relaxed);
  return s;
}

void ThreadPool::run_impl(Trampoline fn, void* ctx) {
  job_ = fn;
  job_ctx_ = ctx;
  error_ = nullptr;
  ++runs_;
  pending_.store(static_cast<uint32_t>(size()), std::memory_order_relaxed);
  // seq_cst store then load, against the worker's seq_cst increment of sleepers_ then load of
  // generation_: either the worker sees the new generation or this sees it counted (no lost wake).
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) != 0) futex_wake(generation_, INT_MAX);
  wait_for_workers();
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::wait_for_workers() {
  int spin_us = caller_spin_limit_us_;
  if (spin_us > kSharedCallerSpinUs && !cpu_has_worker_.empty()) {
    const int cpu = sched_getcpu();  // vDSO / rdtscp: tens of ns
    if (cpu >= 0 && cpu < static_cast<int>(cpu_has_worker_.size()) && cpu_has_worker_[cpu]) spin_us = kSharedCallerSpinUs;
  }
  if (spin_us > 0) {
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
    for (int i = 1; pending_.load(std::memory_order_acquire) != 0; ++i) {
      if ((i & 63) != 0) {
        cpu_relax();
      } else if (std::chrono::steady_clock::now() > spin_until) {
        break;
      } else {
        sched_yield();
      }
    }
  }
  if (pending_.load(std::memory_order_acquire) == 0) return;
  ++caller_sleeps_;
  caller_sleeping_.store(1, std::memory_order_seq_cst);
  for (uint32_t left = pending_.load(std::memory_order_seq_cst); left != 0;
       left = pending_.load(std::memory_order_seq_cst)) {
    futex_wait(pending_, left);
  }
  caller_sleeping_.store(0, std::memory_order_relaxed);
}

void ThreadPool::worker_loop(int index) {
  if (cpus_[index] >= 0 && !pin_to_cpu(cpus_[index])) {
    log::get("moe")->warn("thread pool: could not pin worker {} to cpu {}", index, cpus_[index]);
  }
  const WorkerInfo& me = workers_[index];
  WorkerSlot& slot = slots_[index];
  uint32_t seen = 0;
  for (;;) {
    // Spin for a while, then sleep until the generation moves.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 1; gen == seen; ++i) {
      if ((i & 63) != 0) {
        cpu_relax();
      } else if (std::chrono::steady_clock::now() > spin_until) {
        slot.sleeps.fetch_add(1, std::memory_order_relaxed);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        while ((gen = generation_.load(std::memory_order_seq_cst)) == seen) futex_wait(generation_, seen);
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        break;
      } else {
        // Every few microseconds of spinning, let another thread of this core run: the thread
        // that called run() is not pinned and may share a worker's core.
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
    // seq_cst decrement then load, against the caller's seq_cst store of caller_sleeping_ then
    // load of pending_ (no lost wake).
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        caller_sleeping_.load(std::memory_order_seq_cst) != 0) {
      futex_wake(pending_, 1);
    }
  }
}

}  // namespace hymoe::cpu
