// hymoe-cli command groups. Each adds its subcommands to the app; the callback of a subcommand
// runs it and sets the exit code through the returned reference.
#pragma once

#include <CLI/CLI.hpp>

namespace hymoe::cli {

// Exit status set by the subcommand that ran.
int& exit_code();

void register_info_commands(CLI::App& app);  // cpu-info
void register_logits_commands(CLI::App& app);  // logits (reference forward pass)
void register_tokenizer_commands(CLI::App& app);  // tokenize, detokenize, chat-template
void register_generate_commands(CLI::App& app);  // generate (the server's runtime, offline)
void register_stream_commands(CLI::App& app);  // stream-bench (SLP's expert streamer, CUDA builds)
void register_slp_commands(CLI::App& app);  // slp-bench (stream-loading prefill, CUDA builds)

}  // namespace hymoe::cli
