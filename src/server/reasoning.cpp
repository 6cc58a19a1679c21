#include "hymoe/server/reasoning.h"

namespace hymoe::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ReasoningSplitter::Delta ReasoningSplitter::push(std::string_view text) {
  Delta d;
  hold_.append(text);
  if (at_start_) {
    // Drop leading whitespace-free "<think>" at the very start of the output.
    if (hold_.size() < kOpen.size() && kOpen.substr(0, hold_.size()) == hold_) return d;
    at_start_ = false;
    if (std::string_view(hold_).starts_with(kOpen)) {
      hold_.erase(0, kOpen.size());
      reasoning_ = true;
    }
  }
  while (!hold_.empty()) {
    if (!reasoning_) {
      d.content += hold_;
      hold_.clear();
      break;
    }
    saw_reasoning_ = true;
    const size_t close = hold_.find(kClose);
    if (close != std::string::npos) {
      d.reasoning += hold_.substr(0, close);
      hold_.erase(0, close + kClose.size());
      reasoning_ = false;
      continue;
    }
    const size_t keep = partial_tag(hold_, kClose);
    d.reasoning += hold_.substr(0, hold_.size() - keep);
    hold_.erase(0, hold_.size() - keep);
    break;
  }
  return d;
}

ReasoningSplitter::Delta ReasoningSplitter::finish() {
  Delta d;
  at_start_ = false;
  if (reasoning_) {
    d.reasoning = std::move(hold_);
  } else {
    d.content = std::move(hold_);
  }
  hold_.clear();
  return d;
}

bool prompt_opens_thinking(std::string_view prompt) {
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' ')) prompt.remove_suffix(1);
  return prompt.ends_with(kOpen);
}

}  // namespace hymoe::server
