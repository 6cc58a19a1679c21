// Sends a workload: each job at its arrival time (seconds after the start), at most
// max_concurrency in flight (later arrivals wait for a slot, their wait recorded as
// client_queue_time), one worker thread per slot. A progress line redraws on a terminal.
#pragma once

#include <optional>
#include <vector>

#include "client.h"

namespace hymoe::bench {

struct Job {
  RequestInput input;
  double arrival_s = 0;
};

struct RunOptions {
  std::optional<int> max_concurrency;  // unset: every job runs at its arrival
  bool progress = true;                // draw the progress line when stderr is a terminal
};

struct RunResult {
  std::vector<RequestOutput> outputs;  // in job order
  double duration_s = 0;               // start to the last completion
};

// Runs the jobs with a copy of `client` whose clock starts now. Never throws for request
// failures (they are in the outputs); throws hymoe::Error for bad options.
RunResult run_jobs(const OpenAiClient& client, const std::vector<Job>& jobs,
                   const RunOptions& options);

}  // namespace hymoe::bench
