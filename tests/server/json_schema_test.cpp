// The schema compiler and JsonSchemaMachine (json_schema.h) against a plain validator written
// here: random walks over the machine's allowed bytes always finish, and what they finish
// validates; random conforming documents are accepted byte by byte; non-conforming ones are
// refused; schemas outside the subset are refused naming keyword and path.
#include "hymoe/server/json_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hymoe/server/json_constraint.h"
#include "json_schema_validator.h"
#include "../test_seed.h"

namespace hymoe::server {
namespace {

using json = nlohmann::ordered_json;
using testing_schema::resolve;
using testing_schema::validate;

// One seed for the file's tests (test::test_seed(): printed, HYMOE_TEST_SEED replays it).
uint32_t seed() {
  static const uint32_t s = static_cast<uint32_t>(test::test_seed());
  return s;
}

// ---- schemas ----

const char* kSchemas[] = {
    // 0: person, OpenAI strict style
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
        "email":{"type":["string","null"]},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
        "required":["name","age","email","tags"],"additionalProperties":false})",
    // 1: enums, consts, booleans, numbers (1 beside 12: a literal that prefixes another)
    R"({"type":"object","properties":{"unit":{"enum":["celsius","fahrenheit"]},"value":{"type":"number"},
        "ok":{"type":"boolean"},"v":{"const":1},"n":{"enum":[1,12,-3,2.5,"x",null,true]}},
        "required":["unit","value","ok","v","n"],"additionalProperties":false})",
    // 2: optional properties around a required one
    R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"},
        "d":{"type":"null"}},"required":["c"]})",
    // 3: anyOf of object / string / bounded array; array of objects with minItems
    R"({"type":"object","properties":{"result":{"anyOf":[
          {"type":"object","properties":{"x":{"type":"number"}},"required":["x"],"additionalProperties":false},
          {"type":"string"},{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4}]},
        "list":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}},"required":["k"],
          "additionalProperties":false},"minItems":1}},
        "required":["result","list"],"additionalProperties":false})",
    // 4: a recursive tree through $defs
    R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
          "children":{"type":"array","items":{"$ref":"#/$defs/node"}}},
          "required":["value","children"],"additionalProperties":false}},
        "$ref":"#/$defs/node"})",
    // 5: free-form parts: any object, any value, a map of integers
    R"({"type":"object","properties":{"meta":{"type":"object"},"anything":{},
        "map":{"type":"object","additionalProperties":{"type":"integer"}}},
        "required":["meta","anything","map"]})",
    // 6: keys that need escaping; definitions; description and format ignored
    R"({"type":"object","description":"x","properties":{"naïve \"key\"":{"type":"string","format":"date-time"},
        "a/b~c":{"$ref":"#/definitions/count"}},"required":["naïve \"key\"","a/b~c"],
        "additionalProperties":false,"definitions":{"count":{"type":"integer","title":"n"}}})",
    // 7: a linked list through "#", nullable through anyOf
    R"({"type":"object","properties":{"name":{"type":"string"},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},
        "required":["name","next"],"additionalProperties":false})",
    // 8: enum alternatives merged; oneOf; an empty object; arrays of arrays
    R"({"type":"object","properties":{"mode":{"anyOf":[{"const":"a"},{"enum":["b","c"]},{"type":"integer"}]},
        "pick":{"oneOf":[{"type":"boolean"},{"type":"array","items":{"type":"array","items":{"type":"number"},
          "maxItems":2},"maxItems":2}]},"none":{"type":"object","additionalProperties":false}},
        "required":["mode","pick","none"],"additionalProperties":false})",
};

// ---- helpers ----

std::string bytes_allowed(const JsonSchemaMachine& m) {
  std::string out;
  for (int b = 0; b < 256; ++b) {
    JsonSchemaMachine n = m;
    if (n.feed(static_cast<char>(b))) out += static_cast<char>(b);
  }
  return out;
}

// Walks `steps` random allowed bytes, then finishes by a fixed preference (a quote, closers, a
// comma, then
// the cheapest value bytes); every state on the way must allow some byte until complete.
std::string random_walk(const JsonSchemaMachine& start, std::mt19937& rng, int steps, std::string& why) {
  JsonSchemaMachine m = start;
  std::string text;
  static constexpr std::string_view kPrefer = "\"}],0:ntf";  // a quote first: it closes strings
  for (int i = 0; i < steps + 20000 && !m.complete(); ++i) {
    const std::string allowed = bytes_allowed(m);
    if (allowed.empty()) {
      why = "stuck after " + text;
      return text;
    }
    char c = allowed[0];
    if (i < steps) {
      c = allowed[rng() % allowed.size()];
    } else {
      for (char p : kPrefer) {
        if (allowed.find(p) != std::string::npos) {
          c = p;
          break;
        }
      }
    }
    EXPECT_TRUE(m.feed(c));
    text += c;
  }
  if (!m.complete()) why = "not finished: " + text;
  return text;
}

// A random value conforming to schema s (depth-bounded: optional parts stop at depth 5).
json generate(const json& s_in, const json& root, std::mt19937& rng, int depth) {
  const json& s = resolve(s_in, root);
  auto coin = [&] { return rng() % 2 == 0; };
  if (s.is_boolean() || s.empty() || (!s.contains("type") && !s.contains("enum") && !s.contains("const") &&
                                      !s.contains("anyOf") && !s.contains("oneOf") && !s.contains("properties"))) {
    switch (rng() % 4) {
      case 0: return json(static_cast<int>(rng() % 100));
      case 1: return json("free");
      case 2: return depth < 4 ? json::parse(R"({"k":[1,{"z":null}]})") : json(true);
      default: return json(nullptr);
    }
  }
  for (const char* kw : {"anyOf", "oneOf"}) {
    if (s.contains(kw)) {
      for (int tries = 0; tries < 16; ++tries) {
        const json& alt = s[kw][rng() % s[kw].size()];
        const json& r = resolve(alt, root);
        if (depth > 4 && (r.value("type", "") == "object" || r.contains("$ref") || r == root)) continue;
        return generate(alt, root, rng, depth + 1);
      }
      return generate(s[kw].back(), root, rng, depth + 1);
    }
  }
  if (s.contains("enum")) return s["enum"][rng() % s["enum"].size()];
  if (s.contains("const")) return s["const"];
  std::string type = s.contains("type") ? (s["type"].is_string() ? s["type"].get<std::string>()
                                                                   : s["type"][rng() % s["type"].size()].get<std::string>())
                                        : "object";
  if (type == "string") {
    static const char* kStrings[] = {"", "plain", "q\"uote\\", "tab\tnew\nline", "caf\xc3\xa9 \xf0\x9f\x98\x80", "\x01"};
    return kStrings[rng() % std::size(kStrings)];
  }
  if (type == "integer") return json(static_cast<int64_t>(rng() % 2001) - 1000);
  if (type == "number") {
    static const double kNumbers[] = {0.0, -2.5, 1e-7, 12345.678, 3.0};
    return coin() ? json(kNumbers[rng() % 5]) : json(static_cast<int>(rng() % 50));
  }
  if (type == "boolean") return json(coin());
  if (type == "null") return json(nullptr);
  if (type == "array") {
    const size_t lo = s.value("minItems", size_t{0});
    const size_t hi = std::min(s.value("maxItems", size_t{4}), lo + (depth > 4 ? 0 : 3));
    json a = json::array();
    const size_t n = lo + (hi > lo ? rng() % (hi - lo + 1) : 0);
    for (size_t i = 0; i < n; ++i) a.push_back(generate(s.value("items", json::object()), root, rng, depth + 1));
    return a;
  }
  json o = json::object();
  const json props = s.value("properties", json::object());
  const json req = s.value("required", json::array());
  for (const auto& [k, sub] : props.items()) {
    bool required = false;
    for (const auto& r : req) required = required || r == k;
    if (required || (depth < 4 && coin())) o[k] = generate(sub, root, rng, depth + 1);
  }
  if (props.empty() && s.contains("additionalProperties") && s["additionalProperties"].is_object() && depth < 4) {
    o["m1"] = generate(s["additionalProperties"], root, rng, depth + 1);
  }
  return o;
}

// ---- tests ----

TEST(JsonSchema, RandomWalksFinishAndValidate) {
  std::mt19937 rng(seed());
  for (size_t si = 0; si < std::size(kSchemas); ++si) {
    const json schema = json::parse(kSchemas[si]);
    const auto compiled = compile_json_schema(schema);
    JsonSchemaMachine start(*compiled);
    for (int w = 0; w < 60; ++w) {
      std::string why;
      const std::string text = random_walk(start, rng, static_cast<int>(rng() % 200), why);
      ASSERT_TRUE(why.empty()) << "schema " << si << ": " << why;
      json doc;
      ASSERT_NO_THROW(doc = json::parse(text)) << "schema " << si << ": " << text;
      EXPECT_TRUE(validate(doc, schema, schema)) << "schema " << si << ": " << text;
    }
  }
}

TEST(JsonSchema, AcceptsRandomConformingDocuments) {
  std::mt19937 rng(seed() + 1);
  for (size_t si = 0; si < std::size(kSchemas); ++si) {
    const json schema = json::parse(kSchemas[si]);
    const auto compiled = compile_json_schema(schema);
    for (int d = 0; d < 50; ++d) {
      const json doc = generate(schema, schema, rng, 0);
      ASSERT_TRUE(validate(doc, schema, schema)) << "generator: schema " << si << ": " << doc.dump();
      for (const std::string& text : {doc.dump(), doc.dump(1)}) {
        if (text.find("\n    ") != std::string::npos) continue;  // past the whitespace bound (4)
        JsonSchemaMachine m(*compiled);
        for (size_t i = 0; i < text.size(); ++i) {
          ASSERT_TRUE(m.feed(text[i])) << "schema " << si << ", byte " << i << " of " << text;
        }
        EXPECT_TRUE(m.complete()) << "schema " << si << ": " << text;
      }
    }
  }
}

TEST(JsonSchema, RefusesNonConformingText) {
  struct Case {
    size_t schema;
    const char* text;
  };
  const Case cases[] = {
      {0, R"({"age":1,"name":"x","email":null,"tags":[]})"},           // order
      {0, R"({"name":"x","age":1.5,"email":null,"tags":[]})"},         // integer
      {0, R"({"name":"x","age":1,"email":null,"tags":["a","b","c","d"]})"},  // maxItems
      {0, R"({"name":"x","age":1,"email":null})"},                     // required
      {0, R"({"name":"x","age":1,"email":null,"tags":[],"z":1})"},     // additional
      {0, R"({"name":"x","age":01})"},
      {1, R"({"unit":"kelvin")"},
      {1, R"({"unit":"celsius","value":1,"ok":true,"v":2)"},
      {1, R"({"unit":"celsius","value":1,"ok":true,"v":1,"n":13)"},
      {1, R"({"unit":"celsius","value":1,"ok":true,"v":1,"n":1.5)"},
      {3, R"({"result":[1],"list")"},                                 // minItems 2
      {3, R"({"result":"s","list":[]})"},                              // minItems 1
      {5, R"({"meta":{},"anything":1,"map":{"a":"s")"},
      {8, R"({"mode":"d")"},
      {8, R"({"mode":1,"pick":[[1,2,3])"},
      {8, R"({"mode":1,"pick":true,"none":{"a")"},
      {2, R"({"a":1,"a")"},
      {2, R"({"b":"x","a":1)"},
      {2, R"({"a":1})"},
  };
  for (const auto& c : cases) {
    const json schema = json::parse(kSchemas[c.schema]);
    const auto compiled = compile_json_schema(schema);
    JsonSchemaMachine m(*compiled);
    EXPECT_FALSE(m.feed(std::string_view(c.text))) << c.text;
  }
}

TEST(JsonSchema, RecursionStopsWhereItCanStillFinish) {
  const json schema = json::parse(kSchemas[4]);
  const auto compiled = compile_json_schema(schema);
  JsonSchemaMachine m(*compiled);
  // Each level opens an object and an array: the deepest tree has 8 objects.
  std::string text;
  int levels = 0;
  while (m.feed(std::string_view(R"({"value":1,"children":[)"))) {
    text += R"({"value":1,"children":[)";
    ++levels;
  }
  EXPECT_EQ(levels, JsonSchema::kMaxDepth / 2);
  EXPECT_TRUE(m.feed(']'));  // the innermost array cannot take an item, but can close
  std::string why;
  std::mt19937 rng(seed());
  const std::string rest = random_walk(m, rng, 0, why);
  ASSERT_TRUE(why.empty()) << why;
  EXPECT_TRUE(validate(json::parse(text + "]" + rest), schema, schema));
}

TEST(JsonSchema, RefusesWhatTheSubsetLacksNamingKeywordAndPath) {
  struct Case {
    const char* schema;
    const char* keyword;
    const char* path;  // null: not checked
    bool unsupported;
  };
  const Case cases[] = {
      {R"({"type":"object","properties":{"a":{"type":"string","pattern":"x"}}})", "pattern", "/properties/a", true},
      {R"({"type":"object","properties":{"n":{"type":"integer","minimum":0}}})", "minimum", "/properties/n", true},
      {R"({"allOf":[{"type":"object"}]})", "allOf", "", true},
      {R"({"type":"string"})", "type", "", true},
      {R"({"type":"object","properties":{"a":{"type":"array","items":[{"type":"string"}]}}})", "items", "/properties/a", true},
      {R"({"type":"object","properties":{"a":{"$ref":"http://x/y"}}})", "$ref", "/properties/a/$ref", true},
      {R"({"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}})", "$ref", "/properties/a/$ref", false},
      {R"({"type":"object","properties":{"a":{"anyOf":[{"type":"integer"},{"type":"number"}]}}})", "", "/properties/a/anyOf", true},
      {R"({"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"enum":["x"]}]}}})", "", "/properties/a/anyOf", true},
      {R"({"type":"object","properties":{"a":{"type":"strin"}}})", "type", "/properties/a", false},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "required", "", true},
      {R"({"type":"object","properties":{"a":{"$defs":{}}}})", "$defs", "/properties/a", true},
      {R"({"type":"object","properties":{"a":{"enum":[{"x":1}]}}})", "enum", "/properties/a", true},
      {R"({"type":"object","properties":{"a":{"type":"integer","enum":["x"]}}})", "enum", "/properties/a", false},
      {R"({"type":"object","properties":{"a":{"type":"array","minItems":3,"maxItems":2}}})", "minItems", "/properties/a", false},
      {R"({"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]})", "", "", false},
      {R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", "$ref", nullptr, false},
      {R"({"type":"object","properties":{"a":false}})", "", "/properties/a", true},
  };
  for (const auto& c : cases) {
    try {
      compile_json_schema(json::parse(c.schema));
      ADD_FAILURE() << "compiled: " << c.schema;
    } catch (const JsonSchemaError& e) {
      EXPECT_EQ(e.keyword(), c.keyword) << c.schema << ": " << e.what();
      if (c.path) {
        EXPECT_EQ(e.path(), c.path) << c.schema << ": " << e.what();
      }
      EXPECT_EQ(e.unsupported(), c.unsupported) << c.schema << ": " << e.what();
      if (*c.keyword) {
        EXPECT_NE(std::string(e.what()).find(c.keyword), std::string::npos) << e.what();
      }
    }
  }
}

TEST(JsonSchema, BoundsTheSchemaItCompiles) {
  // Nesting: 40 levels of items.
  json deep = {{"type", "integer"}};
  for (int i = 0; i < 40; ++i) deep = {{"type", "array"}, {"items", deep}};
  const json nested = {{"type", "object"}, {"properties", {{"a", deep}}}};
  EXPECT_THROW(compile_json_schema(nested), JsonSchemaError);
  // Properties in one object.
  json wide = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 65; ++i) wide["properties"]["p" + std::to_string(i)] = {{"type", "string"}};
  EXPECT_THROW(compile_json_schema(wide), JsonSchemaError);
  wide["properties"].erase("p64");
  EXPECT_NO_THROW(compile_json_schema(wide));
  // Nodes: limits.max_nodes.
  JsonSchemaLimits small;
  small.max_nodes = 8;
  EXPECT_THROW(compile_json_schema(json::parse(kSchemas[0]), small), JsonSchemaError);
  // Literal bytes.
  json big = {{"type", "object"}, {"properties", {{"e", {{"enum", json::array()}}}}}};
  for (int i = 0; i < 3000; ++i) big["properties"]["e"]["enum"].push_back(std::string(30, 'a') + std::to_string(i));
  EXPECT_THROW(compile_json_schema(big), JsonSchemaError);
}

// The token mask over a schema machine agrees with feeding each token by itself.
TEST(JsonSchema, TokenMaskMatchesFeedingEachToken) {
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
  for (const char* t : {"{\"", "\":", "\",\"", "name", "age", "\"name\":\"", "true", "null", "12", "],", "}}",
                        "{\"name\":\"", "\"email\":null", "celsius", "\"unit\":\"c", "  ", "\n  \"", "[\"", "\"]}"}) {
    vocab.emplace_back(t);
  }
  JsonTokenMask mask(vocab);
  std::mt19937 rng(seed() + 2);
  std::vector<uint8_t> out;
  for (size_t si = 0; si < std::size(kSchemas); ++si) {
    const auto compiled = compile_json_schema(json::parse(kSchemas[si]));
    for (int w = 0; w < 5; ++w) {
      JsonSchemaMachine m(*compiled);
      for (int step = 0; step < 60 && !m.complete(); ++step) {
        mask.allowed(m, out);
        std::vector<int32_t> ok;
        for (size_t id = 0; id < vocab.size(); ++id) {
          JsonSchemaMachine n = m;
          ASSERT_EQ(out[id] != 0, n.feed(std::string_view(vocab[id]))) << "schema " << si << " token " << vocab[id];
          if (out[id]) ok.push_back(static_cast<int32_t>(id));
        }
        ASSERT_FALSE(ok.empty());
        ASSERT_TRUE(m.feed(std::string_view(vocab[static_cast<size_t>(ok[rng() % ok.size()])])));
      }
    }
  }
}

// Through the TokenConstraint seam: masking random logits and taking the best allowed token, then
// finishing by preference, gives a text that validates; end-of-sequence only once it is whole.
TEST(JsonSchema, ConstraintMasksToConformingOutput) {
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
  vocab.emplace_back("\"name\":\"");
  vocab.emplace_back("<eos>");
  const int32_t eos = static_cast<int32_t>(vocab.size() - 1);
  auto v = std::make_shared<JsonModeVocab>(vocab, std::vector<int32_t>{}, eos);
  std::mt19937 rng(seed() + 3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t si = 0; si < std::size(kSchemas); ++si) {
    const json schema = json::parse(kSchemas[si]);
    JsonConstraintFactory factory(v, false, compile_json_schema(schema));
    for (int w = 0; w < 4; ++w) {
      auto c = factory.start();
      std::string text;
      bool ended = false;
      for (int step = 0; step < 4000 && !ended; ++step) {
        std::vector<float> logits(vocab.size());
        for (float& x : logits) x = normal(rng);
        if (step > 80) {  // finish: a quote, closers, a comma first
          float bonus = 60.0f;
          for (char p : std::string_view("\"}],0:ntf")) logits[static_cast<uint8_t>(p)] += (bonus -= 2.0f);
          logits[static_cast<size_t>(eos)] += 100.0f;
        }
        c->mask(logits);
        const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
        ASSERT_TRUE(std::isfinite(logits[static_cast<size_t>(best)])) << "no token allowed after " << text;
        ASSERT_TRUE(c->accept(static_cast<int32_t>(best)));
        if (best == eos) ended = true;
        else text += vocab[static_cast<size_t>(best)];
      }
      ASSERT_TRUE(ended) << "schema " << si << ": " << text;
      json doc;
      ASSERT_NO_THROW(doc = json::parse(text)) << text;
      EXPECT_TRUE(validate(doc, schema, schema)) << "schema " << si << ": " << text;
    }
  }
}

}  // namespace
}  // namespace hymoe::server
