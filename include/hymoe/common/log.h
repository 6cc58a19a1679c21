// Named spdlog loggers, one per component: "server", "sched", "engine", "slp", "moe", "load",
// "gpu", "tok", "bench". Created on first use with the process-wide level and pattern.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string_view>

namespace hymoe::log {

// The logger for a component; thread-safe, created on first call.
std::shared_ptr<spdlog::logger> get(std::string_view component);

// Sets the level of every hymoe logger, present and future: trace|debug|info|warn|error|off.
// Throws hymoe::Error (kInvalidArgument) for an unknown level name.
void set_level(std::string_view level);

}  // namespace hymoe::log
