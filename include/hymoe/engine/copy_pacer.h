// CopyPacer: paces stream-loading prefill's host-to-device copies while decodes run (issue 43).
//
// SLP's expert copies read host DRAM at up to the PCIe rate, the DRAM the CPU experts of every
// decode step read too; with both at full speed the decode steps slow down. The pacer holds the
// decode path's time per output token (TPOT) to an objective by limiting the copies' rate: a token
// bucket on the loader's copy issue times (each copy starts no earlier than bytes / rate after the
// previous one), its rate adjusted from every pure decode step the scheduler reports (AIMD):
//   - a step slower than the objective while a long prefill runs: rate x decrease (the first time
//     from the copies' measured unpaced rate), never below min_rate, so the prefill always moves;
//   - a step faster than slack x objective: rate x increase; back at the unpaced rate: unpaced;
//   - no long prefill beside a step, or no decode step for idle_after_s: unpaced (no pacing when
//     nothing decodes).
// The objective: tpot_objective_s, or (0, auto) auto_factor x the decode step time measured with
// no long prefill beside it, per decode batch size (an EWMA; the nearest measured size stands in
// for one not yet seen). Until an objective is known the copies go unpaced.
// Thread-safe: the scheduler's loop reports steps, SLP's loader asks before each copy. Times are
// seconds of a monotonic clock (now()); the overloads taking now_s exist for tests.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace hymoe {

struct CopyPacerOptions {
  double tpot_objective_s = 0;  // 0: auto_factor x the measured solo decode step
  // Issue 43's target: TPOT beside a long prefill within 1.15x of decoding alone at the default
  // objective (the paper's SLP: 1.54x). AIMD holds the steps between slack x and 1x the objective,
  // so the objective sits below the target.
  double auto_factor = 1.1;
  double min_rate = 2e9;        // bytes/s: the floor (a 32K prompt's MoE layer streams ~11 GB)
  double max_rate = 64e9;       // bytes/s: above any PCIe 5 x16 link; the start when unmeasured
  double decrease = 0.7;
  double increase = 1.1;
  double slack = 0.85;          // steps under slack x objective let the rate grow
  double idle_after_s = 0.5;    // no decode step for this long: unpaced
  double ewma = 0.25;           // weight of a new sample in the measured averages
};

class CopyPacer {
 public:
  explicit CopyPacer(CopyPacerOptions options = {});

  // The scheduler's loop, after each main-path step that held decode tokens: its wall time, its
  // decode tokens (the batch), the prompt tokens beside them (steps with any are not judged:
  // their time is not a decode step's), whether a long prefill ran during it.
  void on_decode_step(double step_s, int64_t decode_tokens, int64_t prompt_tokens, bool long_running);
  void on_decode_step(double step_s, int64_t decode_tokens, int64_t prompt_tokens, bool long_running, double now_s);

  // The loader, before issuing a copy of `bytes`: seconds to wait first (0 when unpaced). Books
  // the bytes in the bucket: call once per copy.
  double delay_for(size_t bytes);
  double delay_for(size_t bytes, double now_s);
  // The loader waited `seconds` for a delay (less than asked when a cancel cut it short).
  void on_waited(double seconds);

  struct Stats {
    double objective_s = 0;   // the TPOT objective in force (0: none known yet)
    double rate = 0;          // bytes/s the copies may use; 0: unpaced
    double copy_rate = 0;     // the copies' measured unpaced issue rate (bytes/s; 0: unmeasured)
    double waited_s = 0;      // the loader's total wait for pacing: what pacing added to prefills
    int64_t paced_copies = 0; // copies that waited
    int64_t decreases = 0, increases = 0;
  };
  Stats stats() const;
  // The objective for a decode batch of `decode_tokens` (0 when none is known).
  double objective_s(int64_t decode_tokens) const;

  static double now();  // seconds of the monotonic clock the overloads without now_s use

 private:
  double objective_locked(int64_t decode_tokens) const;
  double unpaced_rate_locked() const;

  const CopyPacerOptions options_;
  mutable std::mutex mu_;
  static constexpr size_t kBatches = 65;     // solo step times for batches 1..64 (larger: 64)
  std::array<double, kBatches> solo_{};      // 0: not measured
  double rate_ = 0;                          // 0: unpaced
  double next_start_ = 0;                    // the bucket: the next copy's earliest start
  double last_decode_ = -1e300;              // time of the last decode step
  double last_copy_ = -1e300;                // time and size of the last unpaced copy request
  size_t last_bytes_ = 0;
  double copy_rate_ = 0;
  double last_objective_ = 0;
  Stats stats_;
};

}  // namespace hymoe
