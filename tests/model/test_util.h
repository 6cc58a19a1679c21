// Helpers for the model tests: temporary folders, raw file crafting, error expectations.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "hymoe/common/error.h"

namespace hymoe::test {

// A fresh folder under the system temp dir, removed with its contents at scope exit. Its name is
// drawn from std::random_device only to be unique (not a test input: no seed to replay).
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("hymoe-model-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A safetensors file as bytes: 8-byte LE length (declared_len, or the JSON's true length), the
// header JSON, then `data_bytes` random data bytes.
inline std::string safetensors_bytes(const std::string& header_json, size_t data_bytes,
                                     int64_t declared_len = -1) {
  const uint64_t len = declared_len >= 0 ? static_cast<uint64_t>(declared_len) : header_json.size();
  std::string out(8, '\0');
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((len >> (8 * b)) & 0xFF);
  out += header_json;
  std::mt19937 rng(static_cast<uint32_t>(data_bytes * 7 + header_json.size()));
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(rng() & 0xFF));
  return out;
}

// Runs fn, expects a hymoe::Error of `kind` whose message holds every one of `needles`.
template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected " << error_kind_name(kind);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const std::string& n : needles) {
      EXPECT_NE(e.message().find(n), std::string::npos) << "'" << n << "' not in: " << e.message();
    }
  }
}

}  // namespace hymoe::test
