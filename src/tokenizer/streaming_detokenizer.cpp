#include "hymoe/tokenizer/streaming_detokenizer.h"

#include <algorithm>

#include "hymoe/tokenizer/utf8.h"

namespace hymoe::tokenizer {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, Options options)
    : tokenizer_(tokenizer), options_(std::move(options)) {
  std::erase_if(options_.stop, [](const std::string& s) { return s.empty(); });
}

std::string StreamingDetokenizer::push(TokenId id) {
  const std::string_view bytes = tokenizer_.token_bytes(id);  // validates the id
  if (stopped()) return "";
  if (options_.skip_special && tokenizer_.is_special(id) &&
      std::find(options_.keep_special.begin(), options_.keep_special.end(), id) == options_.keep_special.end()) {
    return "";
  }
  bytes_.append(bytes);
  const size_t n = utf8::complete_prefix(bytes_);
  if (n == 0) return "";
  std::string chunk = utf8::sanitize(std::string_view(bytes_).substr(0, n));
  bytes_.erase(0, n);
  return release(std::move(chunk), false);
}

std::string StreamingDetokenizer::finish() {
  if (stopped()) return "";
  std::string chunk = utf8::sanitize(bytes_);
  bytes_.clear();
  return release(std::move(chunk), true);
}

std::string StreamingDetokenizer::release(std::string chunk, bool final) {
  pending_ += chunk;
  if (options_.stop.empty()) {
    std::string out;
    out.swap(pending_);
    return out;
  }
  // The earliest stop string wins; on a tie, the first listed.
  size_t best_pos = std::string::npos;
  for (size_t i = 0; i < options_.stop.size(); ++i) {
    const size_t pos = pending_.find(options_.stop[i]);
    if (pos < best_pos) {
      best_pos = pos;
      stop_index_ = i;
    }
  }
  if (best_pos != std::string::npos) {
    std::string out = pending_.substr(0, best_pos);
    pending_.clear();
    bytes_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  if (!final) {
    for (const std::string& s : options_.stop) {
      for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k) {
        if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

}  // namespace hymoe::tokenizer
