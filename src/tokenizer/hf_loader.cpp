// tokenizer.json (Hugging Face tokenizers) -> BpeTokenizerSpec.
#include <memory>

#include "bpe_tokenizer.h"
#include "byte_level.h"
#include "config_file.h"
#include "hymoe/common/error.h"
#include "hymoe/common/log.h"
#include "hymoe/tokenizer/loaders.h"

namespace hymoe::tokenizer {
namespace {

using nlohmann::json;

// GPT-2's pattern, used by a ByteLevel pre-tokenizer with use_regex = true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string quote_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

void add_pre_tokenizer(const json& pt, const std::string& file, BpeTokenizerSpec& spec) {
  if (pt.is_null()) return;
  const std::string type = pt.value("type", "");
  if (type == "Sequence") {
    for (const json& p : pt.at("pretokenizers")) add_pre_tokenizer(p, file, spec);
  } else if (type == "Split") {
    const json& pat = pt.at("pattern");
    std::string regex;
    if (pat.contains("Regex")) {
      regex = pat["Regex"].get<std::string>();
    } else if (pat.contains("String")) {
      regex = quote_literal(pat["String"].get<std::string>());
    } else {
      HYMOE_THROW(kCorruptData, "{}: Split pre-tokenizer without a pattern", file);
    }
    const std::string behavior = pt.value("behavior", "");
    HYMOE_CHECK(behavior == "Isolated" && !pt.value("invert", false), kUnsupported,
                "{}: Split pre-tokenizer behavior {} (invert {}) is not supported", file,
                behavior, pt.value("invert", false));
    spec.steps.push_back({Regex(regex, file + " pre_tokenizer Split"), true});
  } else if (type == "ByteLevel") {
    HYMOE_CHECK(!pt.value("add_prefix_space", false), kUnsupported,
                "{}: ByteLevel pre-tokenizer with add_prefix_space is not supported", file);
    if (pt.value("use_regex", true)) {
      spec.steps.push_back({Regex(kGpt2Pattern, file + " ByteLevel"), true});
    }
  } else {
    HYMOE_THROW(kUnsupported, "{}: pre-tokenizer type {} is not supported", file, type);
  }
}

void check_normalizer(const json& n, const std::string& file) {
  if (n.is_null()) return;
  const std::string type = n.value("type", "");
  if (type == "Sequence") {
    for (const json& x : n.at("normalizers")) check_normalizer(x, file);
    return;
  }
  HYMOE_THROW(kUnsupported, "{}: normalizer type {} is not supported", file, type);
}

void check_decoder(const json& d, const std::string& file) {
  if (d.is_null()) return;
  const std::string type = d.value("type", "");
  HYMOE_CHECK(type == "ByteLevel", kUnsupported, "{}: decoder type {} is not supported", file,
              type);
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::filesystem::path& tokenizer_json,
                                             const std::filesystem::path& config_path) {
  const std::string file = tokenizer_json.string();
  const json doc = read_json_file(tokenizer_json);
  BpeTokenizerSpec spec;
  spec.format = "tokenizer.json";
  try {
    const json& model = doc.at("model");
    HYMOE_CHECK(model.value("type", "BPE") == "BPE", kUnsupported, "{}: model type {} is not BPE",
                file, model.value("type", ""));
    HYMOE_CHECK(!model.value("byte_fallback", false), kUnsupported,
                "{}: BPE byte_fallback is not supported", file);
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"}) {
      HYMOE_CHECK(!model.contains(key) || model[key].is_null(), kUnsupported,
                  "{}: BPE {} is not supported", file, key);
    }
    spec.whole_piece_first = model.value("ignore_merges", false);
    check_normalizer(doc.value("normalizer", json()), file);
    add_pre_tokenizer(doc.value("pre_tokenizer", json()), file, spec);
    check_decoder(doc.value("decoder", json()), file);

    // Vocabulary: byte-level text -> raw bytes (entries outside the alphabet keep their text).
    const json& vocab = model.at("vocab");
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const TokenId id = it.value().get<TokenId>();
      HYMOE_CHECK(id >= 0, kCorruptData, "{}: negative id for {}", file, it.key());
      std::optional<std::string> bytes = byte_level::decode(it.key());
      if (static_cast<size_t>(id) >= spec.spellings.size()) spec.spellings.resize(id + 1);
      spec.spellings[id] = it.key();
      spec.model.set_token(id, bytes ? std::move(*bytes) : it.key());
    }
    spec.model.finish(file);

    // Merges: "a b" or ["a", "b"], rank = position.
    const json& merges = model.at("merges");
    spec.model.pairs().reserve(merges.size());
    int32_t rank = 0;
    for (const json& mg : merges) {
      std::string a, b;
      if (mg.is_string()) {
        const std::string s = mg.get<std::string>();
        const size_t sp = s.find(' ');
        HYMOE_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                    kCorruptData, "{}: merge {} is not two symbols", file, rank);
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else {
        HYMOE_CHECK(mg.is_array() && mg.size() == 2, kCorruptData, "{}: merge {} is malformed",
                    file, rank);
        a = mg[0].get<std::string>();
        b = mg[1].get<std::string>();
      }
      auto ia = vocab.find(a), ib = vocab.find(b), iab = vocab.find(a + b);
      HYMOE_CHECK(ia != vocab.end() && ib != vocab.end() && iab != vocab.end(), kCorruptData,
                  "{}: merge {} ({} {}) names a token missing from the vocabulary", file, rank,
                  a, b);
      spec.model.pairs().insert(ia->get<TokenId>(), ib->get<TokenId>(), rank, iab->get<TokenId>());
      ++rank;
    }

    // Added tokens (special or not) are matched in text before pre-tokenization.
    for (const json& t : doc.value("added_tokens", json::array())) {
      const std::string content = t.at("content").get<std::string>();
      HYMOE_CHECK(!t.value("lstrip", false) && !t.value("rstrip", false) &&
                      !t.value("single_word", false),
                  kUnsupported, "{}: added token {} uses lstrip/rstrip/single_word", file, content);
      spec.added.add(content, t.at("id").get<TokenId>(), t.value("special", false));
    }
  } catch (const nlohmann::json::exception& e) {
    HYMOE_THROW(kCorruptData, "{}: unexpected structure: {}", file, e.what());
  }

  if (!config_path.empty()) {
    const json cfg = read_json_file(config_path);
    spec.bos_token = token_text(cfg, "bos_token");
    spec.eos_token = token_text(cfg, "eos_token");
    spec.add_bos = json_bool(cfg, "add_bos_token", false);
    spec.add_eos = json_bool(cfg, "add_eos_token", false);
  }
  log::get("tok")->info("loaded {}: {} merges, {} pre-tokenizer steps", file,
                        spec.model.pairs().size(), spec.steps.size());
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

}  // namespace hymoe::tokenizer
