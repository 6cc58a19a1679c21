// libFuzzer target: a client's request body through the OpenAI request parser, the chat
// template and the tokenizer, as the server runs them (scripts/test.d/20-fuzz-request-tokenizer
// builds and runs it). The first byte picks /v1/chat/completions or /v1/completions; the rest is
// the body. A body must be parsed or refused with ApiException (400); a parsed chat request
// must render or be refused with hymoe::Error (the template's invalid argument); the prompt must
// encode and decode back to itself. Anything else (a crash, a sanitizer report, a stack
// overflow, another exception) is a finding. The DeepSeek-V3 tokenizer and chat template load
// once from $HYMOE_FUZZ_TOKENIZER_DIR. A request that forces tool calls (tool_choice required or
// a named function) also builds each format's tool-call grammar from the client's names and
// schemas (tool_calls.h), which must never throw, and feeds each message's text to it as model output.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/server/json_sequence.h"
#include "hymoe/server/openai_request.h"
#include "hymoe/server/tool_calls.h"
#include "hymoe/tokenizer/chat_template.h"
#include "hymoe/tokenizer/tokenizer.h"

namespace {

struct Model {
  std::unique_ptr<hymoe::tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<hymoe::tokenizer::ChatTemplate> chat_template;
};

const Model& model() {
  static const Model m = [] {
    const char* dir = std::getenv("HYMOE_FUZZ_TOKENIZER_DIR");
    if (!dir) std::abort();
    Model x;
    x.tokenizer = hymoe::tokenizer::Tokenizer::load(dir);
    x.chat_template = std::make_unique<hymoe::tokenizer::ChatTemplate>(hymoe::tokenizer::ChatTemplate::load(dir));
    return x;
  }();
  return m;
}

void check_forced_tools(const hymoe::server::ChatCompletionRequest& r) {
  using namespace hymoe::server;
  std::vector<ForcedTool> tools;
  for (const auto& f : r.tool_choice.forced) tools.push_back({f.name, f.parameters});
  const auto token_of = [](std::string_view m) -> std::optional<int32_t> {
    return model().tokenizer->special_token_id(m);
  };
  for (auto format : {ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31, ToolCallFormat::kKimiK2}) {
    const auto g = tool_call_grammar(format, tools, r.parallel_tool_calls ? INT32_MAX : 1, token_of);
    // Each message's text content as the model's output.
    for (const auto& msg : r.messages) {
      const auto c = msg.find("content");
      if (c == msg.end() || !c->is_string()) continue;
      JsonSequenceMachine m(*g);
      for (const char b : c->get_ref<const std::string&>()) {
        if (!m.feed(b)) break;
      }
    }
  }
}

void check_round_trip(const std::string& text) {
  const auto ids = model().tokenizer->encode(text, /*add_special=*/false);
  if (model().tokenizer->decode(ids, /*skip_special=*/false) != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) == 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (chat) {
      const hymoe::server::ChatCompletionRequest r = hymoe::server::parse_chat_request(body);
      hymoe::tokenizer::ChatRenderOptions o;
      o.add_generation_prompt = true;
      if (!r.tools.is_null()) o.tools = r.tools;
      std::string prompt;
      try {
        prompt = model().chat_template->render(r.messages, o);
      } catch (const hymoe::Error& e) {
        if (e.kind() != hymoe::ErrorKind::kInvalidArgument) std::abort();
        return 0;
      }
      check_round_trip(prompt);
      if (!r.tool_choice.forced.empty()) check_forced_tools(r);
    } else {
      const hymoe::server::CompletionRequest r = hymoe::server::parse_completion_request(body);
      if (!r.prompt_is_tokens) check_round_trip(r.prompt);
    }
  } catch (const hymoe::server::ApiException& e) {
    if (e.error().status != 400) std::abort();
    (void)e.error().body();  // the error must serialise
  }
  return 0;
}
