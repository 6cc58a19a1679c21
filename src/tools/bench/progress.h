// The live progress line on a terminal: "[ 42/100] ok 40 fail 2 | in flight 8 | 3.1 req/s |
// 512 tok/s | 13.5 s". Redrawn by its own thread every 200 ms while enabled; silent (no thread)
// when stderr is not a terminal or it is disabled.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "client.h"

namespace hymoe::bench {

class ProgressLine {
 public:
  ProgressLine(std::string label, int total, bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void on_start() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  void on_finish(const RequestOutput& o);

  // The current line (also used by tests and logs).
  std::string line() const;

 private:
  void draw_loop();

  std::string label_;
  int total_;
  Clock::time_point start_ = Clock::now();
  std::atomic<int> done_{0}, failed_{0}, in_flight_{0};
  std::atomic<long long> tokens_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hymoe::bench
