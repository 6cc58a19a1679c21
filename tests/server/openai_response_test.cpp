#include "hymoe/server/openai_response.h"

#include <gtest/gtest.h>

namespace hymoe::server {
namespace {

TEST(OpenAiResponse, ChatCompletionShape) {
  ResponseHead h{"chatcmpl-1", "tiny", 1700000000};
  std::vector<TokenLogprob> lps = {{"Hi", "Hi", -0.5f, {{"Hi", -0.5f}, {"Yo", -1.5f}}, {"Hi", "Yo"}}};
  auto j = chat_completion(h, "Hi", std::string("thinking"), "stop", {10, 1}, &lps);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "thinking");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["total_tokens"], 11);
  auto& lp = j["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(lp["token"], "Hi");
  EXPECT_EQ(lp["bytes"], nlohmann::json::array({72, 105}));
  EXPECT_EQ(lp["top_logprobs"][1]["token"], "Yo");
}

TEST(OpenAiResponse, ToolCallsInTheMessageAndAsDeltas) {
  ResponseHead h{"chatcmpl-4", "tiny", 1};
  const std::vector<ToolCall> calls = {{0, "call_a_0", "get_weather", R"({"city": "東京"})"},
                                       {1, "functions.search:1", "search", "{}"}};
  auto j = chat_completion(h, "", std::nullopt, "tool_calls", {5, 6}, nullptr, calls);
  const auto& m = j["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][0]["id"], "call_a_0");
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city": "東京"})");
  EXPECT_EQ(m["tool_calls"][1]["id"], "functions.search:1");
  // Text beside the calls stays content; no calls, no tool_calls key.
  EXPECT_EQ(chat_completion(h, "Let me see.", std::nullopt, "tool_calls", {}, nullptr, calls)["choices"][0]["message"]
                ["content"], "Let me see.");
  EXPECT_FALSE(chat_completion(h, "", std::nullopt, "stop", {}, nullptr)["choices"][0]["message"].contains("tool_calls"));

  const auto d = tool_call_deltas(calls[1]);
  ASSERT_EQ(d.size(), 2u);
  const auto& first = d[0]["tool_calls"][0];
  EXPECT_EQ(first["index"], 1);
  EXPECT_EQ(first["id"], "functions.search:1");
  EXPECT_EQ(first["type"], "function");
  EXPECT_EQ(first["function"]["name"], "search");
  EXPECT_EQ(first["function"]["arguments"], "");
  const auto& second = d[1]["tool_calls"][0];
  EXPECT_EQ(second["index"], 1);
  EXPECT_FALSE(second.contains("id"));
  EXPECT_EQ(second["function"]["arguments"], "{}");
}

TEST(OpenAiResponse, ChunksAndSse) {
  ResponseHead h{"chatcmpl-2", "tiny", 1};
  auto c = chat_chunk(h, {{"content", "a"}}, nullptr, nullptr);
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  auto u = chat_usage_chunk(h, {3, 4});
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["completion_tokens"], 4);
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(chat_usage_chunk(h, {30, 4, 16})["usage"]["prompt_tokens_details"]["cached_tokens"], 16);
  EXPECT_EQ(text_usage_chunk(h, {30, 4, 16})["usage"]["prompt_tokens_details"]["cached_tokens"], 16);
  EXPECT_EQ(text_completion(h, "x", "stop", {30, 4, 16}, nullptr, 0)["usage"]["prompt_tokens_details"]["cached_tokens"], 16);
  std::string e = sse_event(c);
  EXPECT_EQ(e.rfind("data: {", 0), 0u);
  EXPECT_EQ(e.substr(e.size() - 2), "\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
}

TEST(OpenAiResponse, PartialUtf8TokensStaySerialisable) {
  ResponseHead h{"cmpl-3", "tiny", 1};
  std::vector<TokenLogprob> lps = {{"\xe4\xbd", "\xe4\xbd", -0.1f, {}, {}}, {"\xa0", "\xa0", -0.2f, {}, {}}};
  auto j = text_completion(h, "\xe4\xbd\xa0", "length", {1, 2}, &lps, 5);
  std::string dumped = j.dump();  // must not throw
  EXPECT_EQ(j["choices"][0]["logprobs"]["text_offset"], nlohmann::json::array({5, 7}));
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"][0], "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(OpenAiResponse, IdsAreUniqueAndPrefixed) {
  auto a = make_response_id("chatcmpl-"), b = make_response_id("chatcmpl-");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("chatcmpl-", 0), 0u);
}

}  // namespace
}  // namespace hymoe::server
