// libFuzzer target for the tokenizer (scripts/test.d/20-fuzz-request-tokenizer builds and runs
// it): the input as text must encode and decode to itself with invalid UTF-8 replaced (U+FFFD),
// and the streaming detokenizer fed those ids one at a time must give the same text. The input
// read as token ids must decode (or be refused with kInvalidArgument for an id the vocabulary
// does not define) and stream to the same valid UTF-8, with and without a stop string. Loads the
// DeepSeek-V3 tokenizer once from $HYMOE_FUZZ_TOKENIZER_DIR.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/common/error.h"
#include "hymoe/tokenizer/streaming_detokenizer.h"
#include "hymoe/tokenizer/tokenizer.h"
#include "hymoe/tokenizer/utf8.h"

namespace {

using hymoe::tokenizer::StreamingDetokenizer;
using hymoe::tokenizer::TokenId;
using hymoe::tokenizer::Tokenizer;

const Tokenizer& tok() {
  static const std::unique_ptr<Tokenizer> t = [] {
    const char* dir = std::getenv("HYMOE_FUZZ_TOKENIZER_DIR");
    if (!dir) std::abort();
    return Tokenizer::load(dir);
  }();
  return *t;
}

std::string stream(const std::vector<TokenId>& ids, bool skip_special, std::vector<std::string> stop = {}) {
  StreamingDetokenizer d(tok(), {skip_special, std::move(stop)});
  std::string out;
  for (const TokenId id : ids) out += d.push(id);
  return out + d.finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Text -> ids -> text.
  const std::vector<TokenId> ids = tok().encode(text, /*add_special=*/false);
  const std::string decoded = tok().decode(ids, /*skip_special=*/false);
  if (decoded != hymoe::tokenizer::utf8::sanitize(text)) std::abort();
  if (stream(ids, /*skip_special=*/false) != decoded) std::abort();

  // Bytes as ids (3 bytes each, folded into the vocabulary).
  std::vector<TokenId> raw;
  for (size_t i = 0; i + 3 <= size; i += 3) {
    const uint32_t v = data[i] | (uint32_t(data[i + 1]) << 8) | (uint32_t(data[i + 2]) << 16);
    raw.push_back(static_cast<TokenId>(v % static_cast<uint32_t>(tok().vocab_size())));
  }
  std::string whole;
  try {
    whole = tok().decode(raw, /*skip_special=*/true);
  } catch (const hymoe::Error& e) {
    if (e.kind() != hymoe::ErrorKind::kInvalidArgument) std::abort();
    return 0;  // an id inside the range that the vocabulary leaves undefined
  }
  if (!hymoe::tokenizer::utf8::is_valid(whole)) std::abort();
  if (stream(raw, /*skip_special=*/true) != whole) std::abort();
  // With a stop string taken from the text (whole characters): the stream is the text before
  // its first match.
  if (whole.size() >= 4) {
    const std::string stop = whole.substr(whole.size() / 2, 2);
    if (hymoe::tokenizer::utf8::is_valid(stop)) {
      const std::string cut = stream(raw, true, {stop});
      const size_t at = whole.find(stop);
      if (cut != (at == std::string::npos ? whole : whole.substr(0, at))) std::abort();
    }
  }
  return 0;
}
