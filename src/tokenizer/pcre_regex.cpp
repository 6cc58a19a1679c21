#include "pcre_regex.h"

#include <pcre2.h>

#include "hymoe/common/error.h"

namespace hymoe::tokenizer {
namespace {
std::string pcre_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}
}  // namespace

MatchScratch::MatchScratch() : data_(pcre2_match_data_create(1, nullptr)) {
  HYMOE_CHECK(data_ != nullptr, kResourceExhausted, "pcre2_match_data_create failed");
}

MatchScratch::~MatchScratch() {
  pcre2_match_data_free(data_);
  if (context_) pcre2_match_context_free(context_);
  if (stack_) pcre2_jit_stack_free(stack_);
}

Regex::Regex(std::string_view pattern, std::string_view what) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                        PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code_) {
    HYMOE_THROW(kCorruptData, "{}: regex does not compile at offset {}: {} (pattern {})", what,
                offset, pcre_message(err), pattern_);
  }
  // JIT is an optimisation: pcre2_match falls back to the interpreter where it is unavailable.
  (void)pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() {
  if (code_) pcre2_code_free(code_);
}

Regex::Regex(Regex&& other) noexcept : pattern_(std::move(other.pattern_)), code_(other.code_) {
  other.code_ = nullptr;
}

bool Regex::find(std::string_view subject, size_t start, size_t& match_begin, size_t& match_end,
                 MatchScratch& scratch) const {
  for (;;) {
    int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(),
                         start, PCRE2_NO_UTF_CHECK, scratch.data_, scratch.context_);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && scratch.stack_ == nullptr) {
      // Long runs (e.g. megabytes of one character class) need more than the default 32 KiB.
      scratch.stack_ = pcre2_jit_stack_create(64 * 1024, 256 * 1024 * 1024, nullptr);
      scratch.context_ = pcre2_match_context_create(nullptr);
      HYMOE_CHECK(scratch.stack_ && scratch.context_, kResourceExhausted,
                  "cannot allocate a PCRE2 JIT stack");
      pcre2_jit_stack_assign(scratch.context_, nullptr, scratch.stack_);
      continue;
    }
    HYMOE_CHECK(rc >= 0, kInternal, "regex match failed: {} (pattern {})", pcre_message(rc),
                pattern_);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data_);
    match_begin = ov[0];
    match_end = ov[1];
    return true;
  }
}

}  // namespace hymoe::tokenizer
