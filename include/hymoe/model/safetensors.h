// safetensors files: header parsing and validation, read-only mmap, and sharded checkpoints.
//
// File layout: 8-byte little-endian header length N, N bytes of JSON (an object: tensor name ->
// {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional "__metadata__" string map),
// then the data section; offsets are relative to its start. A valid file's tensors cover the data
// section exactly: no gaps, no overlaps, nothing after the last tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hymoe/model/dtype.h"
#include "hymoe/model/tensor.h"

namespace hymoe {

// Headers longer than this are refused as corrupt (real ones are well under 1 MiB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets in the data section, begin <= end
  uint64_t end = 0;

  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;  // 8 + header length: file offset of the data section
  uint64_t data_bytes = 0;   // file size - data_offset
  std::vector<SafetensorsEntry> tensors;  // sorted by begin (file order)
  std::map<std::string, std::string> metadata;

  // The entry or nullptr (linear scan; callers index it themselves when it matters).
  const SafetensorsEntry* find(std::string_view name) const;
};

// Parses and validates a header. `file_start` holds the file's first bytes: at least the 8-byte
// length and the JSON when the file is that long (more is ignored); `file_size` is the size of the
// whole file. Throws hymoe::Error (kCorruptData, naming `file` and the tensor) for: a file shorter
// than 8 bytes, a header length beyond the file or above kMaxSafetensorsHeaderBytes, text that is
// not a JSON object, duplicate names, unknown dtypes, shapes that are not lists of non-negative
// integers, shape * element size != end - begin, offsets past the data section, overlapping
// tensors, and bytes of the data section no tensor covers. Never reads outside file_start.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_start, uint64_t file_size,
                                           std::string_view file);

// Reads and parses the header of the file at `path` (pread, no mapping).
SafetensorsHeader read_safetensors_header(const std::filesystem::path& path);

// A read-only private mapping of a whole file. Move-only.
class MappedFile {
 public:
  // Throws hymoe::Error: kNotFound when the file does not exist, kIo on other failures.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release() noexcept;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// One tensor of a checkpoint: where its bytes are in which shard.
struct CheckpointTensor {
  SafetensorsEntry entry;
  size_t shard = 0;          // index into CheckpointFiles::shards
  uint64_t file_offset = 0;  // data_offset + entry.begin
};

// The shards of a checkpoint directory and every tensor in them, validated.
struct CheckpointFiles {
  std::filesystem::path dir;
  std::vector<std::filesystem::path> shards;  // sorted, unique
  std::vector<uint64_t> shard_sizes;          // bytes, when scanned
  std::vector<CheckpointTensor> tensors;      // sorted by name
  std::unordered_map<std::string, size_t> by_name;

  // Reads model.safetensors.index.json ("weight_map": name -> shard file) or, without one,
  // model.safetensors; parses every shard header. Throws hymoe::Error naming file and tensor for
  // a missing directory/index/shard (kNotFound), a malformed index or shard (kCorruptData), a
  // tensor listed in the index but absent from its shard or present in a shard the index does not
  // name for it, and a tensor name found in two shards.
  static CheckpointFiles scan(const std::filesystem::path& dir);
};

}  // namespace hymoe
