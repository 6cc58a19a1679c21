// tokenize, detokenize, chat-template: the tokenizer module from the command line.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "hymoe/common/error.h"
#include "hymoe/tokenizer/chat_template.h"
#include "hymoe/tokenizer/tokenizer.h"

namespace hymoe::cli {
namespace {

std::string read_stdin() {
  std::ios::sync_with_stdio(false);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

nlohmann::ordered_json parse_stdin_json(const char* what) {
  try {
    return nlohmann::ordered_json::parse(read_stdin());
  } catch (const nlohmann::json::exception& e) {
    HYMOE_THROW(kInvalidArgument, "stdin is not valid JSON ({}): {}", what, e.what());
  }
}

}  // namespace

void register_tokenizer_commands(CLI::App& app) {
  struct Args {
    std::string model;
    bool add_special = false;
    bool keep_special = false;
    bool no_generation_prompt = false;
    std::string tools_file;
  };
  auto args = std::make_shared<Args>();

  auto* tok = app.add_subcommand("tokenize", "Text on stdin -> JSON array of token ids on stdout");
  tok->add_option("--model", args->model, "Model directory (tokenizer.json or tiktoken.model)")
      ->required();
  tok->add_flag("--add-special", args->add_special, "Add BOS/EOS as tokenizer_config.json says");
  tok->callback([args] {
    auto t = tokenizer::Tokenizer::load(args->model);
    const nlohmann::json ids = t->encode(read_stdin(), args->add_special);
    std::printf("%s\n", ids.dump().c_str());
  });

  auto* detok = app.add_subcommand("detokenize", "JSON array of ids on stdin -> text on stdout");
  detok->add_option("--model", args->model, "Model directory")->required();
  detok->add_flag("--keep-special", args->keep_special, "Keep special tokens in the text");
  detok->callback([args] {
    auto t = tokenizer::Tokenizer::load(args->model);
    const nlohmann::ordered_json j = parse_stdin_json("ids");
    HYMOE_CHECK(j.is_array(), kInvalidArgument, "stdin must be a JSON array of token ids");
    std::vector<tokenizer::TokenId> ids;
    for (const auto& v : j) {
      HYMOE_CHECK(v.is_number_integer(), kInvalidArgument, "token ids must be integers: {}",
                  v.dump());
      ids.push_back(v.get<tokenizer::TokenId>());
    }
    const std::string text = t->decode(ids, !args->keep_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
  });

  auto* chat = app.add_subcommand(
      "chat-template", "OpenAI-style messages JSON on stdin -> rendered prompt on stdout");
  chat->add_option("--model", args->model, "Model directory (tokenizer_config.json)")->required();
  chat->add_flag("--no-generation-prompt", args->no_generation_prompt,
                 "Do not open an assistant turn at the end");
  chat->add_option("--tools", args->tools_file, "JSON file with an OpenAI `tools` array");
  chat->callback([args] {
    const auto tmpl = tokenizer::ChatTemplate::load(args->model);
    nlohmann::ordered_json in = parse_stdin_json("messages");
    tokenizer::ChatRenderOptions opts;
    opts.add_generation_prompt = !args->no_generation_prompt;
    // Either a bare messages array or a request body {"messages": [...], "tools": [...]}.
    nlohmann::ordered_json messages = in;
    if (in.is_object()) {
      HYMOE_CHECK(in.contains("messages"), kInvalidArgument, "stdin object has no \"messages\"");
      messages = in["messages"];
      if (in.contains("tools")) opts.tools = in["tools"];
    }
    if (!args->tools_file.empty()) {
      std::FILE* f = std::fopen(args->tools_file.c_str(), "rb");
      HYMOE_CHECK(f, kNotFound, "{}: cannot open", args->tools_file);
      std::string s;
      char buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
      std::fclose(f);
      opts.tools = nlohmann::ordered_json::parse(s);
    }
    const std::string prompt = tmpl.render(messages, opts);
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  });
}

}  // namespace hymoe::cli
