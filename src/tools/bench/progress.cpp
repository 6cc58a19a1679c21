#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace hymoe::bench {

ProgressLine::ProgressLine(std::string label, int total, bool enabled)
    : label_(std::move(label)), total_(total) {
  if (enabled && isatty(STDERR_FILENO)) thread_ = std::thread([this] { draw_loop(); });
}

ProgressLine::~ProgressLine() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::fprintf(stderr, "\r%s\n", line().c_str());
}

void ProgressLine::on_finish(const RequestOutput& o) {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  done_.fetch_add(1, std::memory_order_relaxed);
  if (!o.success) failed_.fetch_add(1, std::memory_order_relaxed);
  tokens_.fetch_add(o.success ? o.output_tokens : 0, std::memory_order_relaxed);
}

std::string ProgressLine::line() const {
  const double t = std::chrono::duration<double>(Clock::now() - start_).count();
  const int done = done_.load(), failed = failed_.load();
  const int width = static_cast<int>(fmt::formatted_size("{}", total_));
  return fmt::format("{}[{:>{}}/{}] ok {} fail {} | in flight {} | {:.2f} req/s | {:.1f} tok/s | "
                     "{:.1f} s",
                     label_.empty() ? "" : label_ + " ", done, width, total_, done - failed,
                     failed, in_flight_.load(), t > 0 ? done / t : 0.0,
                     t > 0 ? static_cast<double>(tokens_.load()) / t : 0.0, t);
}

void ProgressLine::draw_loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    std::fprintf(stderr, "\r%s\033[K", line().c_str());
    std::fflush(stderr);
    cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

}  // namespace hymoe::bench
