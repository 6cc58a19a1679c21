#include "hymoe/server/tool_calls.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace hymoe::server {
namespace {

struct Markers {
  std::string_view section_begin, section_end, call_begin, call_end, sep;
};

constexpr Markers kDeepSeek{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                            "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"};
constexpr Markers kKimi{"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                        "<|tool_call_end|>", "<|tool_call_argument_begin|>"};

const Markers* markers_of(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31: return &kDeepSeek;
    case ToolCallFormat::kKimiK2: return &kKimi;
    case ToolCallFormat::kNone: return nullptr;
  }
  return nullptr;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

// A function name as a model writes it: no whitespace, no markup, not too long.
bool plausible_name(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  return std::none_of(name.begin(), name.end(), [](char c) { return is_space(c) || c == '<' || c == '>'; });
}

// ARGS must be a JSON object. accept() runs the SAX parser without building a document, so a
// deeply nested output costs no recursion.
bool is_json_object(std::string_view args) {
  return !args.empty() && args.front() == '{' && nlohmann::json::accept(args);
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kDeepSeekV3: return "deepseek_v3";
    case ToolCallFormat::kDeepSeekV31: return "deepseek_v31";
    case ToolCallFormat::kKimiK2: return "kimi_k2";
  }
  return "none";
}

std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name) {
  for (auto f : {ToolCallFormat::kNone, ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                 ToolCallFormat::kKimiK2}) {
    if (name == tool_call_format_name(f)) return f;
  }
  return std::nullopt;
}

ToolCallFormat tool_call_format_for_family(std::string_view family) {
  if (family == "deepseek-v3" || family == "deepseek-r1") return ToolCallFormat::kDeepSeekV3;
  if (family == "deepseek-v3.1") return ToolCallFormat::kDeepSeekV31;
  if (family == "kimi-k2") return ToolCallFormat::kKimiK2;
  return ToolCallFormat::kNone;
}

std::vector<std::string> tool_call_markers(ToolCallFormat f) {
  const Markers* m = markers_of(f);
  if (!m) return {};
  return {std::string(m->section_begin), std::string(m->section_end), std::string(m->call_begin),
          std::string(m->call_end), std::string(m->sep)};
}

ToolCallParser::ToolCallParser(ToolCallParserOptions options) : options_(std::move(options)) {
  if (const Markers* m = markers_of(options_.format)) {
    section_begin_ = m->section_begin;
    section_end_ = m->section_end;
    call_begin_ = m->call_begin;
    call_end_ = m->call_end;
  }
}

std::optional<ToolCall> ToolCallParser::parse_call(std::string_view body) const {
  const Markers& m = *markers_of(options_.format);
  const size_t sep = body.find(m.sep);
  if (sep == std::string_view::npos) return std::nullopt;
  const std::string_view head = trim(body.substr(0, sep));
  std::string_view rest = body.substr(sep + m.sep.size());
  ToolCall call;
  std::string_view name, args;
  switch (options_.format) {
    case ToolCallFormat::kDeepSeekV3: {
      // function<｜tool▁sep｜>NAME\n```json\nARGS\n```
      if (head != "function") return std::nullopt;
      const size_t eol = rest.find('\n');
      if (eol == std::string_view::npos) return std::nullopt;
      name = trim(rest.substr(0, eol));
      std::string_view fenced = trim(rest.substr(eol + 1));
      if (!fenced.starts_with("```json") || !fenced.ends_with("```") || fenced.size() < 10) return std::nullopt;
      args = trim(fenced.substr(7, fenced.size() - 10));
      break;
    }
    case ToolCallFormat::kDeepSeekV31:
      // NAME<｜tool▁sep｜>ARGS
      name = head;
      args = trim(rest);
      break;
    case ToolCallFormat::kKimiK2: {
      // functions.NAME:IDX<|tool_call_argument_begin|>ARGS; the template writes the call's id in
      // the header's place: the id is functions.NAME:IDX with the conversation's counter (below).
      name = head;
      if (name.starts_with("functions.")) name.remove_prefix(10);
      const size_t colon = name.rfind(':');
      if (colon != std::string_view::npos && colon + 1 < name.size() &&
          std::all_of(name.begin() + static_cast<std::ptrdiff_t>(colon) + 1, name.end(),
                      [](char c) { return c >= '0' && c <= '9'; })) {
        name = name.substr(0, colon);
      }
      args = trim(rest);
      break;
    }
    case ToolCallFormat::kNone: return std::nullopt;
  }
  if (!plausible_name(name) || !is_json_object(args)) return std::nullopt;
  if (options_.only_name && name != *options_.only_name) return std::nullopt;
  call.name = std::string(name);
  call.arguments = std::string(args);
  return call;
}

void ToolCallParser::step(Delta& d) {
  while (!hold_.empty()) {
    if (state_ == State::kText) {
      const size_t at = hold_.find(section_begin_);
      if (at == std::string::npos) {
        const size_t keep = partial_tag(hold_, section_begin_);
        d.content.append(hold_, 0, hold_.size() - keep);
        hold_.erase(0, hold_.size() - keep);
        return;
      }
      d.content.append(hold_, 0, at);
      pending_.assign(section_begin_);
      hold_.erase(0, at + section_begin_.size());
      state_ = State::kSection;
      continue;
    }
    if (state_ == State::kSection) {
      // Whitespace between calls belongs to the section.
      size_t ws = 0;
      while (ws < hold_.size() && is_space(hold_[ws])) ++ws;
      pending_.append(hold_, 0, ws);
      hold_.erase(0, ws);
      if (hold_.empty()) return;
      if (hold_.starts_with(call_begin_)) {
        state_ = State::kCall;
        continue;
      }
      if (hold_.starts_with(section_end_)) {
        // A section without a taken call is content, markers and all.
        if (!section_taken_) d.content += pending_ + std::string(section_end_);
        pending_.clear();
        hold_.erase(0, section_end_.size());
        section_taken_ = false;
        state_ = State::kText;
        continue;
      }
      if (call_begin_.starts_with(hold_) || section_end_.starts_with(hold_)) return;  // undecided
      // Anything else ends the section: what it held is content.
      d.content += pending_;
      pending_.clear();
      section_taken_ = false;
      state_ = State::kText;
      continue;
    }
    // kCall: hold_ starts with call_begin_. The call ends at the first whole marker after it:
    // its end marker takes it, another call's begin or the section's end leaves it malformed.
    const size_t from = call_begin_.size();
    size_t end = hold_.find(call_end_, from);
    const size_t next = std::min(hold_.find(call_begin_, from), hold_.find(section_end_, from));
    if (end == std::string::npos && next == std::string::npos) return;  // wait for more
    std::optional<ToolCall> call;
    size_t consumed = 0;
    if (end != std::string::npos && (next == std::string::npos || end < next)) {
      consumed = end + call_end_.size();
      if (next_index_ < options_.max_calls) {
        call = parse_call(std::string_view(hold_).substr(from, end - from));
      }
    } else {
      consumed = next;
    }
    if (call) {
      call->index = next_index_++;
      call->id = options_.format == ToolCallFormat::kKimiK2
                     ? "functions." + call->name + ":" + std::to_string(int64_t{options_.first_call_index} + call->index)
                     : options_.id_prefix + std::to_string(call->index);
      d.calls.push_back(std::move(*call));
      d.call_at.push_back(d.content.size());
      section_taken_ = true;
    } else {
      d.content += pending_;
      d.content.append(hold_, 0, consumed);
    }
    pending_.clear();
    hold_.erase(0, consumed);
    state_ = State::kSection;
  }
}

ToolCallParser::Delta ToolCallParser::push(std::string_view text) {
  Delta d;
  if (options_.format == ToolCallFormat::kNone) {
    d.content = std::string(text);
    return d;
  }
  hold_.append(text);
  step(d);
  return d;
}

ToolCallParser::Delta ToolCallParser::finish() {
  Delta d;
  d.content = std::move(pending_) + std::move(hold_);
  pending_.clear();
  hold_.clear();
  section_taken_ = false;
  state_ = State::kText;
  return d;
}

int32_t count_tool_calls(const nlohmann::ordered_json& messages) {
  int64_t n = 0;
  if (!messages.is_array()) return 0;
  for (const auto& m : messages) {
    if (!m.is_object()) continue;
    const auto role = m.find("role");
    const auto calls = m.find("tool_calls");
    if (role != m.end() && *role == "assistant" && calls != m.end() && calls->is_array())
      n += static_cast<int64_t>(calls->size());
  }
  return static_cast<int32_t>(std::min<int64_t>(n, INT32_MAX));
}

}  // namespace hymoe::server
