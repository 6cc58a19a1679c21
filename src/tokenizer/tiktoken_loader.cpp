// tiktoken ranks (+ Kimi-K2's tokenizer_config.json) -> BpeTokenizerSpec.
#include <fstream>
#include <map>
#include <memory>

#include "bpe_tokenizer.h"
#include "config_file.h"
#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/tokenizer/loaders.h"

namespace hymoe::tokenizer {

const std::string_view kKimiK2Pattern =
    R"([\p{Han}]+|)"
    R"([^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|)"
    R"(\s+(?!\S)|)"
    R"(\s+)";

namespace {

bool base64_decode(std::string_view in, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int v = value(c);
    if (v < 0) return false;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken(const TiktokenSpec& ts) {
  const std::string file = ts.ranks_file.string();
  std::ifstream in(ts.ranks_file, std::ios::binary);
  HYMOE_CHECK(in, kNotFound, "{}: cannot open the tiktoken ranks", file);
  BpeTokenizerSpec spec;
  spec.format = "tiktoken";
  spec.whole_piece_first = true;
  std::string line, bytes;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    HYMOE_CHECK(sp != std::string::npos, kCorruptData, "{}:{}: expected 'base64 rank'", file,
                line_no);
    HYMOE_CHECK(base64_decode(std::string_view(line).substr(0, sp), bytes) && !bytes.empty(),
                kCorruptData, "{}:{}: bad base64", file, line_no);
    long rank = -1;
    try {
      rank = std::stol(line.substr(sp + 1));
    } catch (const std::exception&) {
    }
    HYMOE_CHECK(rank >= 0 && rank < INT32_MAX, kCorruptData, "{}:{}: bad rank", file, line_no);
    spec.model.set_token(static_cast<TokenId>(rank), bytes);
  }
  spec.model.finish(file);

  // A merge (a, b) is allowed when a + b is a token; its rank is that token's rank. Every way of
  // cutting a token into two tokens is such a pair.
  const int32_t n = spec.model.size();
  spec.model.pairs().reserve(static_cast<size_t>(n) * 4);
  for (TokenId id = 0; id < n; ++id) {
    const std::string_view* t = spec.model.bytes_of(id);
    if (!t || t->size() < 2) continue;
    for (size_t k = 1; k < t->size(); ++k) {
      const TokenId* a = spec.model.id_of(t->substr(0, k));
      if (!a) continue;
      const TokenId* b = spec.model.id_of(t->substr(k));
      if (b) spec.model.pairs().insert(*a, *b, id, id);
    }
  }
  spec.steps.push_back({Regex(ts.pattern, file + " split pattern"), false});
  for (const auto& [text, id] : ts.special_tokens) spec.added.add(text, id, true);
  spec.bos_token = ts.bos_token;
  spec.eos_token = ts.eos_token;
  spec.add_bos = ts.add_bos;
  spec.add_eos = ts.add_eos;
  log::get("tok")->info("loaded {}: {} ranks, {} merge pairs, {} special tokens", file, n,
                        spec.model.pairs().size(), ts.special_tokens.size());
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

std::unique_ptr<Tokenizer> load_tiktoken_dir(const std::filesystem::path& dir) {
  TiktokenSpec ts;
  ts.ranks_file = dir / "tiktoken.model";
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  const nlohmann::json cfg = read_json_file(config_path);
  ts.pattern = cfg.contains("pat_str") ? cfg["pat_str"].get<std::string>()
                                       : std::string(kKimiK2Pattern);
  // Count the base ranks first: reserved ids follow them.
  TokenId num_base = 0;
  {
    std::ifstream in(ts.ranks_file, std::ios::binary);
    HYMOE_CHECK(in, kNotFound, "{}: cannot open the tiktoken ranks", ts.ranks_file.string());
    std::string line;
    while (std::getline(in, line)) num_base += line.empty() || line == "\r" ? 0 : 1;
  }
  std::map<TokenId, std::string> named;
  if (auto it = cfg.find("added_tokens_decoder"); it != cfg.end()) {
    for (auto t = it->begin(); t != it->end(); ++t) {
      TokenId id = -1;
      try {
        id = static_cast<TokenId>(std::stol(t.key()));
      } catch (const std::exception&) {
      }
      HYMOE_CHECK(id >= 0 && t.value().contains("content"), kCorruptData,
                  "{}: added_tokens_decoder entry {} is malformed", config_path.string(), t.key());
      named[id] = t.value()["content"].get<std::string>();
    }
  }
  constexpr TokenId kReserved = 256;
  for (TokenId id = num_base; id < num_base + kReserved; ++id) {
    if (!named.count(id)) named[id] = "<|reserved_token_" + std::to_string(id) + "|>";
  }
  for (auto& [id, text] : named) ts.special_tokens.emplace_back(text, id);
  ts.bos_token = token_text(cfg, "bos_token");
  ts.eos_token = token_text(cfg, "eos_token");
  ts.add_bos = json_bool(cfg, "add_bos_token", false);
  ts.add_eos = json_bool(cfg, "add_eos_token", false);
  return load_tiktoken(ts);
}

}  // namespace hymoe::tokenizer
