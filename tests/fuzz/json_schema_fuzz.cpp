// libFuzzer target: structured outputs' schema compiler and machine (json_schema.h), built and
// run by scripts/test.d/20-fuzz-request-tokenizer. Input: a schema document, a NUL byte, then
// bytes that steer a walk (each picks one of the bytes the machine allows at that point). Findings:
// a crash or sanitizer report, a compile that takes unbounded time, a state with no allowed byte
// before the value is whole, a walk that the finisher cannot complete, or a finished text that
// does not parse or does not validate against the schema (tests/server/json_schema_validator.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../server/json_schema_validator.h"
#include "hymoe/server/json_schema.h"
#include "hymoe/server/openai_request.h"

namespace {

using hymoe::server::JsonSchemaMachine;
using json = nlohmann::ordered_json;

[[noreturn]] void finding(const char* what, const std::string& text) {
  std::fprintf(stderr, "json_schema_fuzz: %s: %s\n", what, text.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view doc_text = in.substr(0, nul);
  const std::string_view steer = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1, 512);
  json doc;
  std::shared_ptr<const hymoe::server::JsonSchema> schema;
  try {
    doc = hymoe::server::parse_json_object(doc_text);  // bounded depth, valid UTF-8, as requests are
    schema = hymoe::server::compile_json_schema(doc);
  } catch (const hymoe::server::ApiException&) {
    return 0;
  } catch (const hymoe::server::JsonSchemaError&) {
    return 0;
  }
  JsonSchemaMachine m(*schema);
  std::string text;
  auto allowed_bytes = [](const JsonSchemaMachine& st) {
    std::string out;
    for (int b = 0; b < 256; ++b) {
      JsonSchemaMachine n = st;
      if (n.feed(static_cast<char>(b))) out += static_cast<char>(b);
    }
    return out;
  };
  for (char s : steer) {
    if (m.complete()) break;
    const std::string allowed = allowed_bytes(m);
    if (allowed.empty()) finding("stuck", text);
    const char c = allowed[static_cast<uint8_t>(s) % allowed.size()];
    if (!m.feed(c)) finding("refused an allowed byte", text);
    text += c;
  }
  // Finish: a quote (closes a string), closers, a comma (ends a number), the cheapest values; else
  // the lowest allowed byte.
  static constexpr std::string_view kPrefer = "\"}],0:ntf";  // a quote first: it closes strings
  for (int i = 0; i < 200000 && !m.complete(); ++i) {
    bool fed = false;
    for (char p : kPrefer) {
      if (m.feed(p)) {
        text += p;
        fed = true;
        break;
      }
    }
    for (int b = 0; b < 256 && !fed; ++b) {
      if (m.feed(static_cast<char>(b))) {
        text += static_cast<char>(b);
        fed = true;
      }
    }
    if (!fed) finding("stuck while finishing", text);
  }
  if (!m.complete()) finding("not finished", text);
  json out;
  try {
    out = json::parse(text);
  } catch (const std::exception&) {
    finding("finished text does not parse", text);
  }
  bool undecided = false;
  if (!hymoe::server::testing_schema::validate(out, doc, doc, &undecided) && !undecided) {
    finding("finished text does not validate", text);
  }
  return 0;
}
