#include "trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"

namespace hymoe::bench {
namespace {

using nlohmann::json;

// Reads a required (or optional) non-negative number field; throws with the line context.
std::optional<double> number_field(const json& obj, const char* name, bool required,
                                   std::string_view source, std::size_t line_no) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) {
    HYMOE_CHECK(!required, kCorruptData, "{}:{}: missing field \"{}\"", source, line_no, name);
    return std::nullopt;
  }
  HYMOE_CHECK(it->is_number(), kCorruptData, "{}:{}: field \"{}\" is not a number: {}", source,
              line_no, name, it->dump());
  const double v = it->get<double>();
  HYMOE_CHECK(std::isfinite(v) && v >= 0, kCorruptData,
              "{}:{}: field \"{}\" must be a finite non-negative number, got {}", source, line_no,
              name, it->dump());
  return v;
}

int length_field(const json& obj, const char* name, bool required, std::string_view source,
                 std::size_t line_no) {
  const auto v = number_field(obj, name, required, source, line_no);
  if (!v) return 0;
  HYMOE_CHECK(*v == std::floor(*v) && *v <= 1e9, kCorruptData,
              "{}:{}: field \"{}\" must be a whole token count, got {}", source, line_no, name, *v);
  return static_cast<int>(*v);
}

}  // namespace

std::vector<RequestSpec> parse_trace(std::string_view text, std::string_view source) {
  std::vector<RequestSpec> out;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;

    json obj = json::parse(line, nullptr, /*allow_exceptions=*/false);
    HYMOE_CHECK(!obj.is_discarded(), kCorruptData, "{}:{}: not valid JSON: {}", source, line_no,
                line.substr(0, 120));
    HYMOE_CHECK(obj.is_object(), kCorruptData, "{}:{}: expected a JSON object, got {}", source,
                line_no, obj.type_name());

    RequestSpec r;
    if (auto ts = number_field(obj, "timestamp", false, source, line_no)) r.arrival_s = *ts / 1000.0;
    if (auto it = obj.find("prompt"); it != obj.end() && !it->is_null()) {
      HYMOE_CHECK(it->is_string(), kCorruptData, "{}:{}: field \"prompt\" is not a string",
                  source, line_no);
      r.prompt = it->get<std::string>();
    }
    r.input_len = length_field(obj, "input_length", !r.prompt.has_value(), source, line_no);
    r.output_len = length_field(obj, "output_length", true, source, line_no);
    HYMOE_CHECK(r.output_len > 0, kCorruptData, "{}:{}: output_length must be at least 1", source,
                line_no);
    HYMOE_CHECK(r.prompt || r.input_len > 0, kCorruptData,
                "{}:{}: input_length must be at least 1", source, line_no);
    if (auto it = obj.find("hash_ids"); it != obj.end() && !it->is_null()) {
      HYMOE_CHECK(it->is_array(), kCorruptData, "{}:{}: field \"hash_ids\" is not an array",
                  source, line_no);
      for (const auto& h : *it) {
        HYMOE_CHECK(h.is_number_integer(), kCorruptData,
                    "{}:{}: hash_ids must hold integers, found {}", source, line_no, h.dump());
        r.hash_ids.push_back(h.get<std::int64_t>());
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<RequestSpec> load_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  HYMOE_CHECK(in.good(), kNotFound, "cannot open trace file {}", path);
  std::ostringstream buf;
  buf << in.rdbuf();
  HYMOE_CHECK(!in.bad(), kIo, "error reading trace file {}", path);
  auto requests = parse_trace(buf.str(), path);
  HYMOE_CHECK(!requests.empty(), kCorruptData, "{}: the trace holds no requests", path);
  return requests;
}

void sort_by_arrival(std::vector<RequestSpec>& requests) {
  std::stable_sort(requests.begin(), requests.end(), [](const auto& a, const auto& b) {
    return a.arrival_s.value_or(0.0) < b.arrival_s.value_or(0.0);
  });
}

std::vector<RequestSpec> random_requests(const RandomLengths& c) {
  HYMOE_CHECK(c.num_prompts > 0, kInvalidArgument, "--num-prompts must be positive");
  HYMOE_CHECK(c.input_len > 0 && c.output_len > 0, kInvalidArgument,
              "random input and output lengths must be positive");
  HYMOE_CHECK(c.range_ratio >= 0 && c.range_ratio < 1, kInvalidArgument,
              "--random-range-ratio must be in [0, 1), got {}", c.range_ratio);
  std::mt19937_64 rng(c.seed);
  auto draw = [&](int len) {
    const double lo = std::max(1.0, std::round(len * (1.0 - c.range_ratio)));
    const double hi = std::max(lo, std::round(len * (1.0 + c.range_ratio)));
    std::uniform_int_distribution<int> d(static_cast<int>(lo), static_cast<int>(hi));
    return d(rng);
  };
  std::vector<RequestSpec> out(static_cast<std::size_t>(c.num_prompts));
  for (auto& r : out) {
    r.input_len = draw(c.input_len);
    r.output_len = draw(c.output_len);
  }
  return out;
}

}  // namespace hymoe::bench
