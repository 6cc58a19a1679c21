// tool_call_grammar (tool_calls.h): a forced tool call's output as a JsonSequenceGrammar.
#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "hymoe/server/json_schema.h"
#include "hymoe/server/json_sequence.h"
#include "hymoe/server/tool_calls.h"

namespace hymoe::server {
namespace {

using NodeId = JsonSequenceGrammar::NodeId;

// Kimi-K2's call counter in "functions.NAME:IDX".
constexpr int32_t kMaxIndexDigits = 6;

const std::shared_ptr<const JsonSchema>& any_object() {
  static const std::shared_ptr<const JsonSchema> s = compile_json_schema(nlohmann::ordered_json{{"type", "object"}});
  return s;
}

}  // namespace

std::shared_ptr<const JsonSequenceGrammar> tool_call_grammar(
    ToolCallFormat format, const std::vector<ForcedTool>& tools, int32_t max_calls,
    const std::function<std::optional<int32_t>(std::string_view)>& token_of, JsonGrammarOptions options) {
  HYMOE_CHECK(format != ToolCallFormat::kNone, kInvalidArgument, "tool call grammar: the model has no tool-call format");
  HYMOE_CHECK(!tools.empty(), kInvalidArgument, "tool call grammar: no tools");
  const std::vector<std::string> markers = tool_call_markers(format);
  const std::string& section_begin = markers[0];
  const std::string& section_end = markers[1];
  const std::string& call_begin = markers[2];
  const std::string& call_end = markers[3];
  const std::string& sep = markers[4];

  JsonSequenceGrammar::Builder b(options);
  // A marker: its token where the vocabulary has it as one, else its text.
  auto marker = [&](NodeId from, const std::string& m, std::optional<NodeId> to = std::nullopt) {
    if (const auto id = token_of(m)) return b.token(from, *id, to);
    return b.text(from, m, to);
  };
  for (const auto& m : markers) b.forbid(m);

  const NodeId call = marker(marker(JsonSequenceGrammar::Builder::kStart, section_begin), call_begin);
  const NodeId after_call = b.add_node();
  for (const ForcedTool& t : tools) {
    const auto& schema = t.parameters ? t.parameters : any_object();
    NodeId args = 0;
    switch (format) {
      case ToolCallFormat::kDeepSeekV3:
        args = b.text(marker(b.text(call, "function"), sep), t.name + "\n```json\n");
        marker(b.text(b.json(args, schema), "\n```"), call_end, after_call);
        break;
      case ToolCallFormat::kDeepSeekV31:
        args = marker(b.text(call, t.name), sep);
        marker(b.json(args, schema), call_end, after_call);
        break;
      case ToolCallFormat::kKimiK2:
        args = marker(b.digits(b.text(call, "functions." + t.name + ":"), 1, kMaxIndexDigits), sep);
        marker(b.json(args, schema), call_end, after_call);
        break;
      case ToolCallFormat::kNone: break;
    }
  }
  const NodeId end = marker(after_call, section_end);
  b.accept(end);
  if (max_calls > 1) {
    // Another call: DeepSeek-V3's template writes a newline between calls.
    const NodeId next = format == ToolCallFormat::kDeepSeekV3 ? b.text(after_call, "\n") : after_call;
    marker(next, call_begin, call);
  }
  return b.build();
}

}  // namespace hymoe::server
