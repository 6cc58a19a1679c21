// Forced tool calls (tool_choice required / a named function, tool_calls.h): the grammar of each
// format as a JsonSequenceMachine. Random walks over the symbols it allows (bytes and marker
// tokens) always finish, and what they finish parses back through ToolCallParser into calls of the
// given tools whose arguments validate; the token mask agrees with feeding each token; through the
// TokenConstraint seam with random logits, end-of-sequence comes only at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "hymoe/server/json_constraint.h"
#include "hymoe/server/json_sequence.h"
#include "hymoe/server/tool_calls.h"
#include "json_schema_validator.h"
#include "../test_seed.h"

namespace hymoe::server {
namespace {

using json = nlohmann::ordered_json;
using testing_schema::validate;

// One seed for the file's tests (test::test_seed(): printed, HYMOE_TEST_SEED replays it).
uint32_t seed() {
  static const uint32_t s = static_cast<uint32_t>(test::test_seed());
  return s;
}

// "get" prefixes "get_weather"; "get" declares no parameters (any object).
const char* kTools[][2] = {
    {"get_weather", R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},
                        "required":["city"],"additionalProperties":false})"},
    {"get", nullptr},
    {"search", R"({"type":"object","properties":{"q":{"type":"string"},
                   "filters":{"type":"array","items":{"enum":["news","web"]},"maxItems":2}},"required":["q","filters"]})"},
};

struct Tools {
  std::vector<ForcedTool> forced;
  std::map<std::string, json> schemas;  // null: any object
};

Tools make_tools(bool all) {
  Tools t;
  for (const auto& [name, schema] : kTools) {
    if (!all && std::string(name) != "get_weather") continue;
    const json s = schema ? json::parse(schema) : json();
    t.forced.push_back({name, schema ? compile_json_schema(s) : nullptr});
    t.schemas[name] = s;
  }
  return t;
}

// A vocabulary: the 256 bytes, pieces that span the grammar's parts, the format's markers, end.
struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> special;
  int32_t eos = 0;
  std::map<std::string, int32_t> markers;

  Vocab(ToolCallFormat f, bool marker_tokens) {
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (const char* t : {"function", "get", "_weather", "search", "functions.", ":0", ":12", "\n```json\n", "\n```",
                          "}\n```", "{\"", "\":\"", "\",\"", "\"}", "city", "Paris", "\"q\":", "news", "\"]}", "<｜tool",
                          "<|tool_call", "{}", "\":[", "</think>", "</think>{"}) {
      tokens.emplace_back(t);
    }
    if (marker_tokens) {
      for (const auto& m : tool_call_markers(f)) {
        markers[m] = static_cast<int32_t>(tokens.size());
        // Kimi-K2's markers are special tokens (the byte mask leaves them out); DeepSeek's are not.
        if (f == ToolCallFormat::kKimiK2) special.push_back(static_cast<int32_t>(tokens.size()));
        tokens.push_back(m);
      }
    }
    eos = static_cast<int32_t>(tokens.size());
    tokens.emplace_back("<eos>");
  }
  std::optional<int32_t> token_of(std::string_view m) const {
    const auto it = markers.find(std::string(m));
    if (it == markers.end()) return std::nullopt;
    return it->second;
  }
};

struct Case {
  ToolCallFormat format;
  bool marker_tokens;
  bool parallel;
  bool all_tools;  // required (else: the named function get_weather)
  std::string name() const {
    return std::string(tool_call_format_name(format)) + (marker_tokens ? " tokens" : " text") +
           (parallel ? " parallel" : " one") + (all_tools ? " required" : " named");
  }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (auto f : {ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31, ToolCallFormat::kKimiK2}) {
    for (bool tok : {true, false}) {
      for (bool par : {false, true}) {
        for (bool all : {true, false}) out.push_back({f, tok, par, all});
      }
    }
  }
  return out;
}

std::shared_ptr<const JsonSequenceGrammar> grammar_for(const Case& c, const Vocab& v, const Tools& t) {
  return tool_call_grammar(c.format, t.forced, c.parallel ? INT32_MAX : 1,
                           [&](std::string_view m) { return v.token_of(m); });
}

// The output parses back into calls of the tools, every byte of it, with valid arguments.
void expect_parses(const Case& c, const Tools& t, const std::string& text) {
  ToolCallParserOptions o;
  o.format = c.format;
  if (!c.all_tools) o.only_name = "get_weather";
  if (!c.parallel) o.max_calls = 1;
  ToolCallParser p(o);
  ToolCallParser::Delta a = p.push(text), b = p.finish();
  EXPECT_EQ(a.content + b.content, "") << c.name() << ": " << text;
  ASSERT_GE(a.calls.size(), 1u) << c.name() << ": " << text;
  if (!c.parallel) {
    EXPECT_EQ(a.calls.size(), 1u) << c.name() << ": " << text;
  }
  for (const ToolCall& call : a.calls) {
    ASSERT_TRUE(t.schemas.count(call.name)) << c.name() << ": " << call.name;
    json args;
    ASSERT_NO_THROW(args = json::parse(call.arguments)) << c.name() << ": " << call.arguments;
    ASSERT_TRUE(args.is_object());
    const json& schema = t.schemas.at(call.name);
    if (!schema.is_null()) {
      EXPECT_TRUE(validate(args, schema, schema)) << c.name() << ": " << call.arguments;
    }
  }
}

// A random walk over the symbols the machine allows: random for `steps`, then towards the end (the
// section's end marker, any other marker, then bytes that close JSON).
std::string random_walk(const JsonSequenceMachine& start, const Vocab& v, const std::string& section_end,
                        std::mt19937& rng, int steps, std::string& why) {
  JsonSequenceMachine m = start;
  std::string text;
  static constexpr std::string_view kPrefer = "\"}],0:ntf";
  for (int i = 0; i < steps + 20000 && !m.complete(); ++i) {
    std::string bytes;
    for (int b = 0; b < 256; ++b) {
      JsonSequenceMachine n = m;
      if (n.feed(static_cast<char>(b))) bytes += static_cast<char>(b);
    }
    std::vector<int32_t> toks;
    m.tokens([&](int32_t id) { toks.push_back(id); });
    if (bytes.empty() && toks.empty()) {
      why = "stuck after " + text;
      return text;
    }
    const size_t n = bytes.size() + toks.size();
    size_t pick = rng() % n;
    if (i >= steps) {
      // The section's end marker as a token, any token, a byte that goes on spelling the end
      // marker, a byte that closes JSON, one that starts the end marker, the first allowed.
      std::optional<size_t> choice;
      for (size_t k = 0; k < toks.size(); ++k) {
        if (v.tokens[static_cast<size_t>(toks[k])] == section_end) choice = bytes.size() + k;
      }
      if (!choice && !toks.empty()) choice = bytes.size();
      for (size_t k = std::min(text.size(), section_end.size() - 1); !choice && k >= 1; --k) {
        if (!std::string_view(text).ends_with(std::string_view(section_end).substr(0, k))) continue;
        if (const size_t at = bytes.find(section_end[k]); at != std::string::npos) choice = at;
      }
      for (char p : kPrefer) {
        if (const size_t at = bytes.find(p); !choice && at != std::string::npos) choice = at;
      }
      if (const size_t at = bytes.find(section_end[0]); !choice && at != std::string::npos) choice = at;
      pick = choice.value_or(0);
    }
    if (pick < bytes.size()) {
      EXPECT_TRUE(m.feed(bytes[pick]));
      text += bytes[pick];
    } else {
      const int32_t id = toks[pick - bytes.size()];
      EXPECT_TRUE(m.feed_token(id));
      text += v.tokens[static_cast<size_t>(id)];
    }
  }
  if (!m.complete()) why = "not finished: " + text;
  return text;
}

TEST(ToolCallGrammar, RandomWalksFinishAndParseBack) {
  std::mt19937 rng(seed());
  for (const Case& c : cases()) {
    const Vocab v(c.format, c.marker_tokens);
    const Tools t = make_tools(c.all_tools);
    const auto g = grammar_for(c, v, t);
    const JsonSequenceMachine start(*g);
    for (int w = 0; w < 25; ++w) {
      std::string why;
      const std::string text = random_walk(start, v, tool_call_markers(c.format)[1], rng,
                                           static_cast<int>(rng() % 400), why);
      ASSERT_TRUE(why.empty()) << c.name() << ": " << why;
      expect_parses(c, t, text);
    }
  }
}

// The texts the chat templates write parse as they are, and the machine takes them.
TEST(ToolCallGrammar, TakesTheTemplatesOwnRendering) {
  const Tools t = make_tools(true);
  const std::string v3 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"東京\"}\n```"
      "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get\n```json\n{\"any\":[1,{}]}\n```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  const std::string v31 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\":\"x\",\"filters\":[\"web\"]}"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  const std::string kimi =
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.get:7<|tool_call_argument_begin|>{}"
      "<|tool_call_end|><|tool_call_begin|>functions.search:8<|tool_call_argument_begin|>"
      "{\"q\":\"y\",\"filters\":[]}<|tool_call_end|><|tool_calls_section_end|>";
  for (const auto& [f, text] : {std::pair{ToolCallFormat::kDeepSeekV3, v3}, std::pair{ToolCallFormat::kDeepSeekV31, v31},
                                std::pair{ToolCallFormat::kKimiK2, kimi}}) {
    const auto g = tool_call_grammar(f, t.forced, INT32_MAX, [](std::string_view) { return std::nullopt; });
    JsonSequenceMachine m(*g);
    EXPECT_TRUE(m.feed(std::string_view(text))) << text;
    EXPECT_TRUE(m.complete()) << text;
    expect_parses(Case{f, false, true, true}, t, text);
  }
}

// A marker inside an argument string would end the call when parsed back: refused at its last byte.
TEST(ToolCallGrammar, RefusesMarkersInsideArguments) {
  const Tools t = make_tools(true);
  const auto g = tool_call_grammar(ToolCallFormat::kDeepSeekV31, t.forced, INT32_MAX,
                                   [](std::string_view) { return std::nullopt; });
  JsonSequenceMachine m(*g);
  ASSERT_TRUE(m.feed(std::string_view("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get<｜tool▁sep｜>{\"a\":\"<<｜tool▁call")));
  JsonSequenceMachine end = m;
  EXPECT_FALSE(end.feed(std::string_view("▁end｜>")));
  EXPECT_TRUE(end.feed(std::string_view("▁end｜")));  // all but its last byte
  EXPECT_TRUE(m.feed(std::string_view("s!\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>")));
  EXPECT_TRUE(m.complete());
  // Names outside the tools, Kimi's index past 6 digits, no text after the section.
  const auto kimi = tool_call_grammar(ToolCallFormat::kKimiK2, t.forced, 1, [](std::string_view) { return std::nullopt; });
  JsonSequenceMachine k(*kimi);
  JsonSequenceMachine bad = k;
  EXPECT_FALSE(bad.feed(std::string_view("<|tool_calls_section_begin|><|tool_call_begin|>functions.nope")));
  EXPECT_TRUE(k.feed(std::string_view("<|tool_calls_section_begin|><|tool_call_begin|>functions.get:123456")));
  bad = k;
  EXPECT_FALSE(bad.feed('7'));
  EXPECT_TRUE(k.feed(std::string_view("<|tool_call_argument_begin|>{}<|tool_call_end|>")));
  bad = k;
  EXPECT_FALSE(bad.feed(std::string_view("<|tool_call_begin|>")));  // max_calls 1
  EXPECT_TRUE(k.feed(std::string_view("<|tool_calls_section_end|>")));
  EXPECT_TRUE(k.complete());
  EXPECT_FALSE(k.feed(' '));
}

// JsonTokenMask::allowed plus the machine's tokens agree with feeding each token alone (the token
// symbol first, else its bytes, as the constraint's accept does).
TEST(ToolCallGrammar, TokenMaskMatchesFeedingEachToken) {
  std::mt19937 rng(seed() + 1);
  std::vector<uint8_t> out;
  for (const Case& c : cases()) {
    const Vocab v(c.format, c.marker_tokens);
    const Tools t = make_tools(c.all_tools);
    const auto g = grammar_for(c, v, t);
    std::vector<int32_t> special = v.special;
    special.push_back(v.eos);
    const JsonTokenMask mask(v.tokens, special);
    for (int w = 0; w < 3; ++w) {
      JsonSequenceMachine m(*g);
      for (int step = 0; step < 80 && !m.complete(); ++step) {
        mask.allowed(m, out);
        m.tokens([&](int32_t id) { out[static_cast<size_t>(id)] = 1; });
        std::vector<int32_t> ok;
        for (size_t id = 0; id < v.tokens.size(); ++id) {
          JsonSequenceMachine n = m;
          const bool fed = n.feed_token(static_cast<int32_t>(id)) ||
                           (!mask.token_bytes(static_cast<int32_t>(id)).empty() &&
                            n.feed(mask.token_bytes(static_cast<int32_t>(id))));
          ASSERT_EQ(out[id] != 0, fed) << c.name() << " token " << v.tokens[id];
          if (out[id]) ok.push_back(static_cast<int32_t>(id));
        }
        ASSERT_FALSE(ok.empty()) << c.name();
        const int32_t id = ok[rng() % ok.size()];
        ASSERT_TRUE(m.feed_token(id) || m.feed(mask.token_bytes(id)));
      }
    }
  }
}

// Through the TokenConstraint seam: random logits, the best allowed token each step, a pull
// towards the end after a while; end-of-sequence is refused until the section closes and is then
// the only token. With in_reasoning the thought is free text until "</think>".
TEST(ToolCallGrammar, ConstraintMasksToParsableCalls) {
  std::mt19937 rng(seed() + 2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Case& c : cases()) {
    const Vocab v(c.format, c.marker_tokens);
    const Tools t = make_tools(c.all_tools);
    auto vocab = std::make_shared<JsonModeVocab>(v.tokens, v.special, v.eos);
    const bool reasoning = c.format == ToolCallFormat::kDeepSeekV3 && c.parallel;
    JsonSequenceConstraintFactory factory(vocab, reasoning, grammar_for(c, v, t));
    const std::string section_end = tool_call_markers(c.format)[1];
    for (int w = 0; w < 3; ++w) {
      auto con = factory.start();
      std::string text;
      bool ended = false, closed = !reasoning;
      for (int step = 0; step < 3000 && !ended; ++step) {
        std::vector<float> logits(v.tokens.size());
        for (float& x : logits) x = normal(rng);
        if (!closed && step > 5) {
          for (size_t id = 0; id < v.tokens.size(); ++id) {
            if (v.tokens[id] == "</think>") logits[id] += 100.0f;
          }
        }
        if (step > 60) {
          float bonus = 60.0f;
          for (char p : std::string_view("\"}],0:ntf")) logits[static_cast<uint8_t>(p)] += (bonus -= 2.0f);
          for (size_t id = 257; id < v.tokens.size(); ++id) {
            if (v.tokens[id] == section_end) logits[id] += 90.0f;
          }
          logits[static_cast<size_t>(v.eos)] += 100.0f;
        }
        const float eos_before = logits[static_cast<size_t>(v.eos)];
        con->mask(logits);
        const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
        ASSERT_TRUE(std::isfinite(logits[static_cast<size_t>(best)])) << c.name() << ": nothing allowed after " << text;
        if (std::isfinite(logits[static_cast<size_t>(v.eos)])) {
          // The end is allowed only as the last token, alone and with its own logit.
          EXPECT_EQ(logits[static_cast<size_t>(v.eos)], eos_before);
          EXPECT_EQ(std::count_if(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }), 1);
        }
        ASSERT_TRUE(con->accept(static_cast<int32_t>(best)));
        if (best == v.eos) {
          ended = true;
          continue;
        }
        text += v.tokens[static_cast<size_t>(best)];
        if (!closed) {
          const size_t at = text.find("</think>");
          if (at != std::string::npos) {
            closed = true;
            text.erase(0, at + 8);
          }
        }
      }
      ASSERT_TRUE(ended) << c.name() << ": " << text;
      expect_parses(c, t, text);
    }
  }
}

TEST(ToolCallGrammar, BuilderRefusesNondeterminism) {
  JsonSequenceGrammar::Builder b;
  const auto a = b.text(JsonSequenceGrammar::Builder::kStart, "ab");
  EXPECT_THROW(b.text(JsonSequenceGrammar::Builder::kStart, "ab", b.add_node()), Error);
  b.json(a, compile_json_schema(json{{"type", "object"}}));
  EXPECT_THROW(b.text(a, "x"), Error);  // a JSON node takes no transitions
  const auto d = b.digits(b.text(JsonSequenceGrammar::Builder::kStart, "c"), 1, 2);
  b.text(d, "5");
  EXPECT_THROW(b.build(), Error);  // a digit right after a digit run
  EXPECT_THROW(tool_call_grammar(ToolCallFormat::kNone, make_tools(true).forced, 1,
                                 [](std::string_view) { return std::nullopt; }),
               Error);
}

}  // namespace
}  // namespace hymoe::server
