// Tokenizer::load (format detection) and the shared decode.
#include "hymoe/tokenizer/tokenizer.h"

#include "hymoe/common/error.h"
#include "hymoe/tokenizer/loaders.h"
#include "hymoe/tokenizer/utf8.h"

namespace hymoe::tokenizer {

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  std::error_code ec;
  HYMOE_CHECK(std::filesystem::is_directory(dir, ec), kNotFound, "{}: not a directory",
              dir.string());
  const auto config = dir / "tokenizer_config.json";
  const bool has_config = std::filesystem::is_regular_file(config, ec);
  if (std::filesystem::is_regular_file(dir / "tokenizer.json", ec)) {
    return load_hf_tokenizer(dir / "tokenizer.json", has_config ? config : std::filesystem::path{});
  }
  if (std::filesystem::is_regular_file(dir / "tiktoken.model", ec)) {
    HYMOE_CHECK(has_config, kNotFound, "{}: tiktoken.model needs tokenizer_config.json beside it",
                dir.string());
    return load_tiktoken_dir(dir);
  }
  HYMOE_THROW(kNotFound, "{}: no tokenizer.json or tiktoken.model", dir.string());
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool skip_special) const {
  std::string bytes;
  for (TokenId id : ids) {
    if (skip_special && is_special(id)) continue;
    bytes.append(token_bytes(id));
  }
  return utf8::sanitize(bytes);
}

}  // namespace hymoe::tokenizer
