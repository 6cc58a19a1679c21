// logits: runs the reference forward pass over a checkpoint and prints logits as JSON.
//   hymoe-cli logits --model DIR --tokens 1,2,3 [--all-positions] [--form naive|absorbed]
// The reference path lives in the test tree (tests/reference); a build without tests, or without
// the model module, has no logits command body and says so.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "hymoe/common/error.h"

#if defined(HYMOE_REFERENCE_HAS_MODEL)
#include "hymoe/model/model_weights.h"
#include "hymoe/model/weight_store.h"
#include "reference_model.h"
#endif

namespace hymoe::cli {
namespace {

// "1,2,3" -> {1, 2, 3}. Every item must be a whole decimal integer (sign allowed, so that a
// negative id reaches the range check and gets its own message).
std::vector<int64_t> parse_token_list(const std::string& text) {
  std::vector<int64_t> tokens;
  HYMOE_CHECK(!text.empty(), kInvalidArgument, "--tokens is empty: give ids like 1,2,3");
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    int64_t v = 0;
    const char* first = item.data();
    const char* last = item.data() + item.size();
    const auto [ptr, ec] = std::from_chars(first, last, v);
    HYMOE_CHECK(!item.empty() && ec == std::errc() && ptr == last, kInvalidArgument,
                "--tokens: '{}' (item {}) is not an integer token id", item, tokens.size());
    tokens.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return tokens;
}

#if defined(HYMOE_REFERENCE_HAS_MODEL)
void run_logits(const std::string& model_dir, const std::string& token_text, bool all_positions,
                const std::string& form_name) {
  const std::vector<int64_t> tokens = parse_token_list(token_text);
  HYMOE_CHECK(form_name == "naive" || form_name == "absorbed", kInvalidArgument,
              "--form '{}': expected naive or absorbed", form_name);
  LoadOptions options;
  options.mode = LoadMode::kMmap;
  const std::unique_ptr<WeightStore> store = WeightStore::open(model_dir, options);
  const ModelWeights weights = ModelWeights::bind(*store);
  const reference::ReferenceModel model(weights);
  const int64_t vocab = model.config().vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i) {
    HYMOE_CHECK(tokens[i] >= 0 && tokens[i] < vocab, kInvalidArgument,
                "--tokens: id {} (item {}) is outside the vocabulary [0, {})", tokens[i], i, vocab);
  }
  const reference::MlaForm form =
      form_name == "naive" ? reference::MlaForm::kNaive : reference::MlaForm::kAbsorbed;
  const std::vector<float> logits = model.forward(tokens, form);

  const int64_t n = static_cast<int64_t>(tokens.size());
  auto row = [&](int64_t i) {
    return std::vector<float>(logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
  };
  nlohmann::json out = {{"model", model_dir}, {"path", "reference"}, {"form", form_name},
                        {"tokens", tokens},   {"vocab_size", vocab}};
  if (all_positions) {
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t i = 0; i < n; ++i) rows.push_back(row(i));
    out["positions"] = n;
    out["logits"] = std::move(rows);
  } else {
    out["position"] = n - 1;
    out["logits"] = row(n - 1);
  }
  std::printf("%s\n", out.dump().c_str());
}
#else
void run_logits(const std::string&, const std::string& token_text, bool, const std::string&) {
  parse_token_list(token_text);
  HYMOE_THROW(kUnsupported,
              "this hymoe-cli was built without the reference forward pass or the model module "
              "(configure with HYMOE_BUILD_TESTS=ON)");
}
#endif

}  // namespace

void register_logits_commands(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "Run the reference forward pass and print logits (JSON)");
  auto model_dir = std::make_shared<std::string>();
  auto token_text = std::make_shared<std::string>();
  auto form = std::make_shared<std::string>("absorbed");
  auto all_positions = std::make_shared<bool>(false);
  cmd->add_option("--model", *model_dir, "Checkpoint directory (HF format)")->required();
  cmd->add_option("--tokens", *token_text, "Token ids, comma separated: 1,2,3")->required();
  cmd->add_flag("--all-positions", *all_positions, "Print the logits of every position");
  cmd->add_option("--form", *form, "MLA form: naive | absorbed")->capture_default_str();
  cmd->callback([=] { run_logits(*model_dir, *token_text, *all_positions, *form); });
}

}  // namespace hymoe::cli
