// Mooncake trace parsing: good lines, and bad lines rejected with their line number.
#include <gtest/gtest.h>

#include "hymoe/common/error.h"
#include "trace.h"

namespace hymoe::bench {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_trace(text, "t.jsonl");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCorruptData);
    return e.message();
  }
  return "no error";
}

TEST(Trace, ParsesMooncakeLines) {
  const auto r = parse_trace(
      "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, "
      "\"hash_ids\": [46, 47, 48]}\r\n"
      "\n# a comment\n"
      "  {\"timestamp\": 100, \"input_length\": 3, \"output_length\": 1, \"prompt\": \"hi there\"}\n"
      "{\"input_length\": 9, \"output_length\": 4}",
      "t.jsonl");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_DOUBLE_EQ(*r[0].arrival_s, 27.482);
  EXPECT_EQ(r[0].input_len, 6955);
  EXPECT_EQ(r[0].output_len, 52);
  EXPECT_EQ(r[0].hash_ids, (std::vector<std::int64_t>{46, 47, 48}));
  EXPECT_FALSE(r[0].prompt);
  EXPECT_EQ(*r[1].prompt, "hi there");
  EXPECT_FALSE(r[2].arrival_s);

  auto sorted = r;
  sort_by_arrival(sorted);
  EXPECT_EQ(sorted[0].input_len, 9);  // no timestamp = time 0
  EXPECT_EQ(sorted[1].input_len, 3);
  EXPECT_EQ(sorted[2].input_len, 6955);
}

TEST(Trace, PromptWithoutInputLengthIsAllowed) {
  const auto r = parse_trace(R"({"output_length": 5, "prompt": "abc"})", "t");
  EXPECT_EQ(r[0].input_len, 0);
}

TEST(Trace, BadLinesNameTheLineAndTheProblem) {
  const std::string ok = "{\"timestamp\":0,\"input_length\":1,\"output_length\":1}\n";
  EXPECT_EQ(error_of(ok + "\n{not json\n"), "t.jsonl:3: not valid JSON: {not json");
  EXPECT_EQ(error_of(ok + "[1,2]"), "t.jsonl:2: expected a JSON object, got array");
  EXPECT_EQ(error_of("{\"input_length\":1}"), "t.jsonl:1: missing field \"output_length\"");
  EXPECT_EQ(error_of("{\"output_length\":1}"), "t.jsonl:1: missing field \"input_length\"");
  EXPECT_EQ(error_of("{\"input_length\":\"12\",\"output_length\":1}"),
            "t.jsonl:1: field \"input_length\" is not a number: \"12\"");
  EXPECT_EQ(error_of("{\"input_length\":-5,\"output_length\":1}"),
            "t.jsonl:1: field \"input_length\" must be a finite non-negative number, got -5");
  EXPECT_EQ(error_of("{\"input_length\":2.5,\"output_length\":1}"),
            "t.jsonl:1: field \"input_length\" must be a whole token count, got 2.5");
  EXPECT_EQ(error_of("{\"input_length\":2,\"output_length\":0}"),
            "t.jsonl:1: output_length must be at least 1");
  EXPECT_EQ(error_of("{\"input_length\":0,\"output_length\":3}"),
            "t.jsonl:1: input_length must be at least 1");
  EXPECT_EQ(error_of("{\"input_length\":2,\"output_length\":1,\"timestamp\":-1}"),
            "t.jsonl:1: field \"timestamp\" must be a finite non-negative number, got -1");
  EXPECT_EQ(error_of("{\"input_length\":2,\"output_length\":1,\"hash_ids\":5}"),
            "t.jsonl:1: field \"hash_ids\" is not an array");
  EXPECT_EQ(error_of("{\"input_length\":2,\"output_length\":1,\"hash_ids\":[1,\"x\"]}"),
            "t.jsonl:1: hash_ids must hold integers, found \"x\"");
  EXPECT_EQ(error_of("{\"input_length\":2,\"output_length\":1,\"prompt\":7}"),
            "t.jsonl:1: field \"prompt\" is not a string");
}

TEST(Trace, MissingFileIsNotFound) {
  try {
    load_trace("/nonexistent/trace.jsonl");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
}

TEST(RandomRequests, LengthsStayInTheRangeAndFollowTheSeed) {
  RandomLengths c{5000, 1000, 100, 0.25, 7};
  const auto a = random_requests(c);
  const auto b = random_requests(c);
  ASSERT_EQ(a.size(), 5000u);
  double sum_in = 0;
  int min_in = 1 << 30, max_in = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].input_len, b[i].input_len);
    EXPECT_GE(a[i].output_len, 75);
    EXPECT_LE(a[i].output_len, 125);
    min_in = std::min(min_in, a[i].input_len);
    max_in = std::max(max_in, a[i].input_len);
    sum_in += a[i].input_len;
  }
  EXPECT_EQ(min_in, 750);
  EXPECT_EQ(max_in, 1250);
  EXPECT_NEAR(sum_in / 5000, 1000, 5);  // uniform mean; sd of the mean ~2
  c.seed = 8;
  const auto d = random_requests(c);
  int same = 0;
  for (std::size_t i = 0; i < 1000; ++i) same += d[i].input_len == a[i].input_len;
  EXPECT_LT(same, 20);  // 501 possible values: ~2 matches by chance
  c.range_ratio = 0;
  for (const auto& r : random_requests(c)) EXPECT_EQ(r.input_len, 1000);
  c.range_ratio = 1.0;
  EXPECT_THROW(random_requests(c), Error);
}

}  // namespace
}  // namespace hymoe::bench
