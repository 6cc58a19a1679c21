// Encode throughput of the tokenizer on a corpus file, one core (or N threads, each on its own
// share of the documents). The JavaScript reference runs beside it in scripts/bench-tokenizer.
//   hymoe-bench-tokenizer --model DIR --corpus FILE [--threads N] [--min-seconds S]
// Prints one JSON object: {name, threads, value (MB/s, steady state), cold_value (MB/s of the
// first pass, one thread, empty piece cache), per_cpu_second (MB per CPU-second), unit, bytes,
// tokens, seconds}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "hymoe/tokenizer/tokenizer.h"

namespace {

// Documents of about 4 KiB cut at line ends: the size of a typical prompt chunk.
std::vector<std::string> split_documents(const std::string& corpus) {
  std::vector<std::string> docs;
  size_t at = 0;
  while (at < corpus.size()) {
    size_t end = std::min(corpus.size(), at + 4096);
    const size_t nl = corpus.find('\n', end);
    end = nl == std::string::npos ? corpus.size() : nl + 1;
    docs.push_back(corpus.substr(at, end - at));
    at = end;
  }
  return docs;
}

// CPU seconds used by this process so far (user + system, all threads).
double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, corpus_path;
  int threads = 1;
  double min_seconds = 3.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--corpus")) corpus_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--min-seconds")) min_seconds = std::atof(argv[i + 1]);
  }
  if (model.empty() || corpus_path.empty() || threads < 1) {
    std::fprintf(stderr, "usage: %s --model DIR --corpus FILE [--threads N] [--min-seconds S]\n",
                 argv[0]);
    return 2;
  }
  try {
    auto tok = hymoe::tokenizer::Tokenizer::load(model);
    std::ifstream in(corpus_path, std::ios::binary);
    HYMOE_CHECK(in, kNotFound, "{}: cannot open", corpus_path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string corpus = ss.str();
    const auto docs = split_documents(corpus);

    // First pass on the freshly loaded tokenizer (its piece cache empty): the cold figure, and
    // the token count.
    using clock = std::chrono::steady_clock;
    size_t tokens = 0;
    const auto c0 = clock::now();
    for (const auto& d : docs) tokens += tok->encode(d, false).size();
    const double cold_seconds = std::chrono::duration<double>(clock::now() - c0).count();

    size_t passes = 0;
    const double cpu0 = cpu_seconds();
    const auto t0 = clock::now();
    double elapsed = 0;
    do {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          size_t sink = 0;
          for (size_t i = t; i < docs.size(); i += threads) sink += tok->encode(docs[i], false).size();
          if (sink == 0) std::abort();  // keeps the work observable
        });
      }
      for (auto& th : pool) th.join();
      ++passes;
      elapsed = std::chrono::duration<double>(clock::now() - t0).count();
    } while (elapsed < min_seconds);
    const double mbps = double(corpus.size()) * passes / elapsed / 1e6;
    // MB per CPU-second: what one core does when the machine is shared (other jobs take wall time).
    const double cpu_mbps = double(corpus.size()) * passes / (cpu_seconds() - cpu0) / 1e6;
    nlohmann::json out = {{"name", "tokenizer_encode_" + std::string(tok->format())},
                          {"threads", threads}, {"value", mbps}, {"unit", "MB/s"},
                          {"cold_value", double(corpus.size()) / cold_seconds / 1e6},
                          {"per_cpu_second", cpu_mbps},
                          {"bytes", corpus.size()}, {"tokens", tokens}, {"passes", passes},
                          {"seconds", elapsed}};
    std::printf("%s\n", out.dump().c_str());
  } catch (const hymoe::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
