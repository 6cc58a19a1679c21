// The tokenizer of a checkpoint: text <-> token ids.
//
// Tokenizer::load(dir) picks the format from the files in the model directory:
//   tokenizer.json                  Hugging Face byte-level BPE (DeepSeek-V3/R1/V3.1)
//   tiktoken.model (+ tokenizer_config.json)  tiktoken ranks (Kimi-K2)
// tokenizer_config.json, where present, supplies bos/eos and add_bos_token/add_eos_token.
//
// Thread safety: a loaded Tokenizer is immutable; every const member may be called from many
// threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hymoe::tokenizer {

using TokenId = int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Loads the tokenizer of a model directory. Throws hymoe::Error: kNotFound when the directory
  // holds no known tokenizer file, kCorruptData for malformed files (with the file and field),
  // kUnsupported for a valid file using a feature this build does not handle.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& dir);

  // Text -> ids. Added/special tokens written in the text are matched first (leftmost-longest).
  // add_special: prepend BOS / append EOS as tokenizer_config.json's add_bos_token /
  // add_eos_token say (what transformers' encode does). Invalid UTF-8 in `text` is replaced by
  // U+FFFD per the WHATWG decoder (maximal subparts), as a JavaScript or Python client would
  // see it before tokenizing.
  virtual std::vector<TokenId> encode(std::string_view text, bool add_special) const = 0;

  // Ids -> text (valid UTF-8; byte sequences that are not UTF-8 become U+FFFD).
  // skip_special drops the ids of special tokens. Throws kInvalidArgument for an id outside
  // [0, vocab_size()) or one the vocabulary does not define.
  virtual std::string decode(const std::vector<TokenId>& ids, bool skip_special) const;

  // The raw bytes one id stands for (for the streaming detokenizer); may be a partial UTF-8
  // character. Throws kInvalidArgument for an unknown id.
  virtual std::string_view token_bytes(TokenId id) const = 0;

  // The vocabulary's own spelling of a token (byte-level alphabet for tokenizer.json, the raw
  // bytes for tiktoken) and the reverse lookup; nullopt when absent.
  virtual std::string piece(TokenId id) const = 0;
  virtual std::optional<TokenId> piece_to_id(std::string_view piece) const = 0;

  // The id of an added/special token's text, e.g. "<｜end▁of▁sentence｜>".
  virtual std::optional<TokenId> special_token_id(std::string_view text) const = 0;
  virtual bool is_special(TokenId id) const = 0;

  // One past the largest id defined (base vocabulary plus added tokens).
  virtual int32_t vocab_size() const = 0;
  virtual std::optional<TokenId> bos_id() const = 0;
  virtual std::optional<TokenId> eos_id() const = 0;
  // The texts of bos/eos ("" when the model has none), as chat templates use them.
  virtual const std::string& bos_token() const = 0;
  virtual const std::string& eos_token() const = 0;

  // "tokenizer.json" or "tiktoken".
  virtual std::string_view format() const = 0;

 protected:
  Tokenizer() = default;
};

}  // namespace hymoe::tokenizer
