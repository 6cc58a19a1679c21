// Cost of JSON mode per decode step: the constraint's mask over the whole vocabulary plus
// advancing it by the chosen token, on DeepSeek-V3's tokenizer (~129K tokens), stepping through a
// JSON document tokenized by the same tokenizer: once as response_format json_object, once as
// json_schema with a schema the document conforms to (every property required, in order; an
// enum, a nullable, nested objects and arrays, a $ref), and once as a forced tool call
// (tool_choice required over 8 tools, DeepSeek-V3's markup with one item of the document as the
// arguments of a tool whose parameters are the item's schema). Beside it, in the same run, the
// sampler's own time per step on the same logits row (T 1): the work every sampled step pays anyway.
//   hymoe-bench-json-mask --model DIR [--repeat N]
// Prints a summary line and one JSON object per mode: {name (json_mask_step |
// json_schema_mask_step | tool_call_mask_step), steps, value (mean mask + accept, us a step), unit, median_us, p99_us,
// max_us, string_us, structure_us, ceiling (sampler us a step), ratio, build_ms}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hymoe/engine/sampler.h"
#include "hymoe/server/json_constraint.h"
#include "hymoe/server/runtime.h"
#include "hymoe/server/tool_calls.h"
#include "hymoe/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

// A JSON object of the kind an agent asks for: keys, short and long strings (ASCII, CJK, escapes),
// numbers, booleans, nested arrays and objects; compact separators.
std::string document() {
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  for (int i = 0; i < 12; ++i) {
    nlohmann::ordered_json item = {
        {"id", 1000 + i * 37},
        {"name", "item number " + std::to_string(i)},
        {"price", 19.99 + i * 0.5},
        {"in_stock", i % 3 != 0},
        {"tags", {"alpha", "beta", "gamma"}},
        {"description", "A \"quoted\" line\nwith a newline, a tab\t and some text: 東京 café 😀."},
        {"dims", {{"w", 12.5}, {"h", -3}, {"d", 1e-3}}},
        {"notes", nullptr},
    };
    doc["item_" + std::to_string(i)] = item;
  }
  return doc.dump();
}

// What document() conforms to.
const char* kSchema = R"({
  "$defs": {"item": {"type": "object", "additionalProperties": false,
    "required": ["id", "name", "price", "in_stock", "tags", "description", "dims", "notes"],
    "properties": {
      "id": {"type": "integer"}, "name": {"type": "string"}, "price": {"type": "number"},
      "in_stock": {"type": "boolean"},
      "tags": {"type": "array", "items": {"enum": ["alpha", "beta", "gamma", "delta"]}, "maxItems": 8},
      "description": {"type": "string"},
      "dims": {"type": "object", "additionalProperties": false, "required": ["w", "h", "d"],
               "properties": {"w": {"type": "number"}, "h": {"type": "number"}, "d": {"type": "number"}}},
      "notes": {"type": ["string", "null"]}}}},
  "type": "object", "additionalProperties": false, "properties": {}})";

nlohmann::ordered_json schema() {
  auto s = nlohmann::ordered_json::parse(kSchema);
  for (int i = 0; i < 12; ++i) {
    s["properties"]["item_" + std::to_string(i)] = {{"$ref", "#/$defs/item"}};
    s["required"].push_back("item_" + std::to_string(i));
  }
  return s;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::max(1, std::atoi(argv[i + 1]));
  }
  if (model.empty()) {
    std::fprintf(stderr, "usage: hymoe-bench-json-mask --model DIR [--repeat N]\n");
    return 2;
  }
  try {
    auto tok = hymoe::tokenizer::Tokenizer::load(model);
    const int32_t eos = tok->eos_id().value_or(1);
    auto t0 = Clock::now();
    auto vocab = hymoe::server::make_json_mode_vocab(*tok, eos);
    const double build_ms = us_since(t0) / 1000.0;

    const std::string text = document();
    const std::vector<int32_t> ids = tok->encode(text, /*add_special=*/false);
    const size_t rows = 129280;  // DeepSeek-V3's lm_head rows (the tokenizer's vocabulary, padded)
    std::vector<float> base(rows), row(rows);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& v : base) v = normal(rng);

    std::vector<double> sampler_us;
    hymoe::Sampler sampler(static_cast<int32_t>(rows));
    hymoe::SamplingParams sp;
    sp.temperature = 1.0;
    for (size_t i = 0; i <= ids.size(); i += 4) {
      std::copy(base.begin(), base.end(), row.begin());
      const auto q0 = Clock::now();
      auto out = sampler.sample(row, sp, {}, 7, i);
      sampler_us.push_back(us_since(q0));
      (void)out;
    }
    auto mean_of = [](const std::vector<double>& v) {
      double s = 0.0;
      for (double x : v) s += x;
      return v.empty() ? 0.0 : s / static_cast<double>(v.size());
    };
    const double sampler_mean = mean_of(sampler_us);
    std::printf("json mask: vocabulary %d tokens (%zu rows), document %zu bytes = %zu tokens, %d passes\n",
                tok->vocab_size(), rows, text.size(), ids.size(), repeat);

    const auto compiled = hymoe::server::compile_json_schema(schema());
    // The forced tool call: 8 tools, get_item's parameters the item schema.
    auto item_schema = schema()["$defs"]["item"];
    std::vector<hymoe::server::ForcedTool> tools;
    for (const char* name : {"get_weather", "search", "send_email", "get", "get_items", "lookup", "run_code"}) {
      tools.push_back({name, nullptr});
    }
    tools.push_back({"get_item", hymoe::server::compile_json_schema(item_schema)});
    const auto grammar = hymoe::server::tool_call_grammar(
        hymoe::server::ToolCallFormat::kDeepSeekV3, tools, INT32_MAX,
        [&](std::string_view m) -> std::optional<int32_t> { return tok->special_token_id(m); });
    const std::string call_text = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_item\n```json\n" +
                                  nlohmann::ordered_json::parse(text)["item_3"].dump() +
                                  "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    const std::vector<int32_t> call_ids = tok->encode(call_text, /*add_special=*/false);
    for (const int mode : {0, 1, 2}) {
      const bool with_schema = mode == 1;
      const char* mode_name = mode == 0 ? "json_object" : mode == 1 ? "json_schema" : "tool_call";
      const std::vector<int32_t>& ids_of = mode == 2 ? call_ids : ids;
      std::shared_ptr<hymoe::TokenConstraintFactory> factory;
      if (mode == 2) factory = std::make_shared<hymoe::server::JsonSequenceConstraintFactory>(vocab, false, grammar);
      else factory = std::make_shared<hymoe::server::JsonConstraintFactory>(vocab, false, with_schema ? compiled : nullptr);
      std::vector<double> steps, in_string, structure;
      for (int r = 0; r < repeat; ++r) {
        auto c = factory->start();
        bool quoted = false;  // inside a string before this token (a rough split of the states)
        for (size_t i = 0; i <= ids_of.size(); ++i) {
          std::copy(base.begin(), base.end(), row.begin());
          const int32_t t = i < ids_of.size() ? ids_of[i] : eos;
          const auto s0 = Clock::now();
          c->mask(row);
          if (!c->accept(t)) {
            std::fprintf(stderr, "json mask bench: token %d at %zu refused (%s)\n", t, i, mode_name);
            return 1;
          }
          const double us = us_since(s0);
          steps.push_back(us);
          (quoted ? in_string : structure).push_back(us);
          if (i < ids_of.size()) {
            // Inside a string after an odd number of unescaped quotes (a backslash before a quote
            // read as an escape: enough to split the timings).
            const auto b = tok->token_bytes(t);
            for (size_t k = 0; k < b.size(); ++k) {
              if (b[k] == '"' && (k == 0 || b[k - 1] != '\\')) quoted = !quoted;
            }
          }
        }
      }
      const double mean = mean_of(steps);
      std::printf("%s: %.1f us a step mean (median %.1f, p99 %.1f, max %.1f; inside strings %.1f, structure %.1f); "
                  "sampler alone (T 1) %.1f us a step: mask / sampler %.2f; tables built in %.1f ms\n",
                  (std::string(mode_name) + " mask").c_str(), mean, percentile(steps, 0.5),
                  percentile(steps, 0.99), percentile(steps, 1.0), mean_of(in_string), mean_of(structure),
                  sampler_mean, mean / sampler_mean, build_ms);
      nlohmann::json out = {{"name", mode == 0 ? "json_mask_step" : std::string(mode_name) + "_mask_step"},
                            {"steps", steps.size()}, {"value", mean}, {"unit", "us"},
                            {"median_us", percentile(steps, 0.5)}, {"p99_us", percentile(steps, 0.99)},
                            {"max_us", percentile(steps, 1.0)}, {"string_us", mean_of(in_string)},
                            {"structure_us", mean_of(structure)}, {"ceiling", sampler_mean},
                            {"ratio", mean / sampler_mean}, {"build_ms", build_ms}};
      std::printf("%s\n", out.dump().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "json mask bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
