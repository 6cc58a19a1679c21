// Server-sent events: an incremental parser for bytes as they arrive off the socket, and the
// decoder of one OpenAI streaming chunk (`data: {...}` of /v1/completions or
// /v1/chat/completions, or `data: [DONE]`).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hymoe::bench {

// One dispatched event: the `data:` lines joined with '\n' (the SSE rule), and its `event:` name.
struct SseEvent {
  std::string event;
  std::string data;
};

// Incremental SSE parser (WHATWG event-stream rules, the subset servers use): lines end in
// "\n", "\r\n" or "\r", split anywhere across feed() calls; a blank line dispatches the event
// when it holds data; ':' lines are comments; unknown fields are ignored; one leading space
// after "field:" is dropped. Bytes are copied; the parser owns no socket.
class SseParser {
 public:
  SseParser() = default;

  // Feeds the next bytes. For each complete event calls on_event(const SseEvent&) -> bool;
  // returning false stops parsing (the rest of the bytes are dropped) and feed returns false.
  template <typename OnEvent>
  bool feed(std::string_view bytes, OnEvent&& on_event);

  // True when bytes of an unfinished line or undispatched data are pending: at end of stream
  // this means the stream was truncated mid-event.
  bool has_partial() const { return !line_.empty() || has_data_; }

  // Bytes taken in so far.
  std::size_t bytes_seen() const { return bytes_seen_; }

  // Bytes held for the unfinished line and event (bounded by the caller against runaway input).
  std::size_t pending_bytes() const { return line_.size() + current_.data.size(); }

 private:
  // Handles one complete line; returns an event to dispatch on a blank line with data.
  bool take_line(std::string_view line);

  std::string line_;       // the unfinished current line
  bool pending_cr_ = false;  // last byte was '\r': a following '\n' belongs to it
  SseEvent current_;
  bool has_data_ = false;
  std::size_t bytes_seen_ = 0;
};

// What one streamed OpenAI chunk says.
struct StreamChunk {
  enum class Kind {
    kToken,      // carries generated text (text or delta.content / delta.reasoning_content)
    kEmpty,      // valid but no text (role-only delta, usage-only final chunk, keep-alive)
    kDone,       // "[DONE]"
    kError,      // an {"error": ...} object from the server
    kMalformed,  // not JSON, or not the shape of a completion chunk
  };
  Kind kind = Kind::kMalformed;
  std::string text;                        // generated text (kToken)
  bool has_choices = false;  // a non-empty "choices" array (vLLM times any such chunk)
  std::optional<long long> completion_tokens;  // usage.completion_tokens when present
  std::optional<long long> prompt_tokens;      // usage.prompt_tokens when present
  std::string error;                       // kError / kMalformed: what was wrong
};

// Decodes the data of one event. Never throws.
StreamChunk decode_openai_chunk(std::string_view data);

// ---- implementation of the template -----------------------------------------------------
template <typename OnEvent>
bool SseParser::feed(std::string_view bytes, OnEvent&& on_event) {
  bytes_seen_ += bytes.size();
  std::size_t i = 0;
  if (pending_cr_ && !bytes.empty()) {
    if (bytes[0] == '\n') i = 1;
    pending_cr_ = false;
  }
  while (i < bytes.size()) {
    const std::size_t eol = bytes.find_first_of("\r\n", i);
    if (eol == std::string_view::npos) {
      line_.append(bytes.substr(i));
      break;
    }
    line_.append(bytes.substr(i, eol - i));
    i = eol + 1;
    if (bytes[eol] == '\r') {
      if (i < bytes.size()) {
        if (bytes[i] == '\n') ++i;
      } else {
        pending_cr_ = true;
      }
    }
    const bool dispatch = take_line(line_);
    line_.clear();
    if (dispatch) {
      const bool go_on = on_event(static_cast<const SseEvent&>(current_));
      current_ = SseEvent{};
      has_data_ = false;
      if (!go_on) return false;
    }
  }
  return true;
}

}  // namespace hymoe::bench
