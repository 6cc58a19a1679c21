// Tool calls in a model's output: the text the model writes between its tool-call markers
// parsed back into OpenAI `tool_calls`, incrementally, as the text streams in.
//
// Formats (the markers each model family's chat template writes for an assistant's tool calls):
//   DeepSeek-V3 / R1  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS
//                     \n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>...<｜tool▁calls▁end｜>
//   DeepSeek-V3.1     <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...
//                     <｜tool▁calls▁end｜>
//   Kimi-K2           <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
//                     <|tool_call_argument_begin|>ARGS<|tool_call_end|>...<|tool_calls_section_end|>
//
// The rule, the same streamed or not: a call is taken when it is whole (its end marker seen) and
// well-formed (a name, ARGS a JSON object); every other byte stays content, markers included, so
// nothing is lost and nothing fails. A section's begin marker is consumed with the section's first
// taken call, its end marker and the whitespace between calls with the section. Text that may
// still become a marker, and a call until it ends, are held back; finish() releases what is held
// as content (output cut off inside a call). Content is emitted as soon as it is decided, so
// streamed content before a call arrives before the call.
//
// Not thread-safe: one parser per generation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hymoe/server/json_grammar.h"

namespace hymoe::server {

class JsonSchema;
class JsonSequenceGrammar;

enum class ToolCallFormat { kNone, kDeepSeekV3, kDeepSeekV31, kKimiK2 };

// "none", "deepseek_v3", "deepseek_v31", "kimi_k2".
std::string_view tool_call_format_name(ToolCallFormat f);
// The inverse of tool_call_format_name; nullopt for any other name.
std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name);
// The format of a chat-template family as tokenizer::template_family_name() names it:
// deepseek-v3 and deepseek-r1 -> kDeepSeekV3, deepseek-v3.1 -> kDeepSeekV31, kimi-k2 -> kKimiK2,
// anything else -> kNone.
ToolCallFormat tool_call_format_for_family(std::string_view family);

// The marker texts of a format (the parser needs them in the detokenized text: Kimi-K2's are
// special tokens, which the detokenizer drops unless told to keep them). Empty for kNone.
std::vector<std::string> tool_call_markers(ToolCallFormat f);

struct ToolCall {
  int32_t index = 0;      // position among this output's calls (the streamed delta's index)
  std::string id;         // Kimi-K2: "functions.NAME:IDX", IDX the conversation's call counter; else id_prefix + index
  std::string name;
  std::string arguments;  // JSON text exactly as the model wrote it (validated as an object)
};

struct ToolCallParserOptions {
  ToolCallFormat format = ToolCallFormat::kNone;  // kNone: all text is content
  std::string id_prefix = "call_";                // ids of DeepSeek calls: id_prefix + index
  // When set, only calls of this function are taken (tool_choice naming a function); others stay
  // content.
  std::optional<std::string> only_name;
  int32_t max_calls = INT32_MAX;  // parallel_tool_calls=false: 1; calls past it stay content
  // Kimi-K2 numbers every tool call of a conversation ("functions.NAME:IDX", the template writes
  // the id back in the call's place): the calls before this response (count_tool_calls of the
  // request's messages). A call's id takes first_call_index + its index here, whatever index the
  // model wrote, so that ids stay unique across the conversation's turns.
  int32_t first_call_index = 0;
};

// The tool calls of a chat request's messages (assistant messages' tool_calls arrays).
int32_t count_tool_calls(const nlohmann::ordered_json& messages);

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallParserOptions options);

  struct Delta {
    std::string content;          // text decided to be content
    std::vector<ToolCall> calls;  // calls taken by this push (whole, in order)
    // Where each call stands in the text: calls[i] follows content[0, call_at[i]).
    std::vector<size_t> call_at;
  };
  // Feeds the next piece of (content) text.
  Delta push(std::string_view text);
  // End of output: what is still held back becomes content.
  Delta finish();

  int32_t call_count() const { return next_index_; }

 private:
  enum class State { kText, kSection, kCall };
  // Parses one whole call's text (between its begin and end markers); nullopt when malformed.
  std::optional<ToolCall> parse_call(std::string_view body) const;
  void step(Delta& d);

  ToolCallParserOptions options_;
  std::string_view section_begin_, section_end_, call_begin_, call_end_;
  State state_ = State::kText;
  std::string hold_;     // undecided text
  std::string pending_;  // the section's begin marker and skipped whitespace, until a call is taken
  bool section_taken_ = false;  // a call of the open section was taken (its end marker is consumed)
  int32_t next_index_ = 0;
};

// ---- Forced tool calls (tool_choice "required" or a named function) ----
//
// The output is nothing but tool calls in the format's own markup, as the chat template writes an
// assistant's calls: the section's begin marker, one call (max_calls 1, parallel_tool_calls=false)
// or more, the section's end marker, then end-of-sequence. Each call names one of `tools` and its
// arguments are a JSON object conforming to that tool's parameters (json_schema.h), with none of
// the format's markers inside (they would end the call early when parsed back). DeepSeek-V3's
// calls are "function<sep>NAME\n```json\nARGS\n```", joined by "\n"; Kimi-K2's header is
// "functions.NAME:IDX" with IDX 1 to 6 digits (the model's own call counter). A marker that is one
// token of the vocabulary is that token only (token_of gives its id), else its text. Every output
// that ends parses back through ToolCallParser into calls of `tools` with valid arguments.

struct ForcedTool {
  std::string name;                              // a valid function name (openai_request.cpp checks)
  std::shared_ptr<const JsonSchema> parameters;  // null: any JSON object
};

// Throws Error(kInvalidArgument) for kNone or no tools. max_calls: 1, or more for any number.
std::shared_ptr<const JsonSequenceGrammar> tool_call_grammar(
    ToolCallFormat format, const std::vector<ForcedTool>& tools, int32_t max_calls,
    const std::function<std::optional<int32_t>(std::string_view)>& token_of, JsonGrammarOptions options = {});

}  // namespace hymoe::server
