#include "js_reference.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <unistd.h>

#include "../test_seed.h"

namespace hymoe::tokenizer::testing {

std::filesystem::path source_dir() { return HYMOE_SOURCE_DIR; }
std::filesystem::path js_dir() { return source_dir() / "tests" / "js"; }

std::string js_unavailable_reason() {
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    return "node is not installed (scripts/install-deps installs it)";
  }
  if (!std::filesystem::is_directory(js_dir() / "node_modules" / "@lenml" / "tokenizers") ||
      !std::filesystem::is_directory(js_dir() / "node_modules" / "js-tiktoken")) {
    return "tests/js/node_modules is missing (run scripts/install-deps)";
  }
  return "";
}

// hymoe::test::test_seed() (printed, recorded, HYMOE_TEST_SEED replays it), kept below 2e9 as the
// reference scripts' --seed expects; a seed already below 2e9 passes unchanged.
uint32_t test_seed() { return static_cast<uint32_t>(hymoe::test::test_seed() % 2000000000u); }

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("hymoe-tok-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void run_node(const std::string& script, const std::string& args) {
  const std::string cmd = "cd '" + js_dir().string() + "' && node " + script + " " + args;
  const int rc = std::system(cmd.c_str());
  if (rc != 0) throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + cmd);
}

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot open " + file.string());
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

std::string base64_decode(const std::string& in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else continue;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

std::string hex(const std::string& bytes, size_t max) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max; ++i) {
    const uint8_t b = uint8_t(bytes[i]);
    if (b >= 0x20 && b < 0x7f && b != '\\') {
      out.push_back(char(b));
    } else {
      out += "\\x";
      out.push_back(d[b >> 4]);
      out.push_back(d[b & 15]);
    }
  }
  if (bytes.size() > max) out += "...";
  return out;
}

}  // namespace hymoe::tokenizer::testing
