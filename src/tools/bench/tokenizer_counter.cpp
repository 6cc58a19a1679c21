#include "tokenizer_counter.h"

#include <memory>

#include "hymoe/common/error.h"
#ifdef HYMOE_BENCH_HAVE_TOKENIZER
#include "hymoe/tokenizer/tokenizer.h"
#endif

namespace hymoe::bench {

#ifdef HYMOE_BENCH_HAVE_TOKENIZER
bool have_tokenizer_files_support() { return true; }

TokenCounter load_tokenizer_counter(const std::string& dir) {
  std::shared_ptr<const tokenizer::Tokenizer> tok = tokenizer::Tokenizer::load(dir);
  return [tok](const std::string& text) -> std::optional<int> {
    return static_cast<int>(tok->encode(text, /*add_special=*/false).size());
  };
}
#else
bool have_tokenizer_files_support() { return false; }

TokenCounter load_tokenizer_counter(const std::string& dir) {
  HYMOE_THROW(kUnsupported, "--tokenizer {}: this build of hymoe-bench has no tokenizer library",
              dir);
}
#endif

}  // namespace hymoe::bench
