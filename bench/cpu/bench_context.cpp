#include "bench_context.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include "hymoe/common/error.h"
#include "hymoe/cpu/parallel_rows.h"

namespace hymoe::bench {

HugeBuffer::HugeBuffer(size_t bytes) : bytes_(bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  HYMOE_CHECK(p != MAP_FAILED, kResourceExhausted, "bench: mmap of {} bytes failed", bytes);
  madvise(p, bytes, MADV_HUGEPAGE);
  data_ = static_cast<std::byte*>(p);
}

HugeBuffer::~HugeBuffer() { munmap(data_, bytes_); }

BenchContext::BenchContext() : topology_(cpu::Topology::detect()) {
  const int cores = topology_.num_cores();
  for (int t = 1; t <= 16 && t <= cores; t *= 2) thread_counts_.push_back(t);
  if (cores > 16 || thread_counts_.back() != cores) {
    if (cores <= 16) thread_counts_.push_back(cores);
  }
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  l3_bytes_ = l3 > 0 ? static_cast<size_t>(l3) : size_t{32} << 20;
}

cpu::ThreadPool& BenchContext::pool(int threads, cpu::CallerWait wait) {
  auto& p = pools_[{threads, wait}];
  if (!p) {
    cpu::ThreadPoolOptions o;
    o.threads = threads;
    o.caller_wait = wait;
    p = std::make_unique<cpu::ThreadPool>(topology_, o);
  }
  return *p;
}

double BenchContext::probe_gbps(int threads) const {
  auto it = probe_.find(threads);
  return it == probe_.end() ? 0.0 : it->second;
}

size_t BenchContext::mem_available_bytes() const {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return size_t{8} << 30;
}

size_t BenchContext::streaming_bytes() const { return std::max(size_t{1} << 30, 4 * l3_bytes_); }

void BenchContext::put(Record r) {
  for (Record& old : records_) {
    if (old.name == r.name && old.threads == r.threads) {
      old = std::move(r);
      return;
    }
  }
  records_.push_back(std::move(r));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void PairedRounds::set_counters(benchmark::State& state) const {
  state.counters["GBps"] = median(gbps);
  state.counters["probe"] = median(probe_gbps);
  state.counters["of_probe"] = median(ratios);
}

PairedProbe::PairedProbe(size_t bytes, cpu::ThreadPool& pool)
    : buf_(bytes / pool.size() / 4096 * 4096 * pool.size()), slice_(bytes / pool.size() / 4096 * 4096) {
  pool.run([&](const cpu::WorkerInfo& w) { fill_random_fp8(buf_.data() + w.index * slice_, slice_, 99 + w.index); });
}

PairedProbe& PairedProbe::get(BenchContext& ctx, size_t bytes, int threads) {
  return ctx.cached<PairedProbe>("paired_probe", std::to_string(bytes) + "/" + std::to_string(threads),
                                 [&] { return new PairedProbe(bytes, ctx.pool(threads)); });
}

double PairedProbe::read_seconds(cpu::ThreadPool& pool) {
  const auto t0 = std::chrono::steady_clock::now();
  pool.run([&](const cpu::WorkerInfo& w) {
    if (read_probe_slice(buf_.data() + w.index * slice_, slice_) == 42) sink_ = 42;  // keeps the reads
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double PairedProbe::read_split_seconds(cpu::ThreadPool& pool) {
  constexpr int64_t kUnit = 64 * 1024;  // 16 pages: a piece is whole pages, as a slice
  const auto t0 = std::chrono::steady_clock::now();
  cpu::parallel_rows(pool, static_cast<int64_t>(buf_.size()) / 4096, kUnit / 4096, [&](int64_t b, int64_t e) {
    if (read_probe_slice(buf_.data() + b * 4096, static_cast<size_t>(e - b) * 4096) == 42) sink_ = 42;
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double PairedProbe::read_part_seconds(cpu::ThreadPool& pool, int part, int parts) {
  const size_t piece = slice_ / parts / 4096 * 4096;
  const auto t0 = std::chrono::steady_clock::now();
  pool.run([&](const cpu::WorkerInfo& w) {
    if (read_probe_slice(buf_.data() + w.index * slice_ + part * piece, piece) == 42) sink_ = 42;
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void fill_random_fp8(std::byte* p, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    // Clear bit 0 of each byte's magnitude field whenever it would make 0x7F: simpler to clear
    // bit 6 of every byte (exponent < 8: values up to 1.875, no NaN code possible). Set bit 3
    // (exponent >= 1: no zero or subnormal code), then one subnormal code per 4 KB: a quantised
    // checkpoint's rate of exponent-0 codes (~2e-4), which the shift decode corrects one by one
    // (hymoe/kernels/fp8_special_codes.h). The decodes' speed depends on nothing else.
    uint64_t v = (s & 0xBFBFBFBFBFBFBFBFull) | 0x0808080808080808ull;
    if (i % 4096 == 0) v = (v & ~uint64_t{0xFF}) | (s >> 61);  // 0x00..0x07
    __builtin_memcpy(p + i, &v, 8);
  }
  for (; i < n; ++i) p[i] = std::byte{0x38};
}

}  // namespace hymoe::bench
