#include "hymoe/model/safetensors_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"

namespace hymoe {

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), specs_(std::move(tensors)), offsets_(specs_.size()) {
  std::set<std::string> names;
  for (const TensorSpec& t : specs_) {
    HYMOE_CHECK(names.insert(t.name).second, kInvalidArgument, "{}: tensor '{}' given twice",
                path_.string(), t.name);
    for (int64_t d : t.shape) {
      HYMOE_CHECK(d >= 0, kInvalidArgument, "{}: tensor '{}' has a negative dimension",
                  path_.string(), t.name);
    }
  }
  std::vector<size_t> order(specs_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const size_t sa = dtype_size(specs_[a].dtype), sb = dtype_size(specs_[b].dtype);
    return sa != sb ? sa > sb : specs_[a].name < specs_[b].name;
  });

  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t pos = 0;
  std::vector<uint64_t> rel(specs_.size());
  for (size_t i : order) {
    const TensorSpec& t = specs_[i];
    rel[i] = pos;
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {pos, pos + t.nbytes()}}};
    pos += t.nbytes();
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  const uint64_t data_offset = 8 + text.size();
  for (size_t i = 0; i < specs_.size(); ++i) offsets_[i] = data_offset + rel[i];
  map_bytes_ = data_offset + pos;

  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  HYMOE_CHECK(fd_ >= 0, kIo, "{}: cannot create: {}", path_.string(), std::strerror(errno));
  if (::ftruncate(fd_, static_cast<off_t>(map_bytes_)) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    HYMOE_THROW(kIo, "{}: cannot size to {} bytes: {}", path_.string(), map_bytes_,
                std::strerror(err));
  }
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    HYMOE_THROW(kIo, "{}: mmap for writing failed: {}", path_.string(), std::strerror(err));
  }
  map_ = static_cast<std::byte*>(p);
  uint64_t len = text.size();
  for (int b = 0; b < 8; ++b) map_[b] = static_cast<std::byte>((len >> (8 * b)) & 0xFF);
  std::memcpy(map_ + 8, text.data(), text.size());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (map_) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) {
    ::close(fd_);
    std::error_code ec;
    std::filesystem::remove(path_, ec);  // never leave a half-written file that looks valid
  }
}

std::span<std::byte> SafetensorsWriter::data(size_t i) {
  HYMOE_CHECK(map_ && i < specs_.size(), kInternal, "{}: data({}) after finish or out of range",
              path_.string(), i);
  return {map_ + offsets_[i], specs_[i].nbytes()};
}

void SafetensorsWriter::finish() {
  HYMOE_CHECK(map_ != nullptr, kInternal, "{}: finish() called twice", path_.string());
  const int rc = ::munmap(map_, map_bytes_);
  map_ = nullptr;
  HYMOE_CHECK(rc == 0, kIo, "{}: munmap failed: {}", path_.string(), std::strerror(errno));
  const int cl = ::close(fd_);
  fd_ = -1;
  HYMOE_CHECK(cl == 0, kIo, "{}: close failed: {}", path_.string(), std::strerror(errno));
}

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<TensorSpec, std::vector<std::byte>>>& tensors) {
  std::vector<TensorSpec> specs;
  for (const auto& [spec, bytes] : tensors) {
    HYMOE_CHECK(bytes.size() == spec.nbytes(), kInvalidArgument,
                "{}: tensor '{}' given {} bytes, its shape needs {}", path.string(), spec.name,
                bytes.size(), spec.nbytes());
    specs.push_back(spec);
  }
  SafetensorsWriter w(path, std::move(specs));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& bytes = tensors[i].second;
    if (!bytes.empty()) std::memcpy(w.data(i).data(), bytes.data(), bytes.size());
  }
  w.finish();
}

}  // namespace hymoe
