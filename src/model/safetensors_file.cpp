// Reading safetensors files: header by pread, whole file by mmap.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/model/safetensors.h"
#include "posix_file.h"

namespace hymoe {

SafetensorsHeader read_safetensors_header(const std::filesystem::path& path) {
  PosixFile f(path);
  const uint64_t size = f.size();
  const std::string name = path.string();
  std::vector<std::byte> buf(std::min<uint64_t>(size, 8));
  if (!buf.empty()) f.read_exact(buf.data(), buf.size(), 0, "header length");
  if (size >= 8) {
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(buf[i]);
    // Read the JSON only when its length is plausible; the parser reports the other cases.
    if (len <= kMaxSafetensorsHeaderBytes && len <= size - 8) {
      buf.resize(8 + len);
      f.read_exact(buf.data() + 8, len, 8, "header");
    }
  }
  return parse_safetensors_header(buf, size, name);
}

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  PosixFile f(path);
  size_ = f.size();
  if (size_ == 0) return;  // nothing to map; the header parser reports the empty file
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, f.fd(), 0);
  HYMOE_CHECK(p != MAP_FAILED, kIo, "{}: mmap of {} bytes failed: {}", path.string(), size_,
              std::strerror(errno));
  data_ = static_cast<const std::byte*>(p);
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace hymoe
