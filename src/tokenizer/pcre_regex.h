// PCRE2 (UTF + Unicode properties, JIT) behind a small RAII interface for the pre-tokenizers.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_jit_stack_8;
struct pcre2_real_match_context_8;

namespace hymoe::tokenizer {

class Regex;

// Per-call matching state (match data, a JIT stack made on demand). One per thread; cheap to
// create for every encode call.
class MatchScratch {
 public:
  MatchScratch();
  ~MatchScratch();
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;

 private:
  friend class Regex;
  pcre2_real_match_data_8* data_ = nullptr;
  pcre2_real_jit_stack_8* stack_ = nullptr;
  pcre2_real_match_context_8* context_ = nullptr;
};

class Regex {
 public:
  // Compiles `pattern` (UTF, UCP, JIT). `what` names it in errors. Throws hymoe::Error
  // kCorruptData with PCRE2's message and offset when the pattern does not compile.
  Regex(std::string_view pattern, std::string_view what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&& other) = delete;

  // Finds the first match in subject[start..] (subject must be valid UTF-8; the match sees only
  // `subject`, so lookarounds stop at its ends). Returns false when there is none.
  bool find(std::string_view subject, size_t start, size_t& match_begin, size_t& match_end,
            MatchScratch& scratch) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
};

}  // namespace hymoe::tokenizer
