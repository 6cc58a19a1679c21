// A file descriptor owned RAII-style, with exact positional reads (internal to hymoe_model).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace hymoe {

class PosixFile {
 public:
  // Opens read-only. Throws hymoe::Error: kNotFound when absent, kIo otherwise.
  explicit PosixFile(const std::filesystem::path& path);
  ~PosixFile();
  PosixFile(PosixFile&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
    other.fd_ = -1;
  }
  PosixFile& operator=(PosixFile&&) = delete;
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const;
  const std::filesystem::path& path() const { return path_; }
  // Reads exactly `bytes` at `offset` (thread-safe: pread). Throws hymoe::Error naming the file
  // and `what` (a tensor name) on an I/O error (kIo) or when the file ends early (kCorruptData).
  void read_exact(void* dst, size_t bytes, uint64_t offset, std::string_view what) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace hymoe
