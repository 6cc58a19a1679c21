#include "hymoe/common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>
#include <string>

#include "hymoe/common/error.h"

namespace hymoe::log {
namespace {

std::mutex g_mutex;  // guards logger creation and the default level

spdlog::level::level_enum& default_level() {
  static spdlog::level::level_enum level = spdlog::level::info;
  return level;
}

}  // namespace

std::shared_ptr<spdlog::logger> get(std::string_view component) {
  std::string name(component);
  if (auto existing = spdlog::get(name)) return existing;
  std::lock_guard lock(g_mutex);
  if (auto existing = spdlog::get(name)) return existing;
  // Logs go to stderr: stdout belongs to command output (JSON from hymoe-cli).
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ [%n] %v");
  logger->set_level(default_level());
  return logger;
}

void set_level(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    HYMOE_THROW(kInvalidArgument, "unknown log level '{}' (trace|debug|info|warn|error|off)", level);
  }
  std::lock_guard lock(g_mutex);
  default_level() = parsed;
  spdlog::apply_all([parsed](const std::shared_ptr<spdlog::logger>& l) { l->set_level(parsed); });
}

}  // namespace hymoe::log
