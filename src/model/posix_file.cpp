#include "posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hymoe/common/error.h"

namespace hymoe {

PosixFile::PosixFile(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    if (err == ENOENT) HYMOE_THROW(kNotFound, "{}: no such file", path.string());
    HYMOE_THROW(kIo, "{}: cannot open: {}", path.string(), std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    HYMOE_THROW(kIo, "{}: not a regular file", path.string());
  }
}

PosixFile::~PosixFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t PosixFile::size() const {
  struct stat st {};
  HYMOE_CHECK(::fstat(fd_, &st) == 0, kIo, "{}: fstat failed: {}", path_.string(),
              std::strerror(errno));
  return static_cast<uint64_t>(st.st_size);
}

void PosixFile::read_exact(void* dst, size_t bytes, uint64_t offset, std::string_view what) const {
  auto* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      HYMOE_THROW(kIo, "{}: reading '{}' at offset {}: {}", path_.string(), what, offset + done,
                  std::strerror(errno));
    }
    HYMOE_CHECK(n > 0, kCorruptData, "{}: file ends at {} while reading '{}' (truncated?)",
                path_.string(), offset + done, what);
    done += static_cast<size_t>(n);
  }
}

}  // namespace hymoe
