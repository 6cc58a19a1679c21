// hymoe-bench-test-server: the integration tests' SSE server as a program, to try hymoe-bench
// without a model or to measure the harness itself. Prints "port N" and serves until SIGINT or
// SIGTERM. Usage: hymoe-bench-test-server [--token-us N] [--prefill-us-per-token N]
//                 [--slow-ms N] [--no-tokenize]
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "sse_test_server.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  hymoe::bench::testing::TestServerConfig cfg;
  for (int i = 1; i < argc; ++i) {
    auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (!std::strcmp(argv[i], "--token-us")) cfg.token_us = value();
    else if (!std::strcmp(argv[i], "--prefill-us-per-token")) cfg.prefill_us_per_token = value();
    else if (!std::strcmp(argv[i], "--slow-ms")) cfg.slow_ms = value();
    else if (!std::strcmp(argv[i], "--no-tokenize")) cfg.tokenize = false;
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  hymoe::bench::testing::TestServer server(cfg);
  std::printf("port %d\n", server.port());
  std::fflush(stdout);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return 0;
}
