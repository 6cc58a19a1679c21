// JSON mode end to end below HTTP: the tiny preset's random weights with DeepSeek-V3's real
// tokenizer, loaded by Runtime (the server's own engine and scheduler), requests submitted with
// JSON mode's constraint and read back through Generation (what both the streamed and the
// non-streamed routes read). Random weights make JSON unlikely by themselves: only the constraint
// can make every output parse.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hymoe/server/generation.h"
#include "hymoe/server/json_constraint.h"
#include "hymoe/server/runtime.h"
#include "hymoe/server/tool_calls.h"
#include "json_schema_validator.h"
#include "../test_seed.h"

namespace hymoe::server {
namespace {

// One seed for the file's tests (test::test_seed(): printed, HYMOE_TEST_SEED replays it).
uint32_t seed() {
  static const uint32_t s = static_cast<uint32_t>(test::test_seed());
  return s;
}

struct Outcome {
  std::string content, reasoning;
  std::vector<TokenLogprob> logprobs;
  std::vector<ToolCall> calls;
  FinishReason reason = FinishReason::kError;
  std::string error;
  int64_t tokens = 0;
};

class JsonModeTiny : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(std::filesystem::path(HYMOE_TEST_TOKENIZER_DIR) / "tokenizer.json")) return;
    ServerConfig c;
    c.load_format = "dummy";
    c.preset = "tiny";
    c.tokenizer = HYMOE_TEST_TOKENIZER_DIR;
    c.backend = "cpu";
    c.threads = 2;
    c.kv_cache_bytes = 64ll << 20;
    c.max_running = 8;
    rt_ = Runtime::load(c).release();
  }
  static void TearDownTestSuite() {
    delete rt_;
    rt_ = nullptr;
  }
  void SetUp() override {
    if (!rt_) GTEST_SKIP() << "no tokenizer at " << HYMOE_TEST_TOKENIZER_DIR << " (npm ci in tests/js)";
  }

  // Submits a prompt in JSON mode; the outcome arrives through Generation as the routes read it.
  // schema: structured outputs (json_schema); null: JSON mode (json_object).
  static std::shared_ptr<Generation> submit(const std::string& prompt, SamplingParams sampling, bool in_reasoning,
                                            const std::string& id,
                                            std::shared_ptr<const JsonSchema> schema = nullptr) {
    GenerationOptions go;
    go.id = id;
    go.stop = sampling.stop;
    go.logprobs = sampling.logprobs;
    go.split_reasoning = true;
    go.starts_in_reasoning = in_reasoning;
    auto gen = std::make_shared<Generation>(*rt_->tokenizer, go, nullptr);
    sampling.constraint = std::make_shared<JsonConstraintFactory>(rt_->json_mode, in_reasoning, std::move(schema));
    GenerationRequest r;
    r.id = id;
    r.prompt = rt_->tokenizer->encode(prompt, /*add_special=*/true);
    r.sampling = std::move(sampling);
    r.callbacks = gen->callbacks(gen);
    rt_->scheduler->submit(std::move(r));
    return gen;
  }
  static Outcome collect(Generation& gen) {
    Outcome o;
    Generation::Delta d;
    while (true) {
      if (!gen.wait(d, std::chrono::milliseconds(200))) continue;
      o.content += d.content;
      o.reasoning += d.reasoning;
      for (auto& lp : d.logprobs) o.logprobs.push_back(std::move(lp));
      for (auto& c : d.tool_calls) o.calls.push_back(std::move(c));
      if (d.finished) {
        o.reason = d.reason;
        o.error = d.error;
        o.tokens = gen.usage().completion_tokens;
        return o;
      }
    }
  }

  // Stopped on its own: one JSON object. Cut by max_tokens: a prefix of one.
  static void expect_json(const Outcome& o, const std::string& what) {
    ASSERT_TRUE(o.reason == FinishReason::kStop || o.reason == FinishReason::kLength) << what << ": " << o.error;
    JsonPrefixMachine m;
    EXPECT_TRUE(m.feed(o.content)) << what << ": not a JSON object prefix: " << o.content;
    if (o.reason == FinishReason::kStop) {
      nlohmann::json j;
      ASSERT_NO_THROW(j = nlohmann::json::parse(o.content)) << what << ": " << o.content;
      EXPECT_TRUE(j.is_object()) << what << ": " << o.content;
    } else {
      EXPECT_FALSE(nlohmann::json::accept(o.content) && !m.complete()) << what << ": " << o.content;
    }
  }

  static Runtime* rt_;
};

Runtime* JsonModeTiny::rt_ = nullptr;

const char* kPrompts[] = {
    "Reply with a JSON object describing a cat.",
    "{\"name\":",
    "Hello",
    "List three colours as JSON.",
};

// Many seeds and temperatures, greedy and top-p, eight requests batched at a time: every output
// that ends is a JSON object, every one cut short a prefix of one. A logit_bias towards the
// tokens that close strings and objects makes most of them end within max_tokens (the bias is
// added after the mask, so it cannot bring a refused token back).
TEST_F(JsonModeTiny, OutputAlwaysParsesAcrossSeedsAndTemperatures) {
  const auto close_quote = rt_->tokenizer->encode("\"", false);
  const auto close_brace = rt_->tokenizer->encode("}", false);
  ASSERT_EQ(close_quote.size(), 1u);
  ASSERT_EQ(close_brace.size(), 1u);
  std::mt19937 rng(seed());
  int stopped = 0, cut = 0;
  struct Case {
    double temperature, top_p;
    bool bias;
  };
  std::vector<Case> cases;
  for (double t : {0.0, 0.5, 1.0, 1.5, 2.0}) {
    for (double p : {1.0, 0.9}) {
      for (bool bias : {false, true, true}) cases.push_back({t, p, bias});
    }
  }
  for (size_t first = 0; first < cases.size(); first += 8) {
    std::vector<std::pair<std::string, std::shared_ptr<Generation>>> batch;
    for (size_t i = first; i < std::min(cases.size(), first + 8); ++i) {
      SamplingParams s;
      s.temperature = cases[i].temperature;
      s.top_p = cases[i].top_p;
      s.seed = rng();
      s.max_tokens = 40;
      if (cases[i].bias) {
        s.logit_bias = {{close_quote[0], 6.0f}, {close_brace[0], 6.0f}};
        std::sort(s.logit_bias.begin(), s.logit_bias.end());
      }
      const std::string what = fmt::format("T {} top_p {} bias {} seed {}", s.temperature, s.top_p, cases[i].bias,
                                           *s.seed);
      batch.emplace_back(what, submit(kPrompts[i % std::size(kPrompts)], s, false, "json-" + std::to_string(i)));
    }
    for (auto& [what, gen] : batch) {
      const Outcome o = collect(*gen);
      expect_json(o, what);
      (o.reason == FinishReason::kStop ? stopped : cut) += 1;
    }
  }
  std::printf("json mode: %d outputs ended as objects, %d cut by max_tokens\n", stopped, cut);
  EXPECT_GT(stopped, static_cast<int>(cases.size()) / 4);  // the parse above is then no vacuous check
}

// max_tokens ends a JSON output like any other: finish reason length, the text a valid prefix.
// Every token holding a '}' is biased away (the bias comes after the mask), so that no seed can
// close the object ("{", "}", end) inside the 3 tokens and finish with stop instead.
TEST_F(JsonModeTiny, MaxTokensCutsWithLength) {
  SamplingParams s;
  s.temperature = 1.0;
  s.seed = seed();
  s.max_tokens = 3;
  const tokenizer::Tokenizer& tok = *rt_->tokenizer;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special(id)) continue;
    std::string_view bytes;
    try {
      bytes = tok.token_bytes(id);
    } catch (const std::exception&) {
      continue;  // an id the vocabulary leaves undefined
    }
    if (bytes.find('}') != std::string_view::npos) s.logit_bias.emplace_back(id, -100.0f);
  }
  ASSERT_FALSE(s.logit_bias.empty());
  const Outcome o = collect(*submit("Give me JSON", s, false, "json-len"));
  EXPECT_EQ(o.reason, FinishReason::kLength);
  EXPECT_EQ(o.tokens, 3);
  expect_json(o, "max_tokens 3");
}

// Log-probabilities are those of the constrained distribution: the chosen token's and every
// alternative's finite, no alternative a token the grammar refuses at that point.
TEST_F(JsonModeTiny, LogprobsComeFromTheMaskedDistribution) {
  SamplingParams s;
  s.temperature = 0.8;
  s.seed = seed();
  s.max_tokens = 24;
  s.logprobs = true;
  s.top_logprobs = 5;
  const Outcome o = collect(*submit("JSON please", s, false, "json-lp"));
  expect_json(o, "logprobs");
  ASSERT_EQ(static_cast<int64_t>(o.logprobs.size()), o.tokens);  // end-of-sequence is no token of the output
  JsonPrefixMachine m;
  for (const TokenLogprob& lp : o.logprobs) {
    EXPECT_TRUE(std::isfinite(lp.logprob));
    EXPECT_LE(lp.logprob, 0.0f);
    for (size_t k = 0; k < lp.top.size(); ++k) {
      EXPECT_TRUE(std::isfinite(lp.top[k].second)) << lp.top_bytes[k];
      JsonPrefixMachine alt = m;
      EXPECT_TRUE(alt.feed(lp.top_bytes[k])) << "alternative '" << lp.top_bytes[k] << "' after '" << lp.bytes << "'";
    }
    ASSERT_TRUE(m.feed(lp.bytes));
  }
}

// Output that starts in a thought: free text, then the content after "</think>" is the JSON.
// A bias on the close's pieces makes the random model close the thought soon.
TEST_F(JsonModeTiny, ContentAfterTheThoughtIsJson) {
  const auto pieces = rt_->tokenizer->encode("</think>", false);
  int closed = 0;
  for (int i = 0; i < 6; ++i) {
    SamplingParams s;
    s.temperature = 1.0;
    s.seed = seed() + static_cast<uint32_t>(i);
    s.max_tokens = 64;
    for (int32_t t : pieces) s.logit_bias.emplace_back(t, 100.0f);
    std::sort(s.logit_bias.begin(), s.logit_bias.end());
    s.logit_bias.erase(std::unique(s.logit_bias.begin(), s.logit_bias.end(),
                                   [](const auto& a, const auto& b) { return a.first == b.first; }),
                       s.logit_bias.end());
    const Outcome o = collect(*submit("Think, then answer in JSON.", s, true, "json-think-" + std::to_string(i)));
    if (o.reason == FinishReason::kStop || !o.content.empty()) ++closed;
    expect_json(o, fmt::format("thought, seed {}", *s.seed));
    if (o.reason == FinishReason::kStop) {
      EXPECT_FALSE(o.content.empty());  // never ends inside the thought
    }
  }
  std::printf("json mode after a thought: %d of 6 closed the thought (pieces:", closed);
  for (int32_t t : pieces) std::printf(" %d", t);
  std::printf(")\n");
  EXPECT_GT(closed, 0);  // each run closes with probability ~0.8: the JSON after a thought is exercised
}

// Structured outputs: several schemas (required and optional properties, enums, nullable, anyOf,
// nested arrays of objects, a recursive $ref, free-form values) over temperatures and seeds. Every
// output that ends parses and validates; every one cut short is a prefix the schema's machine
// accepts. Random weights: only the constraint can make them conform.
TEST_F(JsonModeTiny, SchemaOutputsValidateAcrossSeedsAndTemperatures) {
  const char* schemas[] = {
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
          "email":{"type":["string","null"]}},"required":["name","age","email"],"additionalProperties":false})",
      R"({"type":"object","properties":{"unit":{"enum":["celsius","fahrenheit"]},"ok":{"type":"boolean"},
          "reading":{"anyOf":[{"type":"number"},{"type":"null"}]},"note":{"type":"string"}},
          "required":["unit","ok","reading"],"additionalProperties":false})",
      R"({"type":"object","properties":{"items":{"type":"array","items":{"type":"object",
          "properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":2}},
          "required":["id","tags"],"additionalProperties":false},"minItems":1,"maxItems":2}},
          "required":["items"],"additionalProperties":false})",
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"const":7},"kids":{"type":"array",
          "items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v","kids"],"additionalProperties":false}},
          "$ref":"#/$defs/node"})",
      R"({"type":"object","properties":{"meta":{"type":"object"},"any":{}},"required":["meta","any"]})",
  };
  std::vector<int32_t> closers;
  for (const char* t : {"\"", "}", "]", ",", "0"}) {
    const auto ids = rt_->tokenizer->encode(t, false);
    ASSERT_EQ(ids.size(), 1u) << t;
    closers.push_back(ids[0]);
  }
  std::mt19937 rng(seed() + 45);
  int stopped = 0, cut = 0, total = 0;
  for (size_t si = 0; si < std::size(schemas); ++si) {
    const auto doc = nlohmann::ordered_json::parse(schemas[si]);
    const auto compiled = compile_json_schema(doc);
    std::vector<std::pair<std::string, std::shared_ptr<Generation>>> batch;
    int i = 0;
    for (double t : {0.0, 0.7, 1.3, 2.0}) {
      for (bool bias : {true, false}) {
        SamplingParams s;
        s.temperature = t;
        s.seed = rng();
        s.max_tokens = 64;
        if (bias) {
          for (int32_t id : closers) s.logit_bias.emplace_back(id, 5.0f);
          std::sort(s.logit_bias.begin(), s.logit_bias.end());
        }
        const std::string what = fmt::format("schema {} T {} bias {} seed {}", si, t, bias, *s.seed);
        batch.emplace_back(what, submit(kPrompts[i % std::size(kPrompts)], s, false,
                                        fmt::format("schema-{}-{}", si, i), compiled));
        ++i;
      }
    }
    for (auto& [what, gen] : batch) {
      const Outcome o = collect(*gen);
      ++total;
      ASSERT_TRUE(o.reason == FinishReason::kStop || o.reason == FinishReason::kLength) << what << ": " << o.error;
      JsonSchemaMachine m(*compiled);
      EXPECT_TRUE(m.feed(std::string_view(o.content))) << what << ": not a conforming prefix: " << o.content;
      if (o.reason == FinishReason::kStop) {
        ++stopped;
        EXPECT_TRUE(m.complete()) << what << ": " << o.content;
        nlohmann::ordered_json j;
        ASSERT_NO_THROW(j = nlohmann::ordered_json::parse(o.content)) << what << ": " << o.content;
        EXPECT_TRUE(testing_schema::validate(j, doc, doc)) << what << ": " << o.content;
      } else {
        ++cut;
      }
    }
  }
  std::printf("json schema: %d of %d outputs ended and validated, %d cut by max_tokens\n", stopped, total, cut);
  EXPECT_GT(stopped, total / 4);
}

// Forced tool calls (tool_choice required / a named function) in DeepSeek-V3's format with its
// real markers: every output that ends is nothing but calls of the given tools whose arguments
// validate, read back through Generation's tool-call parse as the routes read them.
TEST_F(JsonModeTiny, ForcedToolCallsParseBackAcrossSeeds) {
  const char* kParams[][2] = {
      {"get_weather", R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},
                          "required":["city"],"additionalProperties":false})"},
      {"search", R"({"type":"object","properties":{"q":{"type":"string"},"n":{"enum":[1,2,3]}},
                     "required":["q","n"],"additionalProperties":false})"},
  };
  std::vector<int32_t> closers;
  for (const char* t : {"\"", "}", ",", "{"}) closers.push_back(rt_->tokenizer->encode(t, false).at(0));
  const auto section_end = rt_->tokenizer->special_token_id("<｜tool▁calls▁end｜>");
  ASSERT_TRUE(section_end);
  auto token_of = [&](std::string_view m) -> std::optional<int32_t> { return rt_->tokenizer->special_token_id(m); };
  std::mt19937 rng(seed() + 46);
  int stopped = 0, total = 0, calls = 0;
  struct Mode {
    bool named;  // tool_choice {"function": {"name": "search"}}; else required
    bool parallel;
  };
  for (const Mode mode : {Mode{false, true}, Mode{false, false}, Mode{true, false}, Mode{true, true}}) {
    std::vector<ForcedTool> tools;
    std::map<std::string, nlohmann::ordered_json> docs;
    for (const auto& [name, params] : kParams) {
      if (mode.named && std::string(name) != "search") continue;
      docs[name] = nlohmann::ordered_json::parse(params);
      tools.push_back({name, compile_json_schema(docs[name])});
    }
    const auto grammar = tool_call_grammar(ToolCallFormat::kDeepSeekV3, tools, mode.parallel ? INT32_MAX : 1, token_of);
    std::vector<std::pair<std::string, std::shared_ptr<Generation>>> batch;
    int i = 0;
    for (double t : {0.0, 0.7, 1.5}) {
      for (bool bias : {true, true, false}) {
        SamplingParams s;
        s.temperature = t;
        s.seed = rng();
        s.max_tokens = 96;
        if (bias) {
          for (int32_t id : closers) s.logit_bias.emplace_back(id, 8.0f);
          s.logit_bias.emplace_back(*section_end, 4.0f);
          std::sort(s.logit_bias.begin(), s.logit_bias.end());
        }
        s.constraint = std::make_shared<JsonSequenceConstraintFactory>(rt_->json_mode, false, grammar);
        GenerationOptions go;
        go.id = fmt::format("tools-{}-{}-{}", mode.named, mode.parallel, i++);
        go.tool_calls.format = ToolCallFormat::kDeepSeekV3;
        if (mode.named) go.tool_calls.only_name = "search";
        if (!mode.parallel) go.tool_calls.max_calls = 1;
        auto gen = std::make_shared<Generation>(*rt_->tokenizer, go, nullptr);
        GenerationRequest r;
        r.id = go.id;
        r.prompt = rt_->tokenizer->encode("Call a tool.", /*add_special=*/true);
        r.sampling = std::move(s);
        r.callbacks = gen->callbacks(gen);
        batch.emplace_back(fmt::format("named {} parallel {} T {} bias {} seed {}", mode.named, mode.parallel, t, bias,
                                       *r.sampling.seed),
                           gen);
        rt_->scheduler->submit(std::move(r));
      }
    }
    for (auto& [what, gen] : batch) {
      const Outcome o = collect(*gen);
      ++total;
      ASSERT_TRUE(o.reason == FinishReason::kStop || o.reason == FinishReason::kLength) << what << ": " << o.error;
      if (o.reason != FinishReason::kStop) continue;
      ++stopped;
      EXPECT_EQ(o.content, "") << what;
      ASSERT_FALSE(o.calls.empty()) << what << ": " << o.content;
      if (!mode.parallel) {
        EXPECT_EQ(o.calls.size(), 1u) << what;
      }
      for (const ToolCall& c : o.calls) {
        ++calls;
        ASSERT_TRUE(docs.count(c.name)) << what << ": " << c.name;
        nlohmann::ordered_json args;
        ASSERT_NO_THROW(args = nlohmann::ordered_json::parse(c.arguments)) << what << ": " << c.arguments;
        EXPECT_TRUE(testing_schema::validate(args, docs[c.name], docs[c.name])) << what << ": " << c.arguments;
      }
    }
  }
  std::printf("forced tool calls: %d of %d outputs ended, %d calls\n", stopped, total, calls);
  EXPECT_GT(stopped, total / 4);
}

}  // namespace
}  // namespace hymoe::server
