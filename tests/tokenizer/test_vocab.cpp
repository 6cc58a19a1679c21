#include "test_vocab.h"

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "hymoe/tokenizer/utf8.h"

namespace hymoe::tokenizer::testing {
namespace {
std::string base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}
}  // namespace

std::string random_text(std::mt19937& rng, size_t chars) {
  std::string s;
  auto pick = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  for (size_t i = 0; i < chars; ++i) {
    switch (pick(0, 6)) {
      case 0: case 1: utf8::append(s, pick('a', 'z')); break;
      case 2: utf8::append(s, " \n\t"[pick(0, 2)]); break;
      case 3: utf8::append(s, pick(0x4e00, 0x9fa5)); break;
      case 4: utf8::append(s, pick(0x1f600, 0x1f64f)); break;
      case 5: utf8::append(s, pick(0x300, 0x36f)); break;
      default: utf8::append(s, pick(0xe0, 0x17f)); break;
    }
  }
  return s;
}

std::unique_ptr<Tokenizer> make_random_tiktoken(const std::filesystem::path& dir,
                                                std::mt19937& rng) {
  std::set<std::string> seen;
  std::ofstream ranks(dir / "tiktoken.model");
  int rank = 0;
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, char(b));
    seen.insert(one);
    ranks << base64(one) << ' ' << rank++ << '\n';
  }
  const std::string text = random_text(rng, 4000);
  for (int i = 0; i < 3000; ++i) {
    const size_t len = std::uniform_int_distribution<size_t>(2, 7)(rng);
    const size_t at = std::uniform_int_distribution<size_t>(0, text.size() - len)(rng);
    const std::string tok = text.substr(at, len);
    if (seen.insert(tok).second) ranks << base64(tok) << ' ' << rank++ << '\n';
  }
  ranks.close();
  nlohmann::json cfg = {{"pat_str", R"(\S+|\s+)"},
                        {"added_tokens_decoder",
                         {{std::to_string(rank), {{"content", "<|a|>"}}},
                          {std::to_string(rank + 1), {{"content", "<|eos|>"}}}}},
                        {"eos_token", "<|eos|>"}};
  std::ofstream(dir / "tokenizer_config.json") << cfg.dump();
  return Tokenizer::load(dir);
}

}  // namespace hymoe::tokenizer::testing
