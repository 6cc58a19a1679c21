// ChunkedFraming: the chunked-body check HttpCore runs before cpp-httplib's lenient decoder.
#include "chunked_framing.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../test_seed.h"

namespace hymoe::server {
namespace {

// Feeds `body` one byte at a time; the index of the first refused byte, or -1.
long first_refused(const std::string& body, ChunkedFraming& f) {
  for (size_t i = 0; i < body.size(); ++i) {
    if (!f.feed(&body[i], 1)) return static_cast<long>(i);
  }
  return -1;
}

std::string chunk(const std::string& data, const std::string& ext = "") {
  char size[32];
  std::snprintf(size, sizeof size, "%zx", data.size());
  return size + ext + "\r\n" + data + "\r\n";
}

TEST(ChunkedFraming, AcceptsValidBodiesWhateverTheSplit) {
  const std::vector<std::string> bodies = {
      "0\r\n\r\n",
      chunk("hello") + "0\r\n\r\n",
      chunk("{\"prompt\":") + chunk("\"x\"}") + "0\r\n\r\n",
      "A\r\n0123456789\r\n0\r\n\r\n",
      "000a\r\n0123456789\r\n000\r\n\r\n",
      chunk("ab", ";name=value") + chunk("cd", " ;x") + "0;last\r\n\r\n",
      chunk(std::string(5000, 'z')) + chunk("\r\n\r\n0\r\n") + "0\r\n\r\n",  // CRLFs inside data are data
  };
  for (const auto& body : bodies) {
    {
      ChunkedFraming f;
      EXPECT_EQ(first_refused(body, f), -1) << body;
      EXPECT_TRUE(f.done()) << body;
      EXPECT_EQ(f.problem(), nullptr);
    }
    for (size_t cut = 0; cut <= body.size(); ++cut) {
      ChunkedFraming f;
      ASSERT_TRUE(f.feed(body.data(), cut)) << body << " cut at " << cut;
      EXPECT_EQ(f.done(), cut == body.size());
      ASSERT_TRUE(f.feed(body.data() + cut, body.size() - cut)) << body << " cut at " << cut;
      EXPECT_TRUE(f.done());
    }
  }
}

TEST(ChunkedFraming, RefusesAtTheFirstBadByte) {
  struct Case {
    const char* what;
    std::string body;
    long at;  // index of the first refused byte
  };
  const std::vector<Case> cases = {
      {"negative size", "-2\r\nab\r\n0\r\n\r\n", 0},
      {"plus sign", "+2\r\nab\r\n0\r\n\r\n", 0},
      {"0x prefix", "0x2\r\nab\r\n0\r\n\r\n", 1},
      {"leading space", " 2\r\nab\r\n0\r\n\r\n", 0},
      {"junk after the size", "2zz\r\nab\r\n0\r\n\r\n", 1},
      {"space then no extension", "2 \r\nab\r\n0\r\n\r\n", 2},
      {"empty size line", "\r\nab\r\n0\r\n\r\n", 0},
      {"bare LF after the size", "2\nab\r\n0\r\n\r\n", 1},
      {"CR without LF after the size", "2\rab\r\n0\r\n\r\n", 2},
      {"chunk longer than its size", "3\r\nabcdef\r\n0\r\n\r\n", 6},
      {"no CRLF after the data", "2\r\nab0\r\n\r\n", 5},
      {"bare LF after the data", "2\r\nab\n0\r\n\r\n", 5},
      {"CR then junk after the data", "2\r\nab\rx0\r\n\r\n", 6},
      {"size too large", "1000000000001\r\n", 12},
      {"trailer field", "0\r\nX-T: 1\r\n\r\n", 3},
      {"bare LF at the end", "0\r\n\n", 3},
      {"CR then junk at the end", "0\r\n\rx", 4},
      {"control byte in an extension", "2;a\x01\r\nab\r\n0\r\n\r\n", 3},
      {"LF in an extension", "2;a\nab\r\n0\r\n\r\n", 3},
      {"bytes after the end", "0\r\n\r\nGET", 5},
      {"extension too long", "2;" + std::string(ChunkedFraming::kMaxExtensionBytes + 1, 'e') + "\r\n",
       static_cast<long>(2 + ChunkedFraming::kMaxExtensionBytes)},
  };
  for (const auto& c : cases) {
    ChunkedFraming f;
    EXPECT_EQ(first_refused(c.body, f), c.at) << c.what;
    ASSERT_NE(f.problem(), nullptr) << c.what;
    EXPECT_FALSE(f.done()) << c.what;
    // Once refused, every later byte is refused too.
    EXPECT_FALSE(f.feed("0\r\n\r\n", 5)) << c.what;
    // Fed whole, the same body is refused with the same reason.
    ChunkedFraming whole;
    EXPECT_FALSE(whole.feed(c.body.data(), c.body.size())) << c.what;
    EXPECT_STREQ(whole.problem(), f.problem()) << c.what;
  }
}

TEST(ChunkedFraming, TheLargestSizeIsAcceptedOneMoreDigitIsNot) {
  ChunkedFraming at;
  EXPECT_TRUE(at.feed("1000000000000\r\n", 15));  // exactly 2^48: a data chunk follows
  EXPECT_FALSE(at.done());
  ChunkedFraming over;
  EXPECT_FALSE(over.feed("10000000000000", 14));
  EXPECT_STREQ(over.problem(), "chunk size too large");
}

// Random valid bodies fed in random pieces are accepted; the same body with the CR after a
// random chunk's data changed to another byte is refused there. Seed printed (test::test_seed()).
TEST(ChunkedFraming, RandomBodiesAndPieces) {
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
  for (int round = 0; round < 300; ++round) {
    std::string body;
    std::vector<size_t> data_ends;  // index of the CR after each chunk's data
    const int chunks = static_cast<int>(rng() % 6);
    for (int i = 0; i < chunks; ++i) {
      std::string data(1 + rng() % 300, 'd');
      for (auto& ch : data) ch = static_cast<char>(rng() % 256);
      body += chunk(data, rng() % 4 == 0 ? ";k=v" : "");
      data_ends.push_back(body.size() - 2);
    }
    body += "0\r\n\r\n";
    ChunkedFraming f;
    for (size_t off = 0; off < body.size();) {
      const size_t n = std::min<size_t>(body.size() - off, 1 + rng() % 64);
      ASSERT_TRUE(f.feed(body.data() + off, n)) << "round " << round << ": " << f.problem();
      off += n;
    }
    ASSERT_TRUE(f.done()) << "round " << round;
    if (data_ends.empty()) continue;
    const size_t at = data_ends[rng() % data_ends.size()];
    body[at] = static_cast<char>('\r' + 1 + rng() % 200);
    ChunkedFraming g;
    EXPECT_EQ(first_refused(body, g), static_cast<long>(at)) << "round " << round;
  }
}

}  // namespace
}  // namespace hymoe::server
