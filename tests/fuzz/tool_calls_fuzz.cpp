// libFuzzer target: model output through the tool-call parser (scripts/test.d/20-fuzz-request-
// tokenizer builds and runs it). The first byte picks the format (DeepSeek-V3, V3.1, Kimi-K2), the
// second the streamed piece size; the rest is the output. Findings: a crash or sanitizer report,
// the streamed result differing from the whole text's, a taken call whose arguments are not a
// JSON object, or content that is not the input when no call was taken (a lost or added byte).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hymoe/server/tool_calls.h"

namespace {

using hymoe::server::ToolCall;
using hymoe::server::ToolCallFormat;
using hymoe::server::ToolCallParser;
using hymoe::server::ToolCallParserOptions;

struct Result {
  std::string content;
  std::vector<ToolCall> calls;
};

Result parse(const ToolCallParserOptions& o, std::string_view text, size_t piece) {
  ToolCallParser p(o);
  Result r;
  auto take = [&r](ToolCallParser::Delta d) {
    r.content += d.content;
    for (auto& c : d.calls) r.calls.push_back(std::move(c));
  };
  for (size_t at = 0; at < text.size(); at += piece) take(p.push(text.substr(at, piece)));
  take(p.finish());
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static constexpr ToolCallFormat kFormats[] = {ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                                                ToolCallFormat::kKimiK2};
  ToolCallParserOptions o;
  o.format = kFormats[data[0] % 3];
  if (data[0] & 4) o.max_calls = 1;
  const size_t piece = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const Result whole = parse(o, text, text.size() + 1);
  const Result streamed = parse(o, text, piece);
  if (whole.content != streamed.content || whole.calls.size() != streamed.calls.size()) std::abort();
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    const ToolCall& a = whole.calls[i];
    const ToolCall& b = streamed.calls[i];
    if (a.index != static_cast<int32_t>(i) || a.id != b.id || a.name != b.name || a.arguments != b.arguments) std::abort();
    if (a.name.empty() || !nlohmann::json::accept(a.arguments) || a.arguments.front() != '{') std::abort();
  }
  if (whole.calls.empty() && whole.content != text) std::abort();
  return 0;
}
