// Splits DeepSeek-R1 style output into reasoning_content and content: text up to "</think>" is
// reasoning, text after it is the answer. An opening "<think>" at the very start of the output
// is dropped. Tags that straddle streamed deltas are held back until they are decided.
#pragma once

#include <string>
#include <string_view>

namespace hymoe::server {

class ReasoningSplitter {
 public:
  // in_reasoning: whether the output starts inside a thought (the prompt ended with "<think>").
  explicit ReasoningSplitter(bool in_reasoning) : reasoning_(in_reasoning) {}

  struct Delta {
    std::string reasoning;
    std::string content;
  };
  // Feeds the next piece of decoded text.
  Delta push(std::string_view text);
  // End of output: releases anything held back.
  Delta finish();

  bool saw_reasoning() const { return saw_reasoning_; }

 private:
  bool reasoning_;
  bool at_start_ = true;
  bool saw_reasoning_ = false;
  std::string hold_;
};

// True when a rendered chat prompt leaves the model inside a thought (ends with "<think>" and
// optional whitespace), as DeepSeek-R1's template does.
bool prompt_opens_thinking(std::string_view prompt);

}  // namespace hymoe::server
