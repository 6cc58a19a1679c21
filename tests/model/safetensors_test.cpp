#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "hymoe/model/safetensors.h"
#include "hymoe/model/safetensors_writer.h"
#include "../test_seed.h"
#include "test_util.h"

namespace hymoe {
namespace {

using test::expect_error;
using test::safetensors_bytes;
using test::TempDir;

std::vector<std::byte> random_bytes(size_t n, std::mt19937& rng) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xFF);
  return v;
}

TEST(Safetensors, WriterReaderRoundTrip) {
  TempDir dir;
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
  std::vector<std::pair<TensorSpec, std::vector<std::byte>>> tensors;
  const std::vector<std::pair<std::string, DType>> kinds = {
      {"a.f8", DType::kF8E4M3}, {"b.bf16", DType::kBF16}, {"c.f16", DType::kF16},
      {"d.f32", DType::kF32},   {"e.i32", DType::kI32},   {"f.i64", DType::kI64}};
  for (const auto& [name, dtype] : kinds) {
    TensorSpec s{name, dtype, {static_cast<int64_t>(rng() % 5 + 1), static_cast<int64_t>(rng() % 7 + 1)}};
    tensors.emplace_back(s, random_bytes(s.nbytes(), rng));
  }
  tensors.emplace_back(TensorSpec{"g.empty", DType::kF32, {0, 4}}, std::vector<std::byte>{});
  tensors.emplace_back(TensorSpec{"h.scalar", DType::kI64, {}}, random_bytes(8, rng));
  const auto path = dir / "rt.safetensors";
  write_safetensors(path, tensors);

  SafetensorsHeader h = read_safetensors_header(path);
  EXPECT_EQ(h.data_offset % 8, 0u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  ASSERT_EQ(h.tensors.size(), tensors.size());
  MappedFile map(path);
  EXPECT_EQ(map.size(), h.data_offset + h.data_bytes);
  for (const auto& [spec, bytes] : tensors) {
    const SafetensorsEntry* e = h.find(spec.name);
    ASSERT_NE(e, nullptr) << spec.name;
    EXPECT_EQ(e->dtype, spec.dtype);
    EXPECT_EQ(e->shape, spec.shape);
    EXPECT_EQ(e->nbytes(), bytes.size());
    EXPECT_EQ((h.data_offset + e->begin) % dtype_size(spec.dtype), 0u) << spec.name;
    EXPECT_EQ(0, std::memcmp(map.data() + h.data_offset + e->begin, bytes.data(), bytes.size()));
  }
  MappedFile moved(std::move(map));
  EXPECT_EQ(map.data(), nullptr);
  EXPECT_NE(moved.data(), nullptr);
}

TEST(Safetensors, WriterRefusesDuplicatesAndRemovesUnfinishedFiles) {
  TempDir dir;
  expect_error(
      [&] {
        SafetensorsWriter w(dir / "dup.safetensors",
                            {{"x", DType::kF32, {1}}, {"x", DType::kF32, {2}}});
      },
      ErrorKind::kInvalidArgument, {"x", "twice"});
  {
    SafetensorsWriter w(dir / "partial.safetensors", {{"x", DType::kF32, {4}}});
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "partial.safetensors"));
}

// A malformed file: its bytes and the words the error must hold (besides the file name).
struct Malformed {
  const char* what;
  std::string bytes;
  std::vector<std::string> needles;
};

TEST(Safetensors, MalformedFilesAreClearErrors) {
  const std::string ok_entry = R"("w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]})";
  const std::vector<Malformed> cases = {
      {"empty file", "", {"too short"}},
      {"five bytes", std::string("\x10\0\0\0\0", 5), {"too short"}},
      {"header length past the end", safetensors_bytes("{" + ok_entry + "}", 16, 4096),
       {"header length 4096", "truncated"}},
      {"absurd header length", safetensors_bytes("{" + ok_entry + "}", 16, int64_t{1} << 60),
       {"absurdly large"}},
      {"header length one byte", safetensors_bytes("{", 0), {"too short"}},
      {"not JSON", safetensors_bytes("{\"w\": {\"dtype\": ", 16), {"not valid JSON"}},
      {"JSON array", safetensors_bytes("[1, 2]", 0), {"does not start"}},
      {"garbage bytes", safetensors_bytes(std::string("{\xff\xfe\x00\x01}", 6), 0),
       {"not valid JSON"}},
      {"entry not an object", safetensors_bytes(R"({"w": 5})", 0), {"'w'", "not an object"}},
      {"missing dtype", safetensors_bytes(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4),
       {"'w'", "dtype"}},
      {"unknown dtype",
       safetensors_bytes(R"({"w": {"dtype": "F8_E5M2", "shape": [4], "data_offsets": [0, 4]}})", 4),
       {"'w'", "F8_E5M2"}},
      {"negative dim",
       safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}})", 16),
       {"'w'", "negative"}},
      {"float dim",
       safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
       {"'w'", "non-integer"}},
      {"shape not a list",
       safetensors_bytes(R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", 16),
       {"'w'", "shape"}},
      {"shape disagrees with bytes",
       safetensors_bytes(R"({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 16]}})", 16),
       {"'w'", "needs 8 bytes", "hold 16"}},
      {"overflowing shape",
       safetensors_bytes(
           R"({"w": {"dtype": "I64", "shape": [4611686018427387904, 4611686018427387904], "data_offsets": [0, 16]}})",
           16),
       {"'w'"}},
      {"offsets past the data",
       safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})", 16),
       {"'w'", "past the data section"}},
      {"end before begin",
       safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8),
       {"'w'", "end before begin"}},
      {"negative offset",
       safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4),
       {"'w'", "data_offsets"}},
      {"offsets not a pair",
       safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
       {"'w'", "data_offsets"}},
      {"overlap",
       safetensors_bytes(
           R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
           24),
       {"'b'", "overlaps", "'a'"}},
      {"gap",
       safetensors_bytes(
           R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})",
           20),
       {"'b'", "belong to no tensor"}},
      {"trailing bytes",
       safetensors_bytes(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 12),
       {"4 bytes after the last tensor 'w'"}},
      {"duplicate names",
       safetensors_bytes(
           R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
           8),
       {"'w' twice"}},
      {"metadata not strings",
       safetensors_bytes(R"({"__metadata__": {"format": 1}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 4),
       {"__metadata__", "format"}},
  };
  TempDir dir;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Malformed& m = cases[i];
    SCOPED_TRACE(m.what);
    const auto path = dir / ("bad" + std::to_string(i) + ".safetensors");
    test::write_bytes(path, m.bytes);
    std::vector<std::string> needles = m.needles;
    needles.push_back(path.string());
    bool thrown = false;
    try {
      read_safetensors_header(path);
    } catch (const Error& e) {
      thrown = true;
      EXPECT_EQ(e.kind(), ErrorKind::kCorruptData) << e.what();
      for (const std::string& n : needles) {
        EXPECT_NE(e.message().find(n), std::string::npos) << n << " not in: " << e.message();
      }
    }
    EXPECT_TRUE(thrown);
  }
}

TEST(Safetensors, TruncatedFileNamesTheTensor) {
  TempDir dir;
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
  const auto path = dir / "t.safetensors";
  write_safetensors(path, {{{"first", DType::kF32, {64}}, random_bytes(256, rng)},
                           {{"second", DType::kF32, {64}}, random_bytes(256, rng)}});
  const std::string full = test::read_bytes(path);
  test::write_bytes(path, full.substr(0, full.size() - 100));
  expect_error([&] { read_safetensors_header(path); }, ErrorKind::kCorruptData,
               {path.string(), "second", "truncated"});
  test::write_bytes(path, full.substr(0, 20));
  expect_error([&] { read_safetensors_header(path); }, ErrorKind::kCorruptData,
               {path.string(), "header length"});
  expect_error([&] { read_safetensors_header(dir / "nope.safetensors"); }, ErrorKind::kNotFound,
               {"nope.safetensors"});
}

// Random corruptions of a valid file: the parser either accepts the result or throws
// hymoe::Error; it never crashes or throws anything else (the fuzz target goes much further).
TEST(Safetensors, RandomCorruptionsNeverEscape) {
  TempDir dir;
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
  const auto path = dir / "v.safetensors";
  write_safetensors(path, {{{"a.weight", DType::kBF16, {3, 5}}, random_bytes(30, rng)},
                           {{"b.scale", DType::kF32, {2}}, random_bytes(8, rng)}});
  const std::string valid = test::read_bytes(path);
  int accepted = 0, rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits && !bytes.empty(); ++k) {
      const size_t pos = rng() % bytes.size();
      switch (rng() % 3) {
        case 0: bytes[pos] = static_cast<char>(rng() & 0xFF); break;
        case 1: bytes.erase(pos, 1); break;
        default: bytes.resize(pos); break;
      }
    }
    try {
      parse_safetensors_header(std::as_bytes(std::span(bytes.data(), bytes.size())), bytes.size(),
                               "mutant");
      ++accepted;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kCorruptData) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace hymoe
