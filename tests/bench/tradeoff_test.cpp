// The pacing trade-off chart: reads small synthetic scenario results (written by scenario_json
// from randomly timed requests, so reader and writer agree on the fields), draws one SVG that
// must be well-formed XML with one labelled point per setting and series, and names the file
// in its error for every kind of bad input.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hymoe/common/error.h"
#include "scenarios.h"
#include "svg.h"
#include "tradeoff.h"
#include "../test_seed.h"
#include "synthetic_requests.h"

namespace hymoe::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// "" when `s` is well-formed XML as far as an SVG needs (one root element, tags nested and
// closed, attribute values quoted, no bare '<' or '&' in text or values), else what is wrong.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  bool had_root = false;
  auto entity_ok = [&](std::size_t i) {
    const auto semi = s.find(';', i);
    if (semi == std::string::npos || semi - i > 6) return false;
    const std::string e = s.substr(i + 1, semi - i - 1);
    if (e == "amp" || e == "lt" || e == "gt" || e == "quot" || e == "apos") return true;
    return e.size() > 1 && e[0] == '#' &&
           std::all_of(e.begin() + 1, e.end(), [](char c) { return std::isdigit(c) != 0; });
  };
  auto name_at = [&](std::size_t& i) {
    const std::size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' ||
                            s[i] == ':' || s[i] == '_'))
      ++i;
    return s.substr(b, i - b);
  };
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '&') {
      if (!entity_ok(i)) return fmt::format("bare & at {}", i);
      ++i;
    } else if (c != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(c)))
        return fmt::format("text outside the root at {}", i);
      ++i;
    } else if (s.compare(i, 2, "</") == 0) {
      i += 2;
      const std::string name = name_at(i);
      if (i >= s.size() || s[i] != '>') return fmt::format("bad closing tag at {}", i);
      ++i;
      if (open.empty() || open.back() != name)
        return fmt::format("</{}> closes {}", name, open.empty() ? "nothing" : open.back());
      open.pop_back();
    } else {
      ++i;
      const std::string name = name_at(i);
      if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0])))
        return fmt::format("bad tag name at {}", i);
      if (open.empty() && had_root) return "a second root element";
      had_root = true;
      for (;;) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i >= s.size()) return "unterminated tag <" + name;
        if (s[i] == '>') {
          open.push_back(name);
          ++i;
          break;
        }
        if (s.compare(i, 2, "/>") == 0) {
          i += 2;
          break;
        }
        const std::string attr = name_at(i);
        if (attr.empty() || i + 1 >= s.size() || s[i] != '=' || (s[i + 1] != '\'' && s[i + 1] != '"'))
          return fmt::format("unquoted or bad attribute in <{}> at {}", name, i);
        const char quote = s[i + 1];
        const auto end = s.find(quote, i + 2);
        if (end == std::string::npos) return "unterminated attribute value in <" + name;
        for (std::size_t k = i + 2; k < end; ++k) {
          if (s[k] == '<') return fmt::format("< in an attribute of <{}>", name);
          if (s[k] == '&' && !entity_ok(k)) return fmt::format("bare & in <{}>", name);
        }
        i = end + 1;
      }
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return had_root ? "" : "no element";
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The numbers of one attribute of every element of `tag` whose fill is `color`, in order.
std::vector<double> attr_values(const std::string& svg, const std::string& tag,
                                const std::string& attr, const std::string& color) {
  std::vector<double> out;
  for (auto p = svg.find("<" + tag + " "); p != std::string::npos;
       p = svg.find("<" + tag + " ", p + 1)) {
    const std::string el = svg.substr(p, svg.find('>', p) - p);
    if (el.find("fill='" + color + "'") == std::string::npos) continue;
    const auto a = el.find(" " + attr + "='");
    if (a != std::string::npos) out.push_back(std::stod(el.substr(a + attr.size() + 3)));
  }
  return out;
}

// The texts of <text> elements filled with `color`, in order.
std::vector<std::string> texts(const std::string& svg, const std::string& color) {
  std::vector<std::string> out;
  const std::string key = "fill='" + color + "'>";
  for (auto p = svg.find("<text "); p != std::string::npos; p = svg.find("<text ", p + 1)) {
    const auto close = svg.find('>', p);
    if (svg.compare(close - key.size() + 1, key.size(), key) != 0) continue;
    out.push_back(svg.substr(close + 1, svg.find("</text>", close) - close - 1));
  }
  return out;
}

TEST(XmlCheck, RejectsBrokenDocuments) {
  EXPECT_EQ(xml_problem("<svg a='1'><text x=\"2\">a &amp; b</text><circle r='1'/></svg>\n"), "");
  EXPECT_NE(xml_problem("<svg><text>a<b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text></svg></text>"), "");
  EXPECT_NE(xml_problem("<svg x=1></svg>"), "");
  EXPECT_NE(xml_problem("<svg>"), "");
  EXPECT_NE(xml_problem("<svg/><svg/>"), "");
}

class Tradeoff : public ::testing::Test {
 protected:
  void SetUp() override {
    gen_.seed(static_cast<uint32_t>(hymoe::test::test_seed()));
    dir_ = fs::temp_directory_path() /
           fmt::format("hymoe-tradeoff-test-{}-{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  double uniform(double lo, double hi) { return gen_.uniform(lo, hi); }
  RequestOutput stream(double start, double ttft, int tokens, double gap_lo, double gap_hi) {
    return gen_.stream(start, ttft, tokens, gap_lo, gap_hi);
  }

  // One server setting's scenarios 1P, 1D, 1P+1D (and 1P+2D), scored as hymoe-bench does;
  // `stall` scales the decode gaps inside the prefill window.
  std::vector<ScenarioResult> setting(bool with_2d, double stall) {
    SoloBaselines solo;
    std::vector<ScenarioResult> out;
    auto add = [&](const char* name, int a, int b) {
      ScenarioResult r;
      r.spec = {name, a, b};
      const double p_start = uniform(0.3, 0.5), p_ttft = uniform(0.5, 2.0) * (a && b ? 1.3 : 1);
      for (int i = 0; i < b; ++i) {
        // A decode stream whose gaps ending inside the prefill window are `stall` times longer.
        RequestOutput d;
        d.success = true;
        d.start_time = uniform(0, 0.02);
        d.ttft = uniform(0.02, 0.05);
        d.output_tokens = 80;
        double t = d.start_time + d.ttft;
        d.token_times.push_back(t);
        for (int k = 1; k < d.output_tokens; ++k) {
          double gap = uniform(0.02, 0.03);
          if (a && t + gap > p_start && t + gap <= p_start + p_ttft) gap *= stall;
          d.itl.push_back(gap);
          t += gap;
          d.token_times.push_back(t);
        }
        d.latency = t - d.start_time;
        r.requests.push_back({'D', i, d, 0, {}, {}, {}});
      }
      for (int i = 0; i < a; ++i)
        r.requests.push_back({'P', i, stream(p_start, p_ttft, 1, 0, 0), 0, {}, {}, {}});
      score_scenario(r, solo);
      out.push_back(std::move(r));
    };
    add("1P", 1, 0);
    add("1D", 0, 1);
    add("1P+1D", 1, 1);
    if (with_2d) add("1P+2D", 1, 2);
    return out;
  }

  std::string save(const std::string& name, const std::vector<ScenarioResult>& results) {
    json arr = json::array();
    for (const auto& r : results) arr.push_back(scenario_json(r));
    return write(name, json{{"completed", 4},
                            {"scenario_config", {{"prefill_len", 16384}}},
                            {"scenarios", arr}}.dump());
  }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  // The error read_tradeoff_point throws for `path`, as text.
  static std::string error_of(const std::string& path, ErrorKind* kind) {
    try {
      read_tradeoff_point({"x", path});
    } catch (const Error& e) {
      *kind = e.kind();
      return e.message();
    }
    return "no error";
  }

  test::SyntheticRequests gen_;
  fs::path dir_;
};

TEST_F(Tradeoff, OnePointPerSettingAndSeries) {
  // Three settings; the last has no 1P+2D. Labels that need escaping stay well-formed.
  const std::vector<std::string> labels = {"off", "20 ms <tight>", "80 ms & loose"};
  std::vector<TradeoffInput> inputs;
  std::vector<std::vector<ScenarioResult>> runs;
  for (std::size_t k = 0; k < labels.size(); ++k) {
    runs.push_back(setting(k < 2, uniform(1.5, 20)));
    inputs.push_back({labels[k], save(fmt::format("r{}.json", k), runs.back())});
  }

  for (std::size_t k = 0; k < labels.size(); ++k) {
    const auto p = read_tradeoff_point(inputs[k]);
    const auto& r = runs[k];
    EXPECT_EQ(p.label, labels[k]);
    EXPECT_EQ(p.prefill_len, 16384);
    EXPECT_NEAR(*p.solo_ttft_ms, r[0].requests[0].output.ttft * 1000, 1e-9);
    EXPECT_NEAR(*p.solo_tpot_ms, r[1].requests[0].tpot_s * 1000, 1e-9);
    ASSERT_TRUE(p.one_d);
    EXPECT_NEAR(p.one_d->prefill_ttft_ms, r[2].requests[1].output.ttft * 1000, 1e-9);
    EXPECT_NEAR(p.one_d->decode_tpot_ratio, *r[2].decode_tpot_ratio, 1e-12);
    EXPECT_GT(p.one_d->decode_tpot_ratio, 1.2);  // the stretched gaps show
    EXPECT_EQ(p.two_d.has_value(), k < 2);
    if (k < 2) {
      EXPECT_NEAR(p.two_d->decode_tpot_ratio, *r[3].decode_tpot_ratio, 1e-12);
    }
  }

  const std::string out = (dir_ / "chart" / "tradeoff.svg").string();
  EXPECT_EQ(write_tradeoff_chart(out, inputs), 3);
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string svg = ss.str();
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("(16384-token prefill)"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 3 + 2);  // 1P+1D for each, 1P+2D for two
  for (std::size_t k = 0; k < labels.size(); ++k)
    EXPECT_EQ(count(svg, ">" + svg::escape(labels[k]) + "</text>"), k < 2 ? 2 : 1) << labels[k];
  for (const char* ref : {">solo TTFT (1P)<", ">solo TPOT (1D) = 1<", ">1.15 (goal)<", ">1P+2D<"})
    EXPECT_NE(svg.find(ref), std::string::npos) << ref;

  // The 1P+1D points run left to right by TTFT, labelled in that order, higher ratio higher up.
  std::vector<std::size_t> order = {0, 1, 2};
  std::vector<TradeoffPoint> points;
  for (const auto& i : inputs) points.push_back(read_tradeoff_point(i));
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return points[a].one_d->prefill_ttft_ms < points[b].one_d->prefill_ttft_ms;
  });
  const auto cx = attr_values(svg, "circle", "cx", "#1f77b4");
  const auto cy = attr_values(svg, "circle", "cy", "#1f77b4");
  const auto blue_labels = texts(svg, "#1f77b4");
  ASSERT_EQ(cx.size(), 3u);
  ASSERT_EQ(blue_labels.size(), 3u);
  EXPECT_TRUE(std::is_sorted(cx.begin(), cx.end()));
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(blue_labels[i], svg::escape(labels[order[i]]));
    for (std::size_t j = 0; j < 3; ++j)
      if (points[order[i]].one_d->decode_tpot_ratio > points[order[j]].one_d->decode_tpot_ratio) {
        EXPECT_LT(cy[i], cy[j]);
      }
  }
}

TEST_F(Tradeoff, BadInputsNameTheFile) {
  ErrorKind kind{};
  const std::string missing = (dir_ / "missing.json").string();
  EXPECT_NE(error_of(missing, &kind).find(missing), std::string::npos);
  EXPECT_EQ(kind, ErrorKind::kNotFound);

  const std::string garbage = write("garbage.json", "{\"scenarios\": [");
  EXPECT_NE(error_of(garbage, &kind).find(garbage), std::string::npos);
  EXPECT_EQ(kind, ErrorKind::kCorruptData);
  const std::string lines = write("lines.json", "{\"a\": 1}\n{\"a\": 2}\n");  // --append-result
  EXPECT_NE(error_of(lines, &kind).find(lines), std::string::npos);
  const std::string array = write("array.json", "[1, 2]");
  EXPECT_NE(error_of(array, &kind).find(array), std::string::npos);

  const std::string random_run = write("random.json", R"({"completed": 10, "duration": 3.5})");
  EXPECT_NE(error_of(random_run, &kind).find(random_run + " has no \"scenarios\""),
            std::string::npos);
  EXPECT_EQ(kind, ErrorKind::kCorruptData);

  // Scenarios, but no mixed one with figures: solo runs only, and a 1P+1D whose P failed.
  auto runs = setting(false, 5);
  runs[2].requests[1].output.success = false;
  runs[2].requests[1].output.error = "HTTP 500: boom";
  const std::string no_mixed = save("no-mixed.json", runs);
  EXPECT_NE(error_of(no_mixed, &kind).find(no_mixed + " has neither a 1P+1D nor a 1P+2D"),
            std::string::npos);
  EXPECT_EQ(kind, ErrorKind::kCorruptData);
  const std::string wrong_types = write(
      "types.json", R"({"scenarios": [{"name": 3}, {"name": "1P+1D", "decode_tpot_ratio": "x",
                       "requests": [{"role": "P", "success": true, "ttft_ms": "y"}]}]})");
  EXPECT_NE(error_of(wrong_types, &kind).find(wrong_types), std::string::npos);

  // A chart with one bad file among good ones fails on that file and writes nothing.
  const std::string good = save("good.json", setting(true, 3));
  const std::string out = (dir_ / "t.svg").string();
  try {
    write_tradeoff_chart(out, {{"a", good}, {"b", no_mixed}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(no_mixed), std::string::npos) << e.message();
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_THROW(write_tradeoff_chart(out, {}), Error);
}

TEST(TradeoffInputArg, LabelEqualsFileOrTheStem) {
  const auto a = parse_tradeoff_input("20 ms=out/pacing-20.json");
  EXPECT_EQ(a.label, "20 ms");
  EXPECT_EQ(a.path, "out/pacing-20.json");
  const auto b = parse_tradeoff_input("out/pacing-off.json");
  EXPECT_EQ(b.label, "pacing-off");
  EXPECT_EQ(b.path, "out/pacing-off.json");
  EXPECT_THROW(parse_tradeoff_input("=x.json"), Error);
  EXPECT_THROW(parse_tradeoff_input("L="), Error);
}

}  // namespace
}  // namespace hymoe::bench
