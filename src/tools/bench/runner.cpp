#include "runner.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "hymoe/common/error.h"
#include "progress.h"

namespace hymoe::bench {

RunResult run_jobs(const OpenAiClient& base, const std::vector<Job>& jobs,
                   const RunOptions& options) {
  HYMOE_CHECK(!options.max_concurrency || *options.max_concurrency > 0, kInvalidArgument,
              "--max-concurrency must be greater than 0");
  RunResult result;
  result.outputs.resize(jobs.size());
  if (jobs.empty()) return result;
  constexpr std::size_t kMaxThreads = 4096;
  const std::size_t workers = std::min(
      jobs.size(), options.max_concurrency ? static_cast<std::size_t>(*options.max_concurrency)
                                           : jobs.size());
  HYMOE_CHECK(workers <= kMaxThreads, kInvalidArgument,
              "{} requests in flight at once is more than {} threads; set --max-concurrency",
              workers, kMaxThreads);

  const auto t0 = Clock::now();
  const OpenAiClient client(base.config(), t0);
  ProgressLine progress("", static_cast<int>(jobs.size()), options.progress);

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::size_t> ready;  // arrived jobs waiting for a worker
  bool all_dispatched = false;

  auto worker = [&] {
    Connection connection;  // kept alive across this worker's requests
    for (;;) {
      std::size_t i;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return !ready.empty() || all_dispatched; });
        if (ready.empty()) return;
        i = ready.front();
        ready.pop_front();
      }
      progress.on_start();
      RequestOutput out = client.send(jobs[i].input, {}, &connection);
      out.client_queue_time = std::max(0.0, out.start_time - jobs[i].arrival_s);
      progress.on_finish(out);
      result.outputs[i] = std::move(out);
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (std::size_t w = 0; w < workers; ++w) threads.emplace_back(worker);

  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto when = t0 + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(jobs[i].arrival_s));
    std::this_thread::sleep_until(when);
    {
      std::lock_guard lock(mu);
      ready.push_back(i);
    }
    cv.notify_one();
  }
  {
    std::lock_guard lock(mu);
    all_dispatched = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  result.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return result;
}

}  // namespace hymoe::bench
