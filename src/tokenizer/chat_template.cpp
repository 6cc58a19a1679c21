#include "hymoe/tokenizer/chat_template.h"

#include <fstream>
#include <sstream>

#include "config_file.h"
#include "hymoe/common/error.h"
#include "jinja.h"

namespace hymoe::tokenizer {

std::string_view template_family_name(TemplateFamily f) {
  switch (f) {
    case TemplateFamily::kDeepSeekV3: return "deepseek-v3";
    case TemplateFamily::kDeepSeekR1: return "deepseek-r1";
    case TemplateFamily::kDeepSeekV31: return "deepseek-v3.1";
    case TemplateFamily::kKimiK2: return "kimi-k2";
    case TemplateFamily::kUnknown: return "unknown";
  }
  return "unknown";
}

TemplateFamily detect_template_family(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<|im_middle|>") || has("<|im_user|>")) return TemplateFamily::kKimiK2;
  if (has("<｜Assistant｜>") || has("<｜User｜>")) {
    if (has("thinking")) return TemplateFamily::kDeepSeekV31;  // the thinking switch
    if (has("</think>")) return TemplateFamily::kDeepSeekR1;
    return TemplateFamily::kDeepSeekV3;
  }
  return TemplateFamily::kUnknown;
}

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      family_(detect_template_family(source_)),
      compiled_(std::make_unique<jinja::Template>(source_)) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

ChatTemplate ChatTemplate::load(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto config_path = dir / "tokenizer_config.json";
  nlohmann::json cfg = nlohmann::json::object();
  if (std::filesystem::is_regular_file(config_path, ec)) cfg = read_json_file(config_path);
  std::string source;
  const auto jinja_path = dir / "chat_template.jinja";
  if (std::filesystem::is_regular_file(jinja_path, ec)) {
    std::ifstream in(jinja_path, std::ios::binary);
    std::ostringstream buf;
    buf << in.rdbuf();
    source = buf.str();
  } else if (auto it = cfg.find("chat_template"); it != cfg.end() && it->is_string()) {
    source = it->get<std::string>();
  } else if (it != cfg.end() && it->is_array()) {
    for (const auto& t : *it) {
      if (t.value("name", "") == "default") source = t.value("template", "");
    }
  }
  HYMOE_CHECK(!source.empty(), kNotFound, "{}: no chat template (chat_template.jinja or tokenizer_config.json)",
              dir.string());
  return ChatTemplate(std::move(source), token_text(cfg, "bos_token"), token_text(cfg, "eos_token"));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages,
                                 const ChatRenderOptions& options) const {
  HYMOE_CHECK(messages.is_array(), kInvalidArgument, "chat template: messages must be an array");
  for (const auto& m : messages) {
    HYMOE_CHECK(m.is_object() && m.contains("role") && m["role"].is_string(), kInvalidArgument,
                "chat template: every message needs a string \"role\"");
  }
  jinja::Value globals = jinja::Value::new_dict();
  globals.set("messages", jinja::Value::from_json(messages));
  globals.set("add_generation_prompt", jinja::Value::boolean(options.add_generation_prompt));
  globals.set("bos_token", jinja::Value::string(bos_token_));
  globals.set("eos_token", jinja::Value::string(eos_token_));
  globals.set("tools", jinja::Value::from_json(options.tools));  // None when absent, as transformers
  if (options.extra.is_object()) {
    for (auto it = options.extra.begin(); it != options.extra.end(); ++it) {
      globals.set(it.key(), jinja::Value::from_json(it.value()));
    }
  }
  return compiled_->render(globals);
}

}  // namespace hymoe::tokenizer
