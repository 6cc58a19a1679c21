// Force-included (-include) into the fuzz build only. clang 14 (Debian 12's) lacks
// __builtin_source_location, so libstdc++ 12's <source_location> is empty under it; this supplies
// the same interface from the older builtins so hymoe/common/error.h compiles. Newer compilers
// define __cpp_lib_source_location and this header does nothing.
#pragma once
#include <version>
#if !defined(__cpp_lib_source_location)
#include <cstdint>
#include <source_location>
namespace std {
struct source_location {
  static consteval source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           uint_least32_t line = __builtin_LINE(),
                                           uint_least32_t column = __builtin_COLUMN()) noexcept {
    source_location s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    s.column_ = column;
    return s;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr uint_least32_t line() const noexcept { return line_; }
  constexpr uint_least32_t column() const noexcept { return column_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  uint_least32_t line_ = 0;
  uint_least32_t column_ = 0;
};
}  // namespace std
#endif
