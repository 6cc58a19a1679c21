// The harness of hymoe-bench-gpu, shared by its sections: a record of the printed table and JSON
// output, the timer (CUDA events around batches of back-to-back launches), device buffers of
// random values (device-side hash fill, never zeros), the ceilings measured first, and the
// timing of an enqueue replayed as a captured CUDA graph. Figures timed in the steady state carry
// the SM clock they ran at (SmClockProbe).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "hymoe/gpu/buffer.h"
#include "hymoe/gpu/sm_clock.h"
#include "hymoe/gpu/stream.h"

namespace hymoe::gpu::bench {

struct Record {
  std::string name;
  double value = 0.0;
  std::string unit;
  double ceiling = 0.0;  // 0: this record is itself a ceiling
  std::string ceiling_name;
  double sm_mhz = 0.0;  // > 0: the SM clock it ran at (steady-state figures; JSON "sm_mhz")
};

// The median of a few timings.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class Bench {
 public:
  // Median milliseconds of one call of `enqueue` (which launches work on stream()): one warm-up
  // call, then 5 batches of ~20 ms (at least one call each). A GPU that was idle before runs the
  // first batches faster than a loaded one (see steady_ms).
  double time_ms(const std::function<void()>& enqueue) {
    enqueue();  // warm-up (module load, heuristics)
    const int reps = std::clamp(static_cast<int>(20.0 / call_ms(enqueue)), 1, 200);
    return median(batches_ms(enqueue, reps, 5));
  }
  // Median milliseconds of one call in the GPU's power-limited steady state: `enqueue` runs back
  // to back for kSettleMs first, then 7 batches of >= 40 ms. (The H200 runs FP8 GEMMs at its
  // power limit, SM clock 1.3-1.5 GHz under ncu against a 1.98 GHz boost: right after idle time
  // the first batches run faster, and time_ms read 2-10% above this on the grouped GEMM and the
  // FP8 ceiling: docs/experiments.md, grouped expert FP8 GEMM.)
  double steady_ms(const std::function<void()>& enqueue) {
    constexpr double kSettleMs = 500.0;
    double settled = 0.0, once = 1e30;
    while (settled < kSettleMs) {
      const double ms = call_ms(enqueue);
      settled += ms;
      once = std::min(once, ms);
    }
    const int reps = std::clamp(static_cast<int>(40.0 / once), 2, 400);
    // Each batch followed by a reading of the SM clock (SmClockProbe, 200 us): the median of
    // those is what the figure ran at (last_steady_mhz).
    std::vector<double> per_call, mhz;
    for (int batch = 0; batch < 7; ++batch) {
      per_call.push_back(batches_ms(enqueue, reps, 1)[0]);
      mhz.push_back(clock_.measure_mhz(stream_.get()));
    }
    last_steady_mhz_ = median(mhz);
    return median(per_call);
  }
  // The SM clock (MHz) over steady_ms's last measured batches, their median; 0 before any.
  double last_steady_mhz() const { return last_steady_mhz_; }

  // A record of the table and the JSON.
  void add(Record r) {
    const double ratio = r.ceiling > 0 ? r.value / r.ceiling : 0.0;
    std::printf("%-52s %10.1f %-8s", r.name.c_str(), r.value, r.unit.c_str());
    if (r.ceiling > 0) std::printf(" %5.1f%% of %s", 100.0 * ratio, r.ceiling_name.c_str());
    if (r.sm_mhz > 0) std::printf("  at %.0f MHz", r.sm_mhz);
    std::printf("\n");
    std::fflush(stdout);
    records_.push_back(std::move(r));
  }

  nlohmann::json json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const Record& r : records_) {
      nlohmann::json j = {{"name", r.name}, {"value", r.value}, {"unit", r.unit}};
      if (r.sm_mhz > 0) j["sm_mhz"] = r.sm_mhz;
      if (r.ceiling > 0) {
        j["ceiling"] = r.ceiling;
        j["ceiling_name"] = r.ceiling_name;
        j["ratio"] = r.value / r.ceiling;
      } else {
        j["ceiling"] = nullptr;
        j["ratio"] = nullptr;
      }
      out.push_back(j);
    }
    return out;
  }

  cudaStream_t stream() const { return stream_.get(); }

 private:
  // Milliseconds of one call, and per call of `batches` batches of `reps` back-to-back calls.
  double call_ms(const std::function<void()>& enqueue) {
    Event a, b;
    a.record(stream_);
    enqueue();
    b.record(stream_);
    b.synchronize();
    return std::max(1e-3, double{Event::elapsed_ms(a, b)});
  }
  std::vector<double> batches_ms(const std::function<void()>& enqueue, int reps, int batches) {
    Event a, b;
    std::vector<double> per_call;
    for (int batch = 0; batch < batches; ++batch) {
      a.record(stream_);
      for (int r = 0; r < reps; ++r) enqueue();
      b.record(stream_);
      b.synchronize();
      per_call.push_back(Event::elapsed_ms(a, b) / reps);
    }
    return per_call;
  }

  Stream stream_;
  SmClockProbe clock_;
  double last_steady_mhz_ = 0.0;
  std::vector<Record> records_;
};

// A new seed for a random fill (one sequence per process, so every run fills the same values).
uint64_t next_seed();

// Buffers of count random values, a new seed each call (bench_fill.h): FP8 codes of every finite
// value, BF16 uniform in [-1, 1), FP32 uniform in [lo, hi).
DeviceBuffer random_fp8(size_t count, cudaStream_t s);
DeviceBuffer random_bf16(size_t count, cudaStream_t s);
DeviceBuffer random_f32(size_t count, float lo, float hi, cudaStream_t s);

// The ceilings of every figure, measured at the start of the run (gpu_bench.cpp).
struct Ceilings {
  double copy_gbs = 0, bf16_tflops = 0, fp8_tflops = 0;
};

// Milliseconds of one enqueue (a chain of launches, a few calls), from the stream or replayed as
// one captured CUDA graph; 0 where the graph cannot be captured (said on stdout, as `label`).
// steady: timed by Bench::steady_ms (the power-limited steady state) instead of time_ms.
double time_enqueue(Bench& bench, const std::string& label, bool graph,
                    const std::function<void()>& enqueue, bool steady = false);

}  // namespace hymoe::gpu::bench
