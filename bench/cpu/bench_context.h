// Shared state of the CPU benchmarks: thread pools per thread count, the read-bandwidth probe's
// results (the ceiling of every memory-bound figure), big huge-page buffers, and the summary
// records that scripts/bench-cpu prints and writes as JSON.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hymoe/cpu/thread_pool.h"
#include "hymoe/cpu/topology.h"

namespace hymoe::bench {

// How run()'s caller waits in a pool built with default options (what the engine runs).
inline constexpr cpu::CallerWait kDefaultCallerWait = cpu::ThreadPoolOptions{}.caller_wait;

// One line of the summary: value against its ceiling measured in the same run.
struct Record {
  std::string name;
  int threads = 0;
  double value = 0;
  std::string unit;
  double ceiling = 0;
  double ratio = 0;  // value / ceiling, or as the record's name says
  std::string note;
};

// Anonymous memory with transparent huge pages, unmapped on destruction. Untouched on return:
// the first thread to write a page places it on its NUMA node.
class HugeBuffer {
 public:
  explicit HugeBuffer(size_t bytes);
  ~HugeBuffer();
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  std::byte* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

class BenchContext {
 public:
  BenchContext();
  const cpu::Topology& topology() const { return topology_; }
  // 1, 2, 4, 8, 16 up to the number of cores (and the core count itself when not a power of 2).
  const std::vector<int>& thread_counts() const { return thread_counts_; }
  int max_threads() const { return thread_counts_.back(); }
  // The pool of `threads` workers whose run() caller waits as `wait` says, otherwise with the
  // pool's default options (as the engine builds it). The default wait gives the pool every case
  // uses; the others are for the caller-wait variants only, built on first use.
  cpu::ThreadPool& pool(int threads, cpu::CallerWait wait = kDefaultCallerWait);

  // Set by the probe benchmark, read by the others (GB/s; 0 when the probe has not run).
  void set_probe_gbps(int threads, double gbps) { probe_[threads] = gbps; }
  double probe_gbps(int threads) const;

  size_t l3_bytes() const { return l3_bytes_; }
  size_t mem_available_bytes() const;
  // Bytes that defeat the last-level cache: max(1 GiB, 4 x L3).
  size_t streaming_bytes() const;

  // One object per family, kept across the repeated calls Google Benchmark makes; asking for
  // another key of the same family frees the old object first (bounds the memory held).
  template <typename T, typename Make>
  T& cached(const std::string& family, const std::string& key, Make&& make) {
    Slot& slot = cache_[family];
    if (slot.key != key || !slot.object) {
      slot.object.reset();
      slot.object = std::shared_ptr<T>(make());
      slot.key = key;
    }
    return *static_cast<T*>(slot.object.get());
  }
  void drop(const std::string& family) { cache_.erase(family); }

  void put(Record r);
  const std::vector<Record>& records() const { return records_; }

 private:
  cpu::Topology topology_;
  std::vector<int> thread_counts_;
  std::map<std::pair<int, cpu::CallerWait>, std::unique_ptr<cpu::ThreadPool>> pools_;
  std::map<int, double> probe_;
  size_t l3_bytes_ = 0;
  std::vector<Record> records_;
  struct Slot {
    std::string key;
    std::shared_ptr<void> object;
  };
  std::map<std::string, Slot> cache_;
};

// The read probe paired with a case: a buffer of `bytes` (as many as one round of the case reads),
// one slice per worker of the pool, each first-touched by the worker that reads it. Cached in
// the context as family "paired_probe" (dropped by the cases that need the memory).
class PairedProbe {
 public:
  PairedProbe(size_t bytes, cpu::ThreadPool& pool);
  static PairedProbe& get(BenchContext& ctx, size_t bytes, int threads);
  size_t bytes() const { return buf_.size(); }
  // One pass of every worker over its slice (the probe's loop); returns the seconds.
  double read_seconds(cpu::ThreadPool& pool);
  double read_gbps(cpu::ThreadPool& pool) { return static_cast<double>(bytes()) / read_seconds(pool) / 1e9; }
  // The same bytes split as cpu::parallel_rows splits rows (RowSplit: each worker the first three
  // quarters of its slice, the tails in pieces from one counter), the ceiling of the cases that
  // share their tails the same way (records *_tail): a core the host slowed holds neither.
  double read_split_seconds(cpu::ThreadPool& pool);
  // Piece `part` of `parts` of every worker's slice (parts pieces of slice / parts bytes, rounded
  // down to 4 KB); returns the seconds. part_bytes(parts): the bytes one such call reads.
  double read_part_seconds(cpu::ThreadPool& pool, int part, int parts);
  size_t part_bytes(cpu::ThreadPool& pool, int parts) const { return slice_ / parts / 4096 * 4096 * pool.size(); }

 private:
  HugeBuffer buf_;
  size_t slice_;
  uint64_t sink_ = 0;
};

// Registration of each benchmark family (in this order: the probe first).
void register_bandwidth(BenchContext& ctx);
void register_pool(BenchContext& ctx);
void register_gemv(BenchContext& ctx);
void register_bf16_gemv(BenchContext& ctx);
void register_op_rate(BenchContext& ctx);
void register_openblas(BenchContext& ctx);
void register_moe(BenchContext& ctx);
void register_gemm(BenchContext& ctx);
void register_mla(BenchContext& ctx);

// The register-only vdpbf16ps loop on every worker of the max-threads pool (TFLOP/s; 0 where the
// CPU lacks AVX512-BF16): the compute ceiling of the BF16 kernels. Measured once per run.
double dpbf16_peak_tflops(BenchContext& ctx);

// The probe's read loop over one thread's slice of n bytes (4 streams of AVX-512 loads, AVX2
// where there is no AVX-512); returns a checksum so the loads are kept.
uint64_t read_probe_slice(const std::byte* p, size_t n);

// The median of v (0 when empty).
double median(std::vector<double> v);

// The measured rounds of a case paired with the probe: per benchmark iteration one probe round,
// then one round of the case (its seconds the iteration's manual time); GB/s of each over its
// bytes and their per-round ratio. median() of each is the record's value, ceiling and ratio.
struct PairedRounds {
  std::vector<double> gbps, probe_gbps, ratios;
  // Sets the counters GBps, probe and of_probe (the medians).
  void set_counters(benchmark::State& state) const;
};
template <typename ProbeRound, typename CaseRound>
PairedRounds paired_rounds(benchmark::State& state, double probe_bytes, double case_bytes,
                           ProbeRound&& probe_round, CaseRound&& case_round) {
  PairedRounds r;
  for (auto _ : state) {
    const double tp = probe_round();
    const double tc = case_round();
    state.SetIterationTime(tc);
    r.probe_gbps.push_back(probe_bytes / tp / 1e9);
    r.gbps.push_back(case_bytes / tc / 1e9);
    r.ratios.push_back(r.gbps.back() / r.probe_gbps.back());
  }
  return r;
}

// Fills n bytes with random FP8 codes (no NaN codes), deterministic per seed.
void fill_random_fp8(std::byte* p, size_t n, uint64_t seed);

}  // namespace hymoe::bench
