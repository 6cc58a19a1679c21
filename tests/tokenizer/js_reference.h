// Runs the JavaScript reference generator (tests/js/gen_tokenizer_refs.mjs) and reads its output.
// Tests skip (GTEST_SKIP) only when node or tests/js/node_modules is absent.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hymoe::tokenizer::testing {

std::filesystem::path source_dir();
std::filesystem::path js_dir();
// Empty when node and node_modules are present; else why the reference cannot run.
std::string js_unavailable_reason();

// A seed for this run: HYMOE_TEST_SEED when set, else fresh.
uint32_t test_seed();

// A fresh scratch directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs `node tests/js/<script> <args>` with the working directory tests/js; throws
// std::runtime_error with the exit status when it fails.
void run_node(const std::string& script, const std::string& args);

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file);
std::string base64_decode(const std::string& in);
std::string hex(const std::string& bytes, size_t max = 80);

}  // namespace hymoe::tokenizer::testing
