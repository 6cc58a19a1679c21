// hymoe-cli: offline tools over a checkpoint (logits, tokenize, chat templates, ...).
#include <cstdio>
#include <exception>

#include "commands.h"
#include "hymoe/common/error.h"
#include "hymoe/common/log.h"

namespace hymoe::cli {
int& exit_code() {
  static int code = 0;
  return code;
}
}  // namespace hymoe::cli

int main(int argc, char** argv) {
  CLI::App app{"hymoe-cli: offline tools for hymoe checkpoints"};
  app.require_subcommand(1);
  std::string level = "warn";
  app.add_option("--log-level", level, "trace|debug|info|warn|error|off")->capture_default_str();
  app.parse_complete_callback([&] { hymoe::log::set_level(level); });

  hymoe::cli::register_info_commands(app);
  hymoe::cli::register_logits_commands(app);
  hymoe::cli::register_tokenizer_commands(app);
  hymoe::cli::register_generate_commands(app);
  hymoe::cli::register_stream_commands(app);
  hymoe::cli::register_slp_commands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const hymoe::Error& e) {
    std::fprintf(stderr, "hymoe-cli: error (%s): %s\n",
                 std::string(hymoe::error_kind_name(e.kind())).c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hymoe-cli: error: %s\n", e.what());
    return 1;
  }
  return hymoe::cli::exit_code();
}
