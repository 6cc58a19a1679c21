#include "hymoe/server/server_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"

namespace hymoe::server {
namespace {

struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& text) {
    path = std::filesystem::temp_directory_path() / ("hymoe_cfg_" + std::to_string(::getpid()) + ".json");
    std::ofstream(path) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

ServerConfig parse(std::vector<std::string> args) {
  std::vector<const char*> argv = {"hymoe-server"};
  for (auto& a : args) argv.push_back(a.c_str());
  CLI::App app;
  ServerConfig c;
  parse_server_command_line(app, c, static_cast<int>(argv.size()), argv.data());
  return c;
}

TEST(ServerConfig, DefaultsAreSafe) {
  EXPECT_THROW(parse({}), Error);  // no model
  auto c = parse({"--model", "/models/x"});
  EXPECT_EQ(c.host, "127.0.0.1");
  EXPECT_TRUE(c.api_keys.empty());
  EXPECT_NO_THROW(c.validate());
}

TEST(ServerConfig, FlagsBeatEnvironmentBeatsFile) {
  TempFile f(R"({"port": 9001, "max_running": 3, "api_keys": ["k1"], // comments are allowed
                 "host": "0.0.0.0"})");
  ::setenv("HYMOE_MAX_RUNNING", "5", 1);
  auto c = parse({"--config", f.path.string(), "--host", "127.0.0.2", "--model", "/m"});
  ::unsetenv("HYMOE_MAX_RUNNING");
  EXPECT_EQ(c.port, 9001);        // file
  EXPECT_EQ(c.max_running, 5);    // environment over file
  EXPECT_EQ(c.host, "127.0.0.2"); // flag over file
  EXPECT_EQ(c.api_keys, std::vector<std::string>{"k1"});
}

TEST(ServerConfig, MaxDecodeBatchFromFileEnvironmentAndFlag) {
  EXPECT_EQ(parse({"--model", "/m"}).max_decode_batch, 0);  // no bound unless asked
  TempFile f(R"({"max_decode_batch": 4})");
  EXPECT_EQ(parse({"--config", f.path.string(), "--model", "/m"}).max_decode_batch, 4);
  ::setenv("HYMOE_MAX_DECODE_BATCH", "6", 1);
  const int32_t from_env = parse({"--config", f.path.string(), "--model", "/m"}).max_decode_batch;
  const int32_t from_flag = parse({"--model", "/m", "--max-decode-batch", "3"}).max_decode_batch;
  ::unsetenv("HYMOE_MAX_DECODE_BATCH");
  EXPECT_EQ(from_env, 6);
  EXPECT_EQ(from_flag, 3);
  TempFile bad(R"({"max_decode_batch": -2})");
  EXPECT_THROW(parse({"--config", bad.path.string(), "--model", "/m"}).validate(), Error);
}

TEST(ServerConfig, AmxDecodeGemvFromFileEnvironmentAndFlag) {
  EXPECT_FALSE(parse({"--model", "/m"}).amx_decode_gemv);  // off unless asked
  TempFile on(R"({"amx_decode_gemv": true})");
  EXPECT_TRUE(parse({"--config", on.path.string(), "--model", "/m"}).amx_decode_gemv);
  EXPECT_FALSE(parse({"--config", on.path.string(), "--model", "/m", "--amx-decode-gemv", "false"}).amx_decode_gemv);
  ::setenv("HYMOE_AMX_DECODE_GEMV", "true", 1);
  const bool from_env = parse({"--model", "/m"}).amx_decode_gemv;
  ::unsetenv("HYMOE_AMX_DECODE_GEMV");
  EXPECT_TRUE(from_env);
  TempFile wrong(R"({"amx_decode_gemv": "yes"})");
  EXPECT_THROW(parse({"--config", wrong.path.string(), "--model", "/m"}), Error);
  EXPECT_TRUE(parse({"--model", "/m", "--amx-decode-gemv", "true"}).to_json()["amx_decode_gemv"].get<bool>());
}

// On unless turned off: --no-prefix-cache, "prefix_cache": false in the file, or
// HYMOE_PREFIX_CACHE=false; a flag wins over both.
TEST(ServerConfig, PrefixCacheOnByDefaultAndOffEachWay) {
  EXPECT_TRUE(parse({"--model", "/m"}).prefix_cache);
  EXPECT_FALSE(parse({"--model", "/m", "--no-prefix-cache"}).prefix_cache);
  TempFile off(R"({"prefix_cache": false})");
  EXPECT_FALSE(parse({"--config", off.path.string(), "--model", "/m"}).prefix_cache);
  EXPECT_TRUE(parse({"--config", off.path.string(), "--model", "/m", "--prefix-cache"}).prefix_cache);
  ::setenv("HYMOE_PREFIX_CACHE", "false", 1);
  const bool from_env = parse({"--model", "/m"}).prefix_cache;
  ::unsetenv("HYMOE_PREFIX_CACHE");
  EXPECT_FALSE(from_env);
  EXPECT_FALSE(parse({"--model", "/m", "--no-prefix-cache"}).to_json()["prefix_cache"].get<bool>());
}

TEST(ServerConfig, BackendAndGpuMemoryLimit) {
  auto c = parse({"--model", "/m"});
  EXPECT_EQ(c.backend, "auto");
  EXPECT_EQ(c.gpu_memory_limit, 0);  // the whole device
  TempFile f(R"({"backend": "hybrid", "gpu_memory_limit": 34359738368})");
  c = parse({"--config", f.path.string(), "--model", "/m"});
  EXPECT_EQ(c.backend, "hybrid");
  EXPECT_EQ(c.gpu_memory_limit, int64_t{32} << 30);
  EXPECT_EQ(parse({"--config", f.path.string(), "--model", "/m", "--backend", "cpu"}).backend, "cpu");
  EXPECT_EQ(c.to_json()["backend"].get<std::string>(), "hybrid");
  EXPECT_THROW(parse({"--model", "/m", "--backend", "gpu"}), Error);
  EXPECT_THROW(parse({"--model", "/m", "--gpu-memory-limit", "-1"}), Error);
}

TEST(ServerConfig, ClearErrors) {
  TempFile unknown(R"({"prot": 1})");
  EXPECT_THROW(parse({"--config", unknown.path.string()}), Error);
  TempFile wrong(R"({"port": "eighty"})");
  EXPECT_THROW(parse({"--config", wrong.path.string()}), Error);
  EXPECT_THROW(parse({"--config", "/nonexistent/hymoe.json"}), Error);
  EXPECT_THROW(parse({"--model", "/m", "--port", "70000"}), Error);
  EXPECT_THROW(parse({"--model", "/m", "--load-format", "gguf"}), Error);
  EXPECT_THROW(parse({"--model", "/m", "--tool-call-parser", "hermes"}), Error);
  EXPECT_EQ(parse({"--model", "/m", "--tool-call-parser", "kimi_k2"}).tool_call_parser, "kimi_k2");
  EXPECT_THROW(parse({"--model", "/m", "--port", "abc"}), CLI::ParseError);
}

TEST(ServerConfig, ShippedConfigsParse) {
  for (const auto& entry : std::filesystem::directory_iterator("configs")) {
    if (entry.path().extension() != ".json") continue;
    ServerConfig c;
    EXPECT_NO_THROW(load_server_config_file(entry.path(), c)) << entry.path();
    EXPECT_NO_THROW(c.validate()) << entry.path();
  }
}

}  // namespace
}  // namespace hymoe::server
