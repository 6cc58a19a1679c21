#include "hymoe/server/json_grammar.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "../test_seed.h"

namespace hymoe::server {
namespace {

// One seed for the file's tests (test::test_seed(): printed, HYMOE_TEST_SEED replays it).
uint32_t seed() {
  static const uint32_t s = static_cast<uint32_t>(test::test_seed());
  return s;
}

// Valid JSON object texts (no run of more than 4 whitespace bytes).
const std::vector<std::string> kValidDocs = {
    "{}",
    " {\t}\n",
    R"({"a":1})",
    R"({"a": [1, -2, 3.25, 0, -0, 0.5e10, 1E-3, 2e+07, -0.0E0], "b": {}})",
    R"({"nested": {"x": [[], [[{}]], {"y": [true, false, null]}]}, "z": "ok"})",
    R"({"esc": "q\" b\\ s\/ \b\f\n\r\t \u00e9\u20AC \ud83d\ude00 \u0000"})",
    "{\"utf8\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe6\x9d\xb1\xe4\xba\xac \xed\x9f\xbf \xf4\x8f\xbf\xbf\"}",
    "{\r\n  \"k\" :\n   [ 1 , 2 ]\n}",
    R"({"":"", "num": 123456789012345678901234567890, "neg": -9.75e-300})",
    R"({"a":[{"b":[{"c":[{"d":"e"}]}]}]})",
};

// Feeds doc byte by byte: every byte accepted, complete() from the top-level '}' on.
void expect_accepts(const std::string& doc, JsonGrammarOptions o = {}) {
  ASSERT_TRUE(nlohmann::json::accept(doc)) << doc;
  const size_t close = doc.find_last_of('}');
  JsonPrefixMachine m(o);
  EXPECT_FALSE(m.complete());
  for (size_t i = 0; i < doc.size(); ++i) {
    ASSERT_TRUE(m.feed(doc[i])) << "byte " << i << " of " << doc;
    EXPECT_EQ(m.complete(), i >= close) << "byte " << i << " of " << doc;
  }
  JsonPrefixMachine whole(o);
  EXPECT_TRUE(whole.feed(doc));
  EXPECT_TRUE(whole == m);
}

TEST(JsonGrammar, AcceptsEveryPrefixOfValidObjects) {
  for (const auto& doc : kValidDocs) expect_accepts(doc);
}

// prefix is accepted, then next is refused (as a whole) and leaves the state unchanged.
void expect_refuses(const std::string& prefix, const std::string& next, JsonGrammarOptions o = {}) {
  JsonPrefixMachine m(o);
  ASSERT_TRUE(m.feed(prefix)) << "prefix " << prefix;
  const JsonPrefixMachine before = m;
  EXPECT_FALSE(m.feed(next)) << prefix << " + " << next;
  EXPECT_TRUE(m == before) << prefix << " + " << next;
  if (next.size() == 1) {
    EXPECT_FALSE(m.feed(next[0])) << prefix << " + " << next;
  }
}

TEST(JsonGrammar, RefusesInvalidContinuations) {
  // Structure.
  expect_refuses(R"({"a":1,)", "}");      // trailing comma
  expect_refuses(R"({"a":[1,)", "]");
  expect_refuses("{", ",");
  expect_refuses(R"({"a":[)", ",");
  expect_refuses(R"({"a")", "1");          // missing colon
  expect_refuses(R"({"a":1)", "\"");       // missing comma
  expect_refuses(R"({"a":1)", ":");
  expect_refuses(R"({"a":[1)", "}");       // mismatched close
  expect_refuses("{", "]");
  expect_refuses("{", "a");                // unquoted key
  expect_refuses("{", "1");
  expect_refuses(R"({"a":)", "}");
  expect_refuses(R"({"a":)", "'");         // single quotes
  expect_refuses("{", "'");
  // The top-level value must be an object.
  for (const char* first : {"[", "\"", "1", "-", "t", "n", "f", "}", "'"}) expect_refuses("", first);
  expect_refuses(" ", "[");
  // Nothing but whitespace after the object.
  expect_refuses("{}", "{");
  expect_refuses("{}", "x");
  expect_refuses("{} ", ",");
  expect_refuses("{}", "}");
  // Numbers.
  expect_refuses(R"({"a":0)", "1");        // leading zero
  expect_refuses(R"({"a":-0)", "0");
  expect_refuses(R"({"a":)", "+");
  expect_refuses(R"({"a":)", ".");
  expect_refuses(R"({"a":-)", "}");
  expect_refuses(R"({"a":-)", "a");
  expect_refuses(R"({"a":1.)", "e");
  expect_refuses(R"({"a":1.)", "}");
  expect_refuses(R"({"a":1e)", "}");
  expect_refuses(R"({"a":1e+)", "x");
  expect_refuses(R"({"a":1.5)", ".");
  expect_refuses(R"({"a":1e5)", ".");
  expect_refuses(R"({"a":1)", "x");
  // Literals.
  expect_refuses(R"({"a":tru)", "x");
  expect_refuses(R"({"a":)", "T");
  expect_refuses(R"({"a":)", "N");          // NaN
  expect_refuses(R"({"a":nul)", "L");
  expect_refuses(R"({"a":true)", "e");
  // Escapes.
  expect_refuses(R"({"a":")", "\\x");
  expect_refuses(R"({"a":")", "\\U");
  expect_refuses(R"({"a":"\u12)", "g");
  expect_refuses(R"({"a":")", "\\udc00");     // a lone low surrogate
  expect_refuses(R"({"a":"\ud800)", "a");     // a high surrogate not followed by a low one
  expect_refuses(R"({"a":"\ud800)", "\"");
  expect_refuses(R"({"a":"\ud800\)", "n");
  expect_refuses(R"({"a":"\ud800\u)", "0");
  expect_refuses(R"({"a":"\ud800\ud)", "8");
  // Invalid UTF-8 and control characters inside strings.
  for (const char* bad : {"\x80", "\xbf", "\xc0", "\xc1", "\xf5", "\xff", "\x01", "\x1f", "\n", "\t", "\r"}) {
    expect_refuses(R"({"a":")", bad);
    expect_refuses(R"({")", bad);
  }
  expect_refuses("{\"a\":\"\xe0", "\x80");       // overlong 3-byte form
  expect_refuses("{\"a\":\"\xf0", "\x8f");       // overlong 4-byte form
  expect_refuses("{\"a\":\"\xed", "\xa0");       // a UTF-16 surrogate written as UTF-8
  expect_refuses("{\"a\":\"\xf4", "\x90");       // past U+10FFFF
  expect_refuses("{\"a\":\"\xc3", "a");          // a character cut short
  expect_refuses("{\"a\":\"\xe2\x82", "\"");
  expect_refuses("{\"a\":\"\xc3\xa9", "\xa9");   // a stray continuation byte
  // Whitespace that JSON does not know.
  expect_refuses("{", "\v");
  expect_refuses("{", "\f");
}

TEST(JsonGrammar, DepthLimit) {
  // The top-level object is level 1: 31 more containers fit the default 32.
  const std::string deep = R"({"a":)" + std::string(31, '[');
  expect_refuses(deep, "[");
  expect_refuses(deep, "{");
  JsonPrefixMachine m;
  ASSERT_TRUE(m.feed(deep));
  EXPECT_EQ(m.depth(), 32);
  EXPECT_TRUE(m.feed("1" + std::string(31, ']') + "}"));  // scalars still go at the limit
  EXPECT_TRUE(m.complete());

  const JsonGrammarOptions three{.max_depth = 3};
  expect_accepts(R"({"a":[{"b":1}],"c":{"d":[]}})", three);
  expect_refuses(R"({"a":[{"b":)", "[", three);
  expect_refuses(R"({"a":[{"b":)", "{", three);
  const JsonGrammarOptions one{.max_depth = 1};
  expect_accepts(R"({"a":1,"b":"c"})", one);
  expect_refuses(R"({"a":)", "[", one);
}

TEST(JsonGrammar, WhitespaceLimit) {
  for (const std::string& at : {std::string(""), std::string("{"), std::string(R"({"a")"),
                                std::string(R"({"a":)"), std::string(R"({"a":1)"), std::string(R"({"a":[)"),
                                std::string("{}")}) {
    expect_refuses(at + " \n\t\r", " ");
    expect_refuses(at + "\n\n\n\n", "\n");
    JsonPrefixMachine m;
    EXPECT_TRUE(m.feed(at + "    ")) << at;
  }
  // The run restarts after any other byte; whitespace inside strings is content, never counted.
  EXPECT_TRUE(JsonPrefixMachine().feed("{    \"a\"    :    1    ,    \"b\"    :    \"          \"    }    "));
  const JsonGrammarOptions none{.max_whitespace = 0};
  expect_accepts(R"({"a":[1,{"b":"c d"}]})", none);
  expect_refuses("", " ", none);
  expect_refuses("{", " ", none);
  expect_refuses("{}", "\n", none);
}

TEST(JsonGrammar, CompleteOnlyAtTheEnd) {
  JsonPrefixMachine m;
  EXPECT_FALSE(m.complete());
  for (char c : std::string(R"({"a":{"b":[]}})")) {
    EXPECT_FALSE(m.complete());
    ASSERT_TRUE(m.feed(c));
  }
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.feed("  \n"));
  EXPECT_TRUE(m.complete());
}

TEST(JsonGrammar, RefusesBadOptions) {
  EXPECT_THROW(JsonPrefixMachine(JsonGrammarOptions{.max_depth = 0}), Error);
  EXPECT_THROW(JsonPrefixMachine(JsonGrammarOptions{.max_depth = 65}), Error);
  EXPECT_THROW(JsonPrefixMachine(JsonGrammarOptions{.max_whitespace = -1}), Error);
  EXPECT_THROW(JsonPrefixMachine(JsonGrammarOptions{.max_whitespace = 256}), Error);
  EXPECT_NO_THROW(JsonPrefixMachine(JsonGrammarOptions{.max_depth = 64, .max_whitespace = 255}));
  EXPECT_THROW(JsonTokenMask({"a", "b"}, {2}), Error);
  EXPECT_THROW(JsonTokenMask({"a", "b"}, {-1}), Error);
}

// Random valid documents, written with every escape, number form and UTF-8 length.
class DocWriter {
 public:
  explicit DocWriter(std::mt19937& rng) : rng_(rng) {}

  std::string document() {
    out_.clear();
    ws();
    object(1);
    ws();
    return out_;
  }

 private:
  uint32_t pick(uint32_t n) { return rng_() % n; }

  void ws() {
    if (pick(2)) return;
    for (uint32_t n = 1 + pick(4); n > 0; --n) out_ += " \n\r\t"[pick(4)];
  }
  void object(int depth) {
    out_ += '{';
    ws();
    for (uint32_t n = pick(4), i = 0; i < n; ++i) {
      if (i) {
        out_ += ',';
        ws();
      }
      string();
      ws();
      out_ += ':';
      ws();
      value(depth);
      ws();
    }
    out_ += '}';
  }
  void array(int depth) {
    out_ += '[';
    ws();
    for (uint32_t n = pick(4), i = 0; i < n; ++i) {
      if (i) {
        out_ += ',';
        ws();
      }
      value(depth);
      ws();
    }
    out_ += ']';
  }
  void value(int depth) {
    switch (pick(depth < 6 ? 7 : 5)) {
      case 0: string(); break;
      case 1: case 2: number(); break;
      case 3: out_ += std::array{"true", "false", "null"}[pick(3)]; break;
      case 4: string(); break;
      case 5: object(depth + 1); break;
      default: array(depth + 1); break;
    }
  }
  void hex4_escape(uint32_t v) {
    out_ += "\\u";
    static constexpr char kLower[] = "0123456789abcdef", kUpper[] = "0123456789ABCDEF";
    for (unsigned shift = 16; shift > 0;) {
      shift -= 4;
      const unsigned digit = (v >> shift) & 0xFu;
      const bool lower = pick(2) != 0;
      out_ += lower ? kLower[digit] : kUpper[digit];
    }
  }
  void utf8(uint32_t cp) {
    if (cp < 0x80) {
      out_ += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out_ += static_cast<char>(0xC0 | (cp >> 6));
      out_ += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out_ += static_cast<char>(0xE0 | (cp >> 12));
      out_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out_ += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out_ += static_cast<char>(0xF0 | (cp >> 18));
      out_ += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out_ += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out_ += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  uint32_t code_point() {
    const uint32_t ranges[][2] = {{0x20, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
    const auto& r = ranges[pick(5)];
    return r[0] + pick(r[1] - r[0] + 1);
  }
  void string() {
    out_ += '"';
    for (uint32_t n = pick(8), i = 0; i < n; ++i) {
      switch (pick(5)) {
        case 0:
          out_ += '\\';
          out_ += "\"\\/bfnrt"[pick(8)];
          break;
        case 1: {  // \uXXXX, a surrogate pair for a supplementary character
          const uint32_t cp = pick(3) ? code_point() : pick(0x20);
          if (cp >= 0x10000) {
            hex4_escape(0xD800 + ((cp - 0x10000) >> 10));
            hex4_escape(0xDC00 + ((cp - 0x10000) & 0x3FF));
          } else {
            hex4_escape(cp);
          }
          break;
        }
        default: {
          const uint32_t cp = code_point();
          if (cp == '"' || cp == '\\') break;
          utf8(cp);
        }
      }
    }
    out_ += '"';
  }
  void number() {
    if (pick(2)) out_ += '-';
    if (pick(4) == 0) {
      out_ += '0';
    } else {
      out_ += static_cast<char>('1' + pick(9));
      for (uint32_t n = pick(6); n > 0; --n) out_ += static_cast<char>('0' + pick(10));
    }
    if (pick(2)) {
      out_ += '.';
      for (uint32_t n = 1 + pick(5); n > 0; --n) out_ += static_cast<char>('0' + pick(10));
    }
    if (pick(2)) {
      out_ += "eE"[pick(2)];
      if (pick(2)) out_ += "+-"[pick(2)];
      for (uint32_t n = 1 + pick(2); n > 0; --n) out_ += static_cast<char>('0' + pick(10));  // within double
    }
  }

  std::mt19937& rng_;
  std::string out_;
};

TEST(JsonGrammar, AcceptsRandomValidDocuments) {
  std::mt19937 rng(seed());
  DocWriter w(rng);
  for (int i = 0; i < 2000; ++i) {
    expect_accepts(w.document());
    if (HasFatalFailure()) return;
  }
}

// Whether text is one JSON text; nullopt when nlohmann cannot tell: it refuses a number past
// double's range (1e999) as an overflow, which RFC 8259 allows and the grammar accepts, before it
// looks at what follows.
std::optional<bool> parses(const std::string& text) {
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    return !parsed.is_discarded();
  } catch (const nlohmann::json::exception& e) {
    if (std::string_view(e.what()).find("number overflow") != std::string_view::npos) return std::nullopt;
    return false;
  }
}

// Bytes a random walk tries: mostly JSON's own, some UTF-8, some garbage.
std::string random_byte(std::mt19937& rng) {
  static const std::string kAlphabet =
      "{{{}}}}}}[[]]]]\"\"\"\"\"\"::,,,   \n\t\r\\\\uuu0123456789-+.eEabcdfABCDFtrulsn'x/\x01\x1f";
  static const std::vector<std::string> kUtf8 = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\x9f\xbf",
                                                 "\xc3", "\xe2", "\xf0", "\xed", "\xa0", "\x80", "\xbf", "\xf4", "\x90"};
  const uint32_t r = rng() % 100;
  if (r < 85) return std::string(1, kAlphabet[rng() % kAlphabet.size()]);
  if (r < 97) {
    const std::string& u = kUtf8[rng() % kUtf8.size()];
    return (rng() % 2) ? u : u.substr(0, 1);
  }
  return std::string(1, static_cast<char>(rng() % 256));
}

// A random walk that keeps the bytes the machine accepts. Every accepted text is a prefix of
// valid JSON: it parses exactly when the machine says complete, and a refusal changes nothing.
TEST(JsonGrammar, RandomWalkAgreesWithParser) {
  std::mt19937 rng(seed() + 1);
  int completes = 0;
  for (int walk = 0; walk < 1500; ++walk) {
    JsonPrefixMachine m(JsonGrammarOptions{.max_depth = 1 + static_cast<int32_t>(rng() % 8)});
    std::string text;
    for (int step = 0; step < 300; ++step) {
      const std::string b = random_byte(rng);
      const JsonPrefixMachine before = m;
      if (!m.feed(b)) {
        ASSERT_TRUE(m == before);
        continue;
      }
      text += b;
      const std::optional<bool> whole = parses(text);
      if (whole) {
        ASSERT_EQ(*whole, m.complete()) << text;
      }
      if (m.complete()) {
        if (nlohmann::json::accept(text)) {
          ASSERT_TRUE(nlohmann::json::parse(text).is_object()) << text;
        }
        ++completes;
        if (rng() % 2) break;
      }
    }
  }
  EXPECT_GT(completes, 100);
}

// The reference: copy the machine, feed the token's bytes.
std::vector<uint8_t> brute_force(const std::vector<std::string>& vocab, const std::vector<int32_t>& special,
                                 const JsonPrefixMachine& m) {
  std::vector<uint8_t> out(vocab.size(), 0);
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (vocab[id].empty() || std::find(special.begin(), special.end(), static_cast<int32_t>(id)) != special.end()) {
      continue;
    }
    JsonPrefixMachine c = m;
    out[id] = c.feed(vocab[id]) ? 1 : 0;
  }
  return out;
}

// Machine states to test a mask at: every prefix of the valid documents and random-walk states.
std::vector<JsonPrefixMachine> sample_states(std::mt19937& rng) {
  std::vector<JsonPrefixMachine> states;
  for (const auto& doc : kValidDocs) {
    JsonPrefixMachine m;
    states.push_back(m);
    for (char c : doc) {
      m.feed(c);
      states.push_back(m);
    }
  }
  for (int walk = 0; walk < 40; ++walk) {
    JsonPrefixMachine m(JsonGrammarOptions{.max_depth = 1 + static_cast<int32_t>(rng() % 4)});
    for (int step = 0; step < 120; ++step) {
      if (m.feed(random_byte(rng))) states.push_back(m);
    }
  }
  return states;
}

void expect_mask_matches(const std::vector<std::string>& vocab, const std::vector<int32_t>& special,
                         const std::vector<JsonPrefixMachine>& states) {
  const JsonTokenMask mask(vocab, special);
  ASSERT_EQ(mask.vocab_size(), vocab.size());
  std::vector<uint8_t> out(3, 7);  // wrong size and poisoned: allowed() must size and clear it
  for (size_t s = 0; s < states.size(); ++s) {
    mask.allowed(states[s], out);
    const std::vector<uint8_t> want = brute_force(vocab, special, states[s]);
    ASSERT_EQ(out.size(), want.size());
    for (size_t id = 0; id < want.size(); ++id) {
      ASSERT_EQ(out[id], want[id]) << "state " << s << " token " << id << " '" << vocab[id] << "'";
    }
    EXPECT_EQ(mask.end_allowed(states[s]), states[s].complete());
  }
}

TEST(JsonTokenMask, HandMadeVocabularyMatchesBruteForce) {
  const std::vector<std::string> vocab = {
      "{", "\"", "a", "}", "{\"", "\":", " ", "  ", "true", "1e", "1", "e5", "[", "]", ",", ":", "\"a\"",
      "\\u00", "\\", "u", "e9", "caf\xc3\xa9", "\xc3", "\xa9", "", "<eos>", "null}", "}}", "} ", "\n\n\n\n\n",
      "0", "01", "-", ".5", "tr", "ue", "n", "\",\"", "\x01", "{\"a\":1}", "{", "\"}", "]}", "\":\"", "false,",
      "  \"", "\":[", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\\ud83d", "\\ude00", "E+", "'",
  };
  // The second "{" is special: refused although its bytes fit; "<eos>" is special; "" is never allowed.
  const std::vector<int32_t> special = {25, 40};
  std::mt19937 rng(seed() + 2);
  const auto states = sample_states(rng);
  expect_mask_matches(vocab, special, states);

  const JsonTokenMask mask(vocab, special);
  std::vector<uint8_t> out;
  mask.allowed(JsonPrefixMachine(), out);
  std::vector<uint8_t> want(vocab.size(), 0);
  for (const char* tok : {"{", "{\"", " ", "  ", "{\"a\":1}"}) {
    want[std::find(vocab.begin(), vocab.end(), tok) - vocab.begin()] = 1;
  }
  EXPECT_EQ(out, want);
}

TEST(JsonTokenMask, RandomVocabularyMatchesBruteForce) {
  std::mt19937 rng(seed() + 3);
  std::vector<std::string> vocab;
  for (int i = 0; i < 3000; ++i) {
    std::string tok;
    for (uint32_t n = 1 + rng() % 6; n > 0; --n) tok += random_byte(rng);
    vocab.push_back(tok);
  }
  // Long tokens sharing long prefixes: past the mask's 64 kept states.
  for (size_t len : {63u, 64u, 65u, 80u, 130u}) {
    const std::string run(len, 'a');
    for (const char* tail : {"", "\"", "\":", "\x01", "b", "\xc3\xa9"}) {
      vocab.push_back(run + tail);
      vocab.push_back("\"" + run + tail);
    }
  }
  std::vector<int32_t> special;
  for (int i = 0; i < 20; ++i) special.push_back(static_cast<int32_t>(rng() % vocab.size()));
  const auto states = sample_states(rng);
  expect_mask_matches(vocab, special, states);
}

}  // namespace
}  // namespace hymoe::server
