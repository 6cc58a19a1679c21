#include "hymoe/server/tool_calls.h"

#include <gtest/gtest.h>

#include <random>

#include "../test_seed.h"

namespace hymoe::server {
namespace {

// Recorded model-style outputs, written the way each model's chat template writes a tool call.
#define DS_CALLS "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"
#define DS_CALL "<｜tool▁call▁begin｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_SEP "<｜tool▁sep｜>"
#define K_CALLS "<|tool_calls_section_begin|>"
#define K_CALLS_END "<|tool_calls_section_end|>"
#define K_CALL "<|tool_call_begin|>"
#define K_CALL_END "<|tool_call_end|>"
#define K_ARGS "<|tool_call_argument_begin|>"

constexpr const char* kNestedArgs =
    R"({"city": "東京", "units": {"temp": "°C", "list": [1, 2.5, {"deep": [true, null]}]}, "note": "quote \" and \\ and 😀"})";

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

ToolCallParserOptions opts(ToolCallFormat f) {
  ToolCallParserOptions o;
  o.format = f;
  o.id_prefix = "call_x_";
  return o;
}

// The whole output in one push (the non-streamed path).
Parsed parse_whole(const ToolCallParserOptions& o, const std::string& text) {
  ToolCallParser p(o);
  Parsed r;
  for (auto d : {p.push(text), p.finish()}) {
    r.content += d.content;
    for (auto& c : d.calls) r.calls.push_back(std::move(c));
  }
  return r;
}

// The output fed in pieces ending at the given cut positions (the streamed path).
Parsed parse_cut(const ToolCallParserOptions& o, const std::string& text, const std::vector<size_t>& cuts) {
  ToolCallParser p(o);
  Parsed r;
  size_t at = 0;
  auto take = [&r](ToolCallParser::Delta d) {
    r.content += d.content;
    for (auto& c : d.calls) r.calls.push_back(std::move(c));
  };
  for (size_t cut : cuts) {
    take(p.push(std::string_view(text).substr(at, cut - at)));
    at = cut;
  }
  take(p.push(std::string_view(text).substr(at)));
  take(p.finish());
  return r;
}

void expect_same(const Parsed& a, const Parsed& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << what;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].index, b.calls[i].index) << what;
    EXPECT_EQ(a.calls[i].id, b.calls[i].id) << what;
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << what;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << what;
  }
}

// Streaming gives what the whole text gives, cut at every byte (two pieces), byte by byte, and
// at random cuts.
void expect_streaming_matches(const ToolCallParserOptions& o, const std::string& text, std::mt19937& rng) {
  const Parsed whole = parse_whole(o, text);
  for (size_t i = 0; i <= text.size(); ++i) expect_same(whole, parse_cut(o, text, {i}), "cut at " + std::to_string(i));
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  expect_same(whole, parse_cut(o, text, every), "byte by byte");
  for (int k = 0; k < 20; ++k) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); i += 1 + rng() % 7) cuts.push_back(i);
    expect_same(whole, parse_cut(o, text, cuts), "random cuts");
  }
}

// One seed for the file's tests (test::test_seed(): printed, HYMOE_TEST_SEED replays it).
uint32_t seed() {
  static const uint32_t s = static_cast<uint32_t>(test::test_seed());
  return s;
}

TEST(ToolCallFormat, NamesAndFamilies) {
  for (auto f : {ToolCallFormat::kNone, ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                 ToolCallFormat::kKimiK2}) {
    EXPECT_EQ(parse_tool_call_format(tool_call_format_name(f)), f);
  }
  EXPECT_FALSE(parse_tool_call_format("auto").has_value());
  EXPECT_EQ(tool_call_format_for_family("deepseek-v3"), ToolCallFormat::kDeepSeekV3);
  EXPECT_EQ(tool_call_format_for_family("deepseek-r1"), ToolCallFormat::kDeepSeekV3);
  EXPECT_EQ(tool_call_format_for_family("deepseek-v3.1"), ToolCallFormat::kDeepSeekV31);
  EXPECT_EQ(tool_call_format_for_family("kimi-k2"), ToolCallFormat::kKimiK2);
  EXPECT_EQ(tool_call_format_for_family("unknown"), ToolCallFormat::kNone);
  EXPECT_TRUE(tool_call_markers(ToolCallFormat::kNone).empty());
  EXPECT_EQ(tool_call_markers(ToolCallFormat::kKimiK2).size(), 5u);
}

TEST(ToolCallParser, DeepSeekV3SingleAndParallel) {
  const auto o = opts(ToolCallFormat::kDeepSeekV3);
  const std::string one = DS_CALLS DS_CALL "function" DS_SEP "get_weather\n```json\n{\"city\": \"Paris\"}\n```" DS_CALL_END
      DS_CALLS_END;
  Parsed r = parse_whole(o, one);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].index, 0);
  EXPECT_EQ(r.calls[0].id, "call_x_0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\"}");

  const std::string two = std::string("Let me check both.") + DS_CALLS DS_CALL "function" DS_SEP "get_weather\n```json\n" +
                          kNestedArgs + "\n```" DS_CALL_END "\n" DS_CALL "function" DS_SEP
                          "search\n```json\n{}\n```" DS_CALL_END DS_CALLS_END "\n";
  r = parse_whole(o, two);
  EXPECT_EQ(r.content, "Let me check both.\n");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, kNestedArgs);
  EXPECT_EQ(r.calls[1].index, 1);
  EXPECT_EQ(r.calls[1].id, "call_x_1");
  EXPECT_EQ(r.calls[1].name, "search");
  EXPECT_EQ(r.calls[1].arguments, "{}");
}

TEST(ToolCallParser, DeepSeekV31SingleAndParallel) {
  const auto o = opts(ToolCallFormat::kDeepSeekV31);
  const std::string text = std::string(DS_CALLS DS_CALL "get_weather" DS_SEP) + kNestedArgs +
                           DS_CALL_END DS_CALL "run_code" DS_SEP "{\"code\":\"print('你好')\"}" DS_CALL_END DS_CALLS_END;
  const Parsed r = parse_whole(o, text);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, kNestedArgs);
  EXPECT_EQ(r.calls[1].name, "run_code");
  EXPECT_EQ(r.calls[1].arguments, "{\"code\":\"print('你好')\"}");
  // The V3 layout is not V3.1's: stays content.
  const std::string v3 = DS_CALLS DS_CALL "function" DS_SEP "f\n```json\n{}\n```" DS_CALL_END DS_CALLS_END;
  EXPECT_EQ(parse_whole(o, v3).content, v3);
}

TEST(ToolCallParser, KimiK2IdsCountTheConversationsCalls) {
  auto o = opts(ToolCallFormat::kKimiK2);
  const std::string text = std::string("I'll look it up.") + K_CALLS K_CALL "functions.get_weather:0" K_ARGS +
                           kNestedArgs + K_CALL_END K_CALL "functions.search:1" K_ARGS "{\"q\": \"ü\"}" K_CALL_END
                           K_CALLS_END;
  const Parsed r = parse_whole(o, text);
  EXPECT_EQ(r.content, "I'll look it up.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, kNestedArgs);
  EXPECT_EQ(r.calls[1].id, "functions.search:1");
  EXPECT_EQ(r.calls[1].name, "search");
  EXPECT_EQ(r.calls[1].index, 1);
  // Three calls earlier in the conversation: these are its 4th and 5th, whatever index the model
  // wrote (a repeated 0 here would collide with the first turn's call id).
  o.first_call_index = 3;
  const Parsed later = parse_whole(o, text);
  ASSERT_EQ(later.calls.size(), 2u);
  EXPECT_EQ(later.calls[0].id, "functions.get_weather:3");
  EXPECT_EQ(later.calls[1].id, "functions.search:4");
  EXPECT_EQ(later.calls[1].index, 1);  // the streamed delta's index stays this output's
}

TEST(ToolCallParser, CountsTheToolCallsOfAConversation) {
  const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u", "tool_calls": [{"id": "x"}]},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "a"}, {"id": "b"}]},
    {"role": "tool", "content": "r", "tool_call_id": "a"},
    {"role": "assistant", "content": "ok"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c"}]}
  ])");
  EXPECT_EQ(count_tool_calls(messages), 3);  // assistant messages only
  EXPECT_EQ(count_tool_calls(nlohmann::ordered_json::array()), 0);
  EXPECT_EQ(count_tool_calls(nlohmann::ordered_json()), 0);
}

TEST(ToolCallParser, MalformedOutputStaysContentByteForByte) {
  const std::vector<std::pair<ToolCallFormat, std::string>> bad = {
      {ToolCallFormat::kDeepSeekV3, DS_CALLS DS_CALL "function" DS_SEP "f\n```json\n{\"a\": }\n```" DS_CALL_END DS_CALLS_END},
      {ToolCallFormat::kDeepSeekV3, DS_CALLS DS_CALL "function" DS_SEP "f\n{\"a\": 1}" DS_CALL_END DS_CALLS_END},
      {ToolCallFormat::kDeepSeekV3, DS_CALLS DS_CALL "function" DS_SEP "\n```json\n{}\n```" DS_CALL_END DS_CALLS_END},
      {ToolCallFormat::kDeepSeekV3, DS_CALLS DS_CALL "python" DS_SEP "f\n```json\n{}\n```" DS_CALL_END DS_CALLS_END},
      {ToolCallFormat::kDeepSeekV3, DS_CALLS "garbage" DS_CALL "function" DS_SEP "f\n```json\n{}\n```" DS_CALL_END},
      {ToolCallFormat::kDeepSeekV31, DS_CALLS DS_CALL "f" DS_SEP "[1, 2]" DS_CALL_END DS_CALLS_END},
      {ToolCallFormat::kDeepSeekV31, DS_CALLS DS_CALL "f {}" DS_CALL_END DS_CALLS_END},
      {ToolCallFormat::kDeepSeekV31, DS_CALLS DS_CALL "two words" DS_SEP "{}" DS_CALL_END DS_CALLS_END},
      {ToolCallFormat::kDeepSeekV31, DS_CALL "f" DS_SEP "{}" DS_CALL_END},  // no section
      {ToolCallFormat::kKimiK2, K_CALLS K_CALL "functions.f:0" K_ARGS "{\"a\":1" K_CALL_END K_CALLS_END},
      {ToolCallFormat::kKimiK2, K_CALLS K_CALL "functions.f:0{}" K_CALL_END K_CALLS_END},
      {ToolCallFormat::kKimiK2, K_CALLS K_CALLS_END "trailing"},
      {ToolCallFormat::kKimiK2, "<|tool_calls_section_begi"},
  };
  std::mt19937 rng(seed());
  for (const auto& [f, text] : bad) {
    const auto o = opts(f);
    const Parsed r = parse_whole(o, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
    expect_streaming_matches(o, text, rng);
  }
}

TEST(ToolCallParser, OneBadCallDoesNotSpoilTheOthers) {
  const auto o = opts(ToolCallFormat::kDeepSeekV31);
  const std::string bad = DS_CALL "f" DS_SEP "{oops" DS_CALL_END;
  const std::string text = DS_CALLS + bad + DS_CALL "g" DS_SEP "{\"ok\":true}" DS_CALL_END DS_CALLS_END;
  const Parsed r = parse_whole(o, text);
  EXPECT_EQ(r.content, DS_CALLS + bad);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "g");
  EXPECT_EQ(r.calls[0].index, 0);
  // A call that never ends is cut short by the next call's begin.
  const std::string unended = DS_CALL "f" DS_SEP "{}";
  const Parsed r2 = parse_whole(o, DS_CALLS + unended + DS_CALL "g" DS_SEP "{}" DS_CALL_END DS_CALLS_END);
  EXPECT_EQ(r2.content, DS_CALLS + unended);
  ASSERT_EQ(r2.calls.size(), 1u);
  EXPECT_EQ(r2.calls[0].name, "g");
}

TEST(ToolCallParser, TruncatedOutputKeepsWholeCallsAndTheRestAsContent) {
  // Every prefix of a two-call output: calls are those that ended, everything else is content.
  const auto o = opts(ToolCallFormat::kKimiK2);
  const std::string call0 = K_CALL "functions.a:0" K_ARGS "{\"x\":\"é\"}" K_CALL_END;
  const std::string call1 = K_CALL "functions.b:1" K_ARGS "{\"y\":[1,{\"z\":2}]}" K_CALL_END;
  const std::string text = std::string("Hi ") + K_CALLS + call0 + call1 + K_CALLS_END;
  std::mt19937 rng(seed());
  for (size_t n = 0; n <= text.size(); ++n) {
    const std::string prefix = text.substr(0, n);
    const Parsed r = parse_whole(o, prefix);
    size_t want_calls = 0;
    std::string want_content = prefix;
    const size_t head = 3 + std::string(K_CALLS).size();
    if (n >= head + call0.size()) {
      want_calls = n >= head + call0.size() + call1.size() ? 2 : 1;
      // What follows the taken calls (a partial call or section end) is content.
      want_content = "Hi " + prefix.substr(head + call0.size() + (want_calls == 2 ? call1.size() : 0));
      if (n == text.size()) want_content = "Hi ";
    }
    EXPECT_EQ(r.calls.size(), want_calls) << n;
    EXPECT_EQ(r.content, want_content) << n;
    if (n % 7 == 0) expect_streaming_matches(o, prefix, rng);
  }
}

TEST(ToolCallParser, StreamingMatchesWholeTextAtEveryCut) {
  std::mt19937 rng(seed());
  const std::vector<std::pair<ToolCallFormat, std::string>> outputs = {
      {ToolCallFormat::kDeepSeekV3, std::string("<think>no</think>a < b") + DS_CALLS DS_CALL "function" DS_SEP
                                        "get_weather\n```json\n" + kNestedArgs + "\n```" DS_CALL_END "\n" DS_CALL
                                        "function" DS_SEP "x\n```json\n{}\n```" DS_CALL_END DS_CALLS_END "done"},
      {ToolCallFormat::kDeepSeekV31, std::string(DS_CALLS DS_CALL "f" DS_SEP) + kNestedArgs + DS_CALL_END " " DS_CALL
                                         "g" DS_SEP "{\"a\":\"<｜\"}" DS_CALL_END DS_CALLS_END},
      {ToolCallFormat::kKimiK2, std::string("text ") + K_CALLS " " K_CALL "functions.f:0" K_ARGS + kNestedArgs +
                                    K_CALL_END "\n" K_CALL "functions.g:1" K_ARGS "{}" K_CALL_END K_CALLS_END
                                    " after" K_CALLS K_CALL "functions.h:2" K_ARGS "{}" K_CALL_END},
  };
  for (const auto& [f, text] : outputs) {
    const Parsed r = parse_whole(opts(f), text);
    EXPECT_GE(r.calls.size(), 2u) << text;
    expect_streaming_matches(opts(f), text, rng);
  }
}

TEST(ToolCallParser, ContentBeforeACallStreamsBeforeIt) {
  ToolCallParser p(opts(ToolCallFormat::kDeepSeekV31));
  auto d = p.push("Sure, <｜tool");
  EXPECT_EQ(d.content, "Sure, ");  // the possible marker is held back
  d = p.push("▁calls▁begin｜>" DS_CALL "f" DS_SEP "{\"a\":");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.calls.empty());
  d = p.push("1}" DS_CALL_END DS_CALLS_END " after");
  ASSERT_EQ(d.calls.size(), 1u);
  ASSERT_EQ(d.call_at.size(), 1u);
  EXPECT_EQ(d.call_at[0], 0u);  // the call comes before this push's content
  EXPECT_EQ(d.content, " after");
  EXPECT_EQ(d.calls[0].arguments, "{\"a\":1}");
  EXPECT_EQ(p.call_count(), 1);
  d = p.finish();
  EXPECT_EQ(d.content, "");
}

TEST(ToolCallParser, NamedChoiceAndMaxCalls) {
  const std::string a = DS_CALL "a" DS_SEP "{}" DS_CALL_END;
  const std::string b = DS_CALL "b" DS_SEP "{}" DS_CALL_END;
  const std::string text = DS_CALLS + a + b + DS_CALLS_END;
  auto o = opts(ToolCallFormat::kDeepSeekV31);
  o.only_name = "b";
  Parsed r = parse_whole(o, text);
  EXPECT_EQ(r.content, DS_CALLS + a);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "b");
  o = opts(ToolCallFormat::kDeepSeekV31);
  o.max_calls = 1;  // parallel_tool_calls=false
  r = parse_whole(o, text);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.content, b);
}

TEST(ToolCallParser, NoneFormatPassesEverything) {
  const std::string text = DS_CALLS DS_CALL "f" DS_SEP "{}" DS_CALL_END DS_CALLS_END;
  const Parsed r = parse_whole(opts(ToolCallFormat::kNone), text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
}

}  // namespace
}  // namespace hymoe::server
