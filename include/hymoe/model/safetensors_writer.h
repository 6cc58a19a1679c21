// Writing safetensors files: the layout is fixed up front, then the caller fills each tensor's
// bytes in place in the mapped file (so multi-GB tensors are never held twice in memory).
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "hymoe/model/tensor.h"

namespace hymoe {

class SafetensorsWriter {
 public:
  // Creates (truncates) `path` with a header for `tensors` and maps it for writing. Tensors are
  // laid out by element size (largest first), then name, as HF's writer does; the header is
  // padded with spaces to a multiple of 8, so every tensor is aligned to its element size.
  // Throws hymoe::Error: kInvalidArgument for duplicate names or negative dims, kIo on I/O failure.
  SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
  // Unmaps; a writer not finish()ed removes its incomplete file.
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  size_t size() const { return specs_.size(); }
  const TensorSpec& spec(size_t i) const { return specs_[i]; }
  // Writable bytes of tensor i (in the order given to the constructor), nbytes() long.
  std::span<std::byte> data(size_t i);
  // Flushes and closes; throws hymoe::Error (kIo) when the data cannot be written.
  void finish();

 private:
  std::filesystem::path path_;
  std::vector<TensorSpec> specs_;
  std::vector<uint64_t> offsets_;  // file offset of each tensor
  std::byte* map_ = nullptr;
  size_t map_bytes_ = 0;
  int fd_ = -1;
};

// Writes a whole file from tensors given with their bytes (tests, small files).
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<TensorSpec, std::vector<std::byte>>>& tensors);

}  // namespace hymoe
