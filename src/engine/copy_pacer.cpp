#include "hymoe/engine/copy_pacer.h"

#include <algorithm>
#include <chrono>

namespace hymoe {

CopyPacer::CopyPacer(CopyPacerOptions options) : options_(options) {}

double CopyPacer::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void CopyPacer::on_decode_step(double step_s, int64_t decode_tokens, int64_t prompt_tokens, bool long_running) {
  on_decode_step(step_s, decode_tokens, prompt_tokens, long_running, now());
}

double CopyPacer::objective_locked(int64_t decode_tokens) const {
  if (options_.tpot_objective_s > 0) return options_.tpot_objective_s;
  const size_t want = static_cast<size_t>(std::clamp<int64_t>(decode_tokens, 1, kBatches - 1));
  // The nearest measured batch size (the smaller one on a tie).
  for (size_t d = 0; d < kBatches; ++d) {
    if (want >= d + 1 && solo_[want - d] > 0) return options_.auto_factor * solo_[want - d];
    if (want + d < kBatches && solo_[want + d] > 0) return options_.auto_factor * solo_[want + d];
  }
  return 0;
}

double CopyPacer::objective_s(int64_t decode_tokens) const {
  std::lock_guard lock(mu_);
  return objective_locked(decode_tokens);
}

double CopyPacer::unpaced_rate_locked() const {
  return copy_rate_ > 0 ? std::min(copy_rate_, options_.max_rate) : options_.max_rate;
}

void CopyPacer::on_decode_step(double step_s, int64_t decode_tokens, int64_t prompt_tokens, bool long_running,
                               double now_s) {
  std::lock_guard lock(mu_);
  last_decode_ = now_s;
  if (decode_tokens <= 0 || prompt_tokens > 0 || !(step_s > 0)) return;  // not a pure decode step
  if (!long_running) {
    double& solo = solo_[static_cast<size_t>(std::clamp<int64_t>(decode_tokens, 1, kBatches - 1))];
    solo = solo > 0 ? solo + options_.ewma * (step_s - solo) : step_s;
    rate_ = 0;  // nothing streams beside it
    return;
  }
  const double objective = objective_locked(decode_tokens);
  last_objective_ = objective;
  if (objective <= 0) return;
  if (step_s > objective) {
    const double base = rate_ > 0 ? rate_ : unpaced_rate_locked();
    rate_ = std::max(options_.min_rate, base * options_.decrease);
    ++stats_.decreases;
  } else if (rate_ > 0 && step_s < options_.slack * objective) {
    rate_ *= options_.increase;
    ++stats_.increases;
    if (rate_ >= unpaced_rate_locked()) rate_ = 0;
  }
}

double CopyPacer::delay_for(size_t bytes) { return delay_for(bytes, now()); }

double CopyPacer::delay_for(size_t bytes, double now_s) {
  std::lock_guard lock(mu_);
  if (rate_ > 0 && now_s - last_decode_ > options_.idle_after_s) rate_ = 0;  // nothing decodes
  if (rate_ <= 0) {
    // The unpaced issue rate: bytes of the previous request over the time since it.
    const double gap = now_s - last_copy_;
    if (gap > 0 && gap < 1.0 && last_bytes_ > 0) {
      const double inst = static_cast<double>(last_bytes_) / gap;
      copy_rate_ = copy_rate_ > 0 ? copy_rate_ + options_.ewma * (inst - copy_rate_) : inst;
    }
    last_copy_ = now_s;
    last_bytes_ = bytes;
    next_start_ = now_s;
    return 0;
  }
  last_copy_ = -1e300;  // the next unpaced request starts a new measurement
  const double start = std::max(now_s, next_start_);
  next_start_ = start + static_cast<double>(bytes) / rate_;
  const double delay = start - now_s;
  if (delay > 0) ++stats_.paced_copies;
  return delay;
}

void CopyPacer::on_waited(double seconds) {
  std::lock_guard lock(mu_);
  stats_.waited_s += seconds;
}

CopyPacer::Stats CopyPacer::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.rate = rate_;
  s.copy_rate = copy_rate_;
  s.objective_s = last_objective_;
  return s;
}

}  // namespace hymoe
