// StreamingDetokenizer on fresh random text over a vocabulary whose tokens cut characters.
#include "hymoe/tokenizer/streaming_detokenizer.h"

#include <gtest/gtest.h>

#include "hymoe/common/error.h"
#include "hymoe/tokenizer/utf8.h"
#include "js_reference.h"
#include "test_vocab.h"

namespace hymoe::tokenizer {
namespace {

class StreamingDetokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = testing::test_seed();
    rng_.seed(seed_);
    tok_ = testing::make_random_tiktoken(dir_.path(), rng_);
  }
  // The longest valid UTF-8 prefix of `bytes` (what may have been shown so far).
  static std::string valid_prefix(const std::string& bytes) {
    for (size_t cut = 0; cut <= 3 && cut <= bytes.size(); ++cut) {
      if (utf8::is_valid(std::string_view(bytes).substr(0, bytes.size() - cut))) {
        return bytes.substr(0, bytes.size() - cut);
      }
    }
    return "";
  }
  uint32_t seed_ = 0;
  std::mt19937 rng_;
  testing::TempDir dir_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(StreamingDetokenizerTest, WholeCharactersOnlyAndSameTextAsDecode) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  size_t split_chars = 0;
  for (int round = 0; round < 200; ++round) {
    const std::string text = testing::random_text(rng_, 1 + rng_() % 60);
    const auto ids = tok_->encode(text, false);
    StreamingDetokenizer detok(*tok_, {});
    std::string streamed;
    for (TokenId id : ids) {
      const std::string part = detok.push(id);
      ASSERT_TRUE(utf8::is_valid(part)) << testing::hex(part);
      split_chars += utf8::is_valid(tok_->token_bytes(id)) ? 0 : 1;
      streamed += part;
    }
    streamed += detok.finish();
    EXPECT_EQ(streamed, text);
    EXPECT_FALSE(detok.stopped());
  }
  EXPECT_GT(split_chars, 50u) << "the vocabulary should cut characters often";
}

TEST_F(StreamingDetokenizerTest, StopStringsStraddlingTokens) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  size_t straddling = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string text = testing::random_text(rng_, 5 + rng_() % 60);
    const auto ids = tok_->encode(text, false);
    // Stop strings: substrings of the text cut at character boundaries, plus one absent.
    std::vector<std::string> stops;
    for (int k = 0; k < 2; ++k) {
      size_t b = rng_() % text.size(), len = 1 + rng_() % 12;
      while (b > 0 && (uint8_t(text[b]) & 0xC0) == 0x80) --b;
      size_t e = std::min(text.size(), b + len);
      while (e < text.size() && (uint8_t(text[e]) & 0xC0) == 0x80) ++e;
      stops.push_back(text.substr(b, e - b));
    }
    stops.push_back("never-in-the-text");
    // Reference: after each token, the shown text is the valid prefix of the bytes so far; the
    // first time a stop string occurs in it, the output is what precedes its earliest occurrence.
    std::string expected, bytes;
    bool expect_stop = false;
    for (size_t i = 0; i < ids.size() && !expect_stop; ++i) {
      bytes += tok_->token_bytes(ids[i]);
      const std::string shown = valid_prefix(bytes);
      size_t best = std::string::npos;
      for (const auto& s : stops) best = std::min(best, shown.find(s));
      if (best != std::string::npos) {
        expected = shown.substr(0, best);
        expect_stop = true;
        // A stop completed by this token but begun in an earlier one straddles tokens.
        straddling += best + 1 < shown.size() - (tok_->token_bytes(ids[i]).size()) ? 1 : 0;
      }
    }
    if (!expect_stop) expected = text;

    StreamingDetokenizer detok(*tok_, {true, stops, {}});
    std::string streamed;
    for (TokenId id : ids) streamed += detok.push(id);
    streamed += detok.finish();
    EXPECT_EQ(streamed, expected) << "text " << testing::hex(text);
    EXPECT_EQ(detok.stopped(), expect_stop);
    if (expect_stop) {
      ASSERT_TRUE(detok.stop_index().has_value());
      EXPECT_LT(*detok.stop_index(), stops.size() - 1);
    }
  }
  EXPECT_GT(straddling, 10u);
}

TEST_F(StreamingDetokenizerTest, SpecialTokensSkippedOrShownAndBadIdsRejected) {
  const TokenId eos = *tok_->eos_id();
  StreamingDetokenizer skip(*tok_, {});
  EXPECT_EQ(skip.push(eos), "");
  StreamingDetokenizer show(*tok_, {false, {}, {}});
  EXPECT_EQ(show.push(eos), "<|eos|>");
  StreamingDetokenizer keep(*tok_, {.skip_special = true, .stop = {}, .keep_special = {eos}});
  EXPECT_EQ(keep.push(eos), "<|eos|>");  // a kept special token (a tool-call marker) shows
  EXPECT_THROW(skip.push(tok_->vocab_size()), Error);
  EXPECT_THROW(skip.push(-1), Error);
}

TEST_F(StreamingDetokenizerTest, IncompleteCharacterAtEndBecomesReplacement) {
  // The first byte of a 4-byte emoji as a single-byte token, then the stream ends.
  const std::string emoji = "\xF0\x9F\x98\x80";
  StreamingDetokenizer detok(*tok_, {});
  EXPECT_EQ(detok.push(*tok_->piece_to_id(emoji.substr(0, 1))), "");
  EXPECT_EQ(detok.push(*tok_->piece_to_id(emoji.substr(1, 1))), "");
  EXPECT_EQ(detok.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.finish(), "");
}

}  // namespace
}  // namespace hymoe::tokenizer
