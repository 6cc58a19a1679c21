// Runs a body once per rank, each on its own thread (the ranks of an in-process or NCCL group),
// and rethrows the first exception after all have joined.
#pragma once

#include <exception>
#include <thread>
#include <vector>

namespace hymoe::test {

template <typename Fn>
void on_ranks(int ranks, Fn fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace hymoe::test
