// upload_inline / upload_mapped against the host bytes: random contents, sizes around the inline
// launch size, unaligned ends, a poisoned destination whose bytes outside the range must stay.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "hymoe/gpu/upload.h"

namespace hymoe::gpu {
namespace {

struct Case {
  size_t bytes, dst_offset, src_offset;
};

std::vector<Case> cases(std::mt19937_64& rng) {
  std::vector<Case> out;
  const size_t sizes[] = {1, 15, 16, 17, kInlineUploadBytes - 1, kInlineUploadBytes, kInlineUploadBytes + 1,
                          3 * kInlineUploadBytes + 7, 65536, (1u << 20) + 3};
  std::uniform_int_distribution<size_t> off(0, 40);
  for (const size_t b : sizes) {
    out.push_back({b, 0, 0});
    out.push_back({b, off(rng), off(rng)});
  }
  return out;
}

// Uploads with `upload` from `src` (bytes at src_offset) into a poisoned buffer at dst_offset and
// checks every byte of the buffer; `after` runs right after the call (before the stream is waited).
template <typename Upload, typename After>
void check(const Case& c, unsigned char* src, Upload upload, After after, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < c.bytes; ++i) src[c.src_offset + i] = static_cast<unsigned char>(byte(rng));
  std::vector<unsigned char> want(c.dst_offset + c.bytes + 64, 0xFF);
  std::memcpy(want.data() + c.dst_offset, src + c.src_offset, c.bytes);
  Stream stream;
  DeviceBuffer dst(want.size());
  dst.fill_bytes(0xFF, stream.get());
  upload(static_cast<unsigned char*>(dst.data()) + c.dst_offset, src + c.src_offset, c.bytes, stream.get());
  after();
  std::vector<unsigned char> got(want.size());
  dst.copy_to_host(got.data(), got.size(), stream.get());
  stream.synchronize();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << c.bytes << " bytes at dst+" << c.dst_offset << " from src+" << c.src_offset
                     << ": first wrong byte " << first;
}

TEST(Upload, InlineCopiesAnyHostBytesReadDuringTheCall) {
  HYMOE_REQUIRE_GPU();
  auto rng = test::make_rng();
  for (const Case& c : cases(rng)) {
    std::vector<unsigned char> src(c.src_offset + c.bytes);
    // The source is overwritten as soon as the call returns: the launches carry their own copy.
    check(c, src.data(), upload_inline, [&] { std::memset(src.data(), 0x5A, src.size()); }, rng);
  }
}

TEST(Upload, MappedReadsPinnedMemoryInStreamOrder) {
  HYMOE_REQUIRE_GPU();
  auto rng = test::make_rng();
  for (const Case& c : cases(rng)) {
    PinnedBuffer src(c.src_offset + c.bytes);
    check(c, static_cast<unsigned char*>(src.data()), upload_mapped, [] {}, rng);
  }
}

TEST(Upload, MappedRefusesMemoryThatIsNotPinned) {
  HYMOE_REQUIRE_GPU();
  std::vector<unsigned char> pageable(4096, 1);
  DeviceBuffer dst(4096);
  Stream stream;
  EXPECT_THROW(upload_mapped(dst.data(), pageable.data(), pageable.size(), stream.get()), Error);
}

}  // namespace
}  // namespace hymoe::gpu
