#include "prompts.h"

#include <random>
#include <sstream>

#include "hymoe/common/error.h"

namespace hymoe::bench {
namespace {

// Common English words; most are a single token in GPT-style BPE vocabularies when preceded by
// a space. Calibration drops the ones a given tokenizer splits.
constexpr const char* kWords =
    "the of and to in is was for on that with as by at from his her it an were are which be this "
    "had not or have one but all their they there been has who its new first more also after "
    "would other two time year only over most when city some into state may school can made used "
    "people world between such many out under both three these where during part about then "
    "later well war since what found known than life work three high each before while being "
    "century house music film water book family early like through group name music game line "
    "number long place public second began united large best found small even until much area "
    "south north west east river center great left right old king team power order field man "
    "home help water story light road local point party model rock table paper heart money face "
    "report event field level plan voice system market song black white red green blue green "
    "little stone bird tree ship car door wall open close free clear short hard sound word ";

std::vector<std::string> candidate_words() {
  std::vector<std::string> out;
  std::istringstream in(kWords);
  std::string w;
  while (in >> w) {
    std::string sw = " " + w;
    bool dup = false;
    for (const auto& x : out) dup = dup || x == sw;
    if (!dup) out.push_back(std::move(sw));
  }
  return out;
}

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x7F4A7C159E3779B9ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

}  // namespace

PromptBuilder::PromptBuilder(TokenCounter counter, std::uint64_t seed, int block_size)
    : counter_(std::move(counter)), seed_(seed), block_size_(block_size) {
  HYMOE_CHECK(block_size > 0, kInvalidArgument, "--block-size must be positive");
  words_ = candidate_words();
  if (!counter_) return;
  std::string all;
  for (const auto& w : words_) all += w;
  const auto total = counter_(all);
  if (!total) {
    counter_ = nullptr;  // no usable counter: estimate mode
    return;
  }
  if (*total != static_cast<int>(words_.size())) {
    std::vector<std::string> kept;
    for (const auto& w : words_) {
      const auto n = counter_(w);
      if (n && *n == 1) kept.push_back(w);
    }
    words_ = std::move(kept);
  }
  HYMOE_CHECK(words_.size() >= 16, kUnsupported,
              "the server's tokenizer splits almost every common word ({} single-token words)",
              words_.size());
  mode_ = "tokenize";
}

std::string PromptBuilder::random_words(std::uint64_t stream, int count) const {
  std::mt19937_64 rng(mix(seed_, stream));
  std::uniform_int_distribution<std::size_t> pick(0, words_.size() - 1);
  std::string out;
  out.reserve(static_cast<std::size_t>(count) * 7);
  for (int i = 0; i < count; ++i) out += words_[pick(rng)];
  return out;
}

std::string PromptBuilder::build(const RequestSpec& spec, std::size_t index, bool* exact) const {
  if (exact) *exact = false;
  if (spec.prompt) return *spec.prompt;
  const int target = spec.input_len;
  std::string prompt;
  if (spec.hash_ids.empty()) {
    prompt = random_words(mix(0xA5A5, index), target);
  } else {
    int left = target;
    for (std::size_t k = 0; k < spec.hash_ids.size() && left > 0; ++k) {
      const bool last = k + 1 == spec.hash_ids.size();
      const int n = last ? left : std::min(left, block_size_);
      prompt += random_words(mix(0x5A5A, static_cast<std::uint64_t>(spec.hash_ids[k])), n);
      left -= n;
    }
  }
  if (!counter_) return prompt;
  // Fix the tail until the count is exact; a word boundary merge can shift the count by one.
  std::uint64_t extra = mix(0xC3C3, index);
  for (int attempt = 0; attempt < 6; ++attempt) {
    const auto n = counter_(prompt);
    if (!n) return prompt;
    if (*n == target) {
      if (exact) *exact = true;
      return prompt;
    }
    if (*n < target) {
      prompt += random_words(++extra, target - *n);
    } else {
      for (int drop = *n - target; drop > 0 && !prompt.empty(); --drop) {
        const auto sp = prompt.rfind(' ');
        prompt.resize(sp == std::string::npos ? 0 : sp);
      }
    }
  }
  return prompt;
}

}  // namespace hymoe::bench
