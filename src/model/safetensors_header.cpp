// safetensors header parsing and validation (no I/O: the fuzz target links this file alone).
#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "hymoe/model/safetensors.h"
#include "json_unique.h"

namespace hymoe {
namespace {

using nlohmann::json;

uint64_t read_le64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

json parse_json_unique_keys(std::string_view text, std::string_view file, std::string_view what) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  auto cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: keys.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default: break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    HYMOE_THROW(kCorruptData, "{}: {} is not valid JSON: {}", file, what, e.what());
  }
  HYMOE_CHECK(duplicate.empty(), kCorruptData, "{}: {} names '{}' twice", file, what, duplicate);
  return j;
}

namespace {

SafetensorsEntry parse_entry(const std::string& name, const json& v, uint64_t data_bytes,
                             std::string_view file) {
  HYMOE_CHECK(v.is_object(), kCorruptData, "{}: tensor '{}': header entry is not an object", file,
              name);
  SafetensorsEntry e;
  e.name = name;
  auto field = [&](const char* key) -> const json& {
    auto it = v.find(key);
    HYMOE_CHECK(it != v.end(), kCorruptData, "{}: tensor '{}': missing '{}'", file, name, key);
    return *it;
  };
  const json& dtype = field("dtype");
  HYMOE_CHECK(dtype.is_string(), kCorruptData, "{}: tensor '{}': dtype is not a string", file, name);
  auto parsed = parse_dtype(dtype.get<std::string>());
  HYMOE_CHECK(parsed.has_value(), kCorruptData,
              "{}: tensor '{}': unsupported dtype '{}' (F8_E4M3 BF16 F16 F32 I32 I64)", file, name,
              dtype.get<std::string>());
  e.dtype = *parsed;

  const json& shape = field("shape");
  HYMOE_CHECK(shape.is_array(), kCorruptData, "{}: tensor '{}': shape is not a list", file, name);
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : shape) {
    HYMOE_CHECK(d.is_number_integer(), kCorruptData,
                "{}: tensor '{}': shape {} holds a non-integer", file, name, shape.dump());
    HYMOE_CHECK(d.is_number_unsigned(), kCorruptData,
                "{}: tensor '{}': shape {} has a negative dimension", file, name, shape.dump());
    const uint64_t dim = d.get<uint64_t>();
    HYMOE_CHECK(dim <= (1ull << 62), kCorruptData, "{}: tensor '{}': shape {} is absurdly large",
                file, name, shape.dump());
    e.shape.push_back(static_cast<int64_t>(dim));
    overflow |= __builtin_mul_overflow(numel, dim, &numel);
  }
  uint64_t nbytes = 0;
  overflow |= __builtin_mul_overflow(numel, dtype_size(e.dtype), &nbytes);

  const json& offsets = field("data_offsets");
  HYMOE_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                  offsets[1].is_number_unsigned(),
              kCorruptData, "{}: tensor '{}': data_offsets {} is not [begin, end]", file, name,
              offsets.dump());
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  HYMOE_CHECK(e.begin <= e.end, kCorruptData, "{}: tensor '{}': data_offsets [{}, {}] end before begin",
              file, name, e.begin, e.end);
  HYMOE_CHECK(e.end <= data_bytes, kCorruptData,
              "{}: tensor '{}': data_offsets [{}, {}] run past the data section ({} bytes; "
              "truncated file?)", file, name, e.begin, e.end, data_bytes);
  HYMOE_CHECK(!overflow && nbytes == e.end - e.begin, kCorruptData,
              "{}: tensor '{}': shape {} of {} needs {} bytes but data_offsets hold {}", file, name,
              shape.dump(), dtype_name(e.dtype), overflow ? std::string("too many")
                                                           : std::to_string(nbytes),
              e.end - e.begin);
  return e;
}

}  // namespace

const SafetensorsEntry* SafetensorsHeader::find(std::string_view name) const {
  for (const SafetensorsEntry& e : tensors) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file_start, uint64_t file_size,
                                           std::string_view file) {
  HYMOE_CHECK(file_size >= 8 && file_start.size() >= 8, kCorruptData,
              "{}: {} bytes is too short for a safetensors file (truncated?)", file, file_size);
  const uint64_t header_len = read_le64(file_start.data());
  HYMOE_CHECK(header_len <= kMaxSafetensorsHeaderBytes, kCorruptData,
              "{}: header length {} is absurdly large (limit {}); not a safetensors file?", file,
              header_len, kMaxSafetensorsHeaderBytes);
  HYMOE_CHECK(header_len <= file_size - 8, kCorruptData,
              "{}: header length {} runs past the end of the {}-byte file (truncated?)", file,
              header_len, file_size);
  HYMOE_CHECK(file_start.size() >= 8 + header_len, kInternal,
              "{}: caller passed {} bytes, header needs {}", file, file_start.size(), 8 + header_len);
  HYMOE_CHECK(header_len >= 2, kCorruptData, "{}: header length {} is too short for JSON", file,
              header_len);

  SafetensorsHeader h;
  h.data_offset = 8 + header_len;
  h.data_bytes = file_size - h.data_offset;
  std::string_view text(reinterpret_cast<const char*>(file_start.data() + 8), header_len);
  HYMOE_CHECK(text.front() == '{', kCorruptData, "{}: safetensors header does not start with '{{'",
              file);
  json j = parse_json_unique_keys(text, file, "safetensors header");
  HYMOE_CHECK(j.is_object(), kCorruptData, "{}: safetensors header is not a JSON object", file);

  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      HYMOE_CHECK(value.is_object(), kCorruptData, "{}: __metadata__ is not an object", file);
      for (const auto& [mk, mv] : value.items()) {
        HYMOE_CHECK(mv.is_string(), kCorruptData, "{}: __metadata__ value of '{}' is not a string",
                    file, mk);
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(key, value, h.data_bytes, file));
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry& e : h.tensors) {
    HYMOE_CHECK(e.begin >= covered, kCorruptData,
                "{}: tensor '{}' [{}, {}) overlaps tensor '{}' [{}, {})", file, e.name, e.begin,
                e.end, prev ? prev->name : "", prev ? prev->begin : 0, prev ? prev->end : 0);
    HYMOE_CHECK(e.begin == covered, kCorruptData,
                "{}: bytes [{}, {}) before tensor '{}' belong to no tensor", file, covered, e.begin,
                e.name);
    covered = e.end;
    prev = &e;
  }
  HYMOE_CHECK(covered == h.data_bytes, kCorruptData,
              "{}: {} bytes after the last tensor{}{}{} belong to no tensor (data section is {} "
              "bytes)", file, h.data_bytes - covered, prev ? " '" : "", prev ? prev->name : "",
              prev ? "'" : "", h.data_bytes);
  return h;
}

}  // namespace hymoe
