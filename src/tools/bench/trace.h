// Workloads as lists of requests: Mooncake-format JSONL traces and synthetic random lengths.
//
// A Mooncake trace line is one JSON object:
//   {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}
// timestamp: arrival in milliseconds from the start of the trace (non-decreasing is not required;
// requests are sorted by it); input_length/output_length: token counts; hash_ids (optional): ids
// of the prompt's blocks of `block_size` tokens (Mooncake uses 512), equal ids mean a shared
// prefix; prompt (optional, an extension): the literal prompt text, sent as is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hymoe::bench {

// One request to send.
struct RequestSpec {
  std::optional<double> arrival_s;  // seconds after the start (traces); unset: from arrivals
  int input_len = 0;                // prompt tokens wanted (> 0 unless prompt is given)
  int output_len = 0;               // max_tokens (> 0)
  std::vector<std::int64_t> hash_ids;  // prompt blocks for shared prefixes (may be empty)
  std::optional<std::string> prompt;   // literal prompt text (trace extension)
};

// Parses JSONL trace text. `source` names the input in errors ("trace.jsonl:17: ...").
// Blank lines and lines starting with '#' are skipped. Throws hymoe::Error (kCorruptData) on the
// first bad line with its 1-based line number and what is wrong: not JSON, not an object, a
// missing or non-numeric field, a negative or non-finite value, a zero output_length.
// The result is in file order; use sort_by_arrival() to order it.
std::vector<RequestSpec> parse_trace(std::string_view text, std::string_view source);

// Reads and parses a trace file; throws hymoe::Error (kNotFound / kIo / kCorruptData).
std::vector<RequestSpec> load_trace(const std::string& path);

// Stable sort by arrival time (requests without one keep their place at time 0).
void sort_by_arrival(std::vector<RequestSpec>& requests);

// vLLM's random dataset lengths: input and output lengths drawn uniformly from
// [len * (1 - range_ratio), len * (1 + range_ratio)] (rounded, at least 1), with a fixed seed.
struct RandomLengths {
  int num_prompts = 1000;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0.0;  // in [0, 1)
  std::uint64_t seed = 0;
};
std::vector<RequestSpec> random_requests(const RandomLengths& config);

}  // namespace hymoe::bench
