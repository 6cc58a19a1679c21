// Generation's text path as the engine drives it, token by token: detokenizer -> reasoning
// split -> tool-call parse, on a small byte-level tiktoken vocabulary whose added tokens are
// Kimi-K2's tool-call markers (special tokens, as in Kimi-K2's tokenizer).
#include "hymoe/server/generation.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "hymoe/tokenizer/tokenizer.h"

namespace hymoe::server {
namespace {

std::string base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

class GenerationToolCalls : public ::testing::Test {
 protected:
  void SetUp() override {
    // std::random_device only makes the folder's name unique (not a test input: no seed to replay).
    dir_ = std::filesystem::temp_directory_path() /
           ("hymoe-generation-test-" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
    std::ofstream ranks(dir_ / "tiktoken.model");
    for (int b = 0; b < 256; ++b) ranks << base64(std::string(1, char(b))) << ' ' << b << '\n';
    ranks.close();
    nlohmann::json added = nlohmann::json::object();
    int id = 256;
    for (const auto& m : tool_call_markers(ToolCallFormat::kKimiK2)) added[std::to_string(id++)] = {{"content", m}};
    added[std::to_string(id)] = {{"content", "<|im_end|>"}};
    nlohmann::json cfg = {{"pat_str", R"(\S+|\s+)"}, {"added_tokens_decoder", added}, {"eos_token", "<|im_end|>"}};
    std::ofstream(dir_ / "tokenizer_config.json") << cfg.dump();
    tok_ = tokenizer::Tokenizer::load(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  struct Out {
    std::string content, reasoning;
    std::vector<ToolCall> calls;
    std::vector<size_t> call_at;  // offsets in `content`
  };
  // Generates `text` (as ids, one token at a time) and collects every delta.
  Out generate(const std::string& text, GenerationOptions o) {
    Generation gen(*tok_, std::move(o), nullptr);
    const auto ids = tok_->encode(text, false);
    Out out;
    auto drain = [&] {
      Generation::Delta d;
      while (gen.wait(d, std::chrono::milliseconds(0))) {
        for (size_t i = 0; i < d.tool_calls.size(); ++i) {
          out.call_at.push_back(out.content.size() + d.tool_call_at[i]);
          out.calls.push_back(std::move(d.tool_calls[i]));
        }
        out.content += d.content;
        out.reasoning += d.reasoning;
      }
    };
    for (size_t i = 0; i < ids.size(); ++i) {
      TokenOutput t;
      t.token = ids[i];
      t.index = static_cast<int64_t>(i);
      gen.on_token(t);
      drain();
    }
    gen.on_finish(FinishReason::kStop, "");
    drain();
    EXPECT_EQ(gen.tool_call_count(), static_cast<int32_t>(out.calls.size()));
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

GenerationOptions kimi_options(const tokenizer::Tokenizer& tok, bool keep) {
  GenerationOptions o;
  o.split_reasoning = true;
  o.tool_calls.format = ToolCallFormat::kKimiK2;
  if (keep) {
    for (const auto& m : tool_call_markers(ToolCallFormat::kKimiK2)) o.keep_special.push_back(*tok.special_token_id(m));
  }
  return o;
}

TEST_F(GenerationToolCalls, KimiMarkersAreSpecialTokensTheParserSees) {
  const std::string text =
      "<think>which tool?</think>Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
      "<|tool_call_argument_begin|>{\"city\": \"東京 😀\", \"o\": {\"a\": [1, null]}}<|tool_call_end|>"
      "<|tool_calls_section_end|><|im_end|>";
  ASSERT_TRUE(tok_->is_special(*tok_->special_token_id("<|tool_call_begin|>")));
  const Out out = generate(text, kimi_options(*tok_, true));
  EXPECT_EQ(out.reasoning, "which tool?");
  EXPECT_EQ(out.content, "Checking.");  // the EOS (not kept) is dropped as before
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, "{\"city\": \"東京 😀\", \"o\": {\"a\": [1, null]}}");
  // Without keeping the markers the detokenizer drops them: no calls, the text runs together.
  const Out lost = generate(text, kimi_options(*tok_, false));
  EXPECT_TRUE(lost.calls.empty());
  EXPECT_EQ(lost.content, "Checking.functions.get_weather:0{\"city\": \"東京 😀\", \"o\": {\"a\": [1, null]}}");
}

TEST_F(GenerationToolCalls, DeepSeekMarkersInPlainTextAndNoParserWithoutTools) {
  // DeepSeek's markers are ordinary (non-special) tokens: here they arrive byte by byte.
  const std::string text = "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\":\"ü\"}"
                           "<｜tool▁call▁end｜><｜tool▁calls▁end｜> Done.";
  GenerationOptions o;
  o.tool_calls.format = ToolCallFormat::kDeepSeekV31;
  o.tool_calls.id_prefix = "call_t_";
  const Out out = generate(text, o);
  EXPECT_EQ(out.content, "Sure. Done.");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.call_at, std::vector<size_t>{5});  // between "Sure." and " Done."
  EXPECT_EQ(out.calls[0].id, "call_t_0");
  EXPECT_EQ(out.calls[0].arguments, "{\"q\":\"ü\"}");
  // tool_choice none / no tools: the format stays kNone and the text is content.
  EXPECT_EQ(generate(text, GenerationOptions{}).content, text);
}

}  // namespace
}  // namespace hymoe::server
