// Chat templates: OpenAI-style messages -> the prompt text a model was trained on.
//
// The template is the model's own Jinja `chat_template` (tokenizer_config.json, or
// chat_template.jinja beside it), run by a small interpreter of the Jinja subset that Hugging
// Face chat templates use (jinja_*.h). Output is byte-for-byte what transformers'
// apply_chat_template(tokenize=False) gives: trim_blocks and lstrip_blocks on, `tojson` like
// transformers (its ensure_ascii, indent, separators and sort_keys arguments; ensure_ascii off by
// default), raise_exception() becomes an Error.
//
// The family (DeepSeek-V3 / R1 / V3.1, Kimi-K2) is detected from the template text so that the
// server can pick reasoning and tool-call parsers; rendering does not depend on it.
//
// Thread safety: render() is const and may run concurrently.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hymoe::tokenizer {

enum class TemplateFamily { kDeepSeekV3, kDeepSeekR1, kDeepSeekV31, kKimiK2, kUnknown };
std::string_view template_family_name(TemplateFamily f);

// Detects the family from the template's tell-tale markers; kUnknown when none match.
TemplateFamily detect_template_family(std::string_view source);

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // Null or an OpenAI `tools` array, exposed as `tools`. A template that does not use it
  // (DeepSeek-V3's, V3.1's) renders no tools: the client describes them in a system message, or
  // a tools-aware chat_template.jinja goes in the model directory (load() prefers it).
  nlohmann::ordered_json tools;
  // Extra template variables (e.g. {"thinking": true} for DeepSeek-V3.1).
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // Parses `source`; throws hymoe::Error kCorruptData (with line) for a syntax error and
  // kUnsupported for Jinja features outside the subset.
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ChatTemplate(const ChatTemplate&) = delete;
  ChatTemplate& operator=(const ChatTemplate&) = delete;

  // The template of a model directory: chat_template.jinja, else tokenizer_config.json's
  // chat_template (a string, or a list of {name, template} where "default" is used).
  // bos/eos texts come from tokenizer_config.json. kNotFound when there is no template.
  static ChatTemplate load(const std::filesystem::path& dir);

  // Renders `messages` (an array of {role, content, tool_calls?, tool_call_id?, name?, ...}).
  // Throws kInvalidArgument when the template raises (raise_exception) or the messages do not
  // fit it (e.g. a missing field the template needs).
  std::string render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const;

  TemplateFamily family() const { return family_; }
  const std::string& source() const { return source_; }

 private:
  std::string source_, bos_token_, eos_token_;
  TemplateFamily family_ = TemplateFamily::kUnknown;
  std::unique_ptr<jinja::Template> compiled_;
};

}  // namespace hymoe::tokenizer
