// SSE parsing on split and malformed input, and OpenAI chunk decoding.
#include <gtest/gtest.h>

#include <random>

#include "sse.h"

namespace hymoe::bench {
namespace {

std::vector<SseEvent> parse_in_pieces(const std::string& s, const std::vector<std::size_t>& cuts,
                                      bool* partial = nullptr) {
  SseParser p;
  std::vector<SseEvent> events;
  std::size_t prev = 0;
  auto feed = [&](std::size_t end) {
    p.feed(std::string_view(s).substr(prev, end - prev), [&](const SseEvent& e) {
      events.push_back(e);
      return true;
    });
    prev = end;
  };
  for (auto c : cuts) feed(c);
  feed(s.size());
  if (partial) *partial = p.has_partial();
  return events;
}

const std::string kStream =
    ": keep-alive comment\r\n"
    "data: {\"a\":1}\r\n\r\n"
    "event: note\n"
    "data:line one\n"
    "data: line two\n"
    "id: 7\n"
    "\n"
    "\n"  // a blank line with no data dispatches nothing
    "data: [DONE]\r\r"
    "data: {\"b\":2}\n\n";

void expect_stream_events(const std::vector<SseEvent>& e) {
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].data, "{\"a\":1}");
  EXPECT_EQ(e[1].event, "note");
  EXPECT_EQ(e[1].data, "line one\nline two");
  EXPECT_EQ(e[2].data, "[DONE]");
  EXPECT_EQ(e[2].event, "");
  EXPECT_EQ(e[3].data, "{\"b\":2}");
}

TEST(SseParser, WholeStream) {
  bool partial = true;
  expect_stream_events(parse_in_pieces(kStream, {}, &partial));
  EXPECT_FALSE(partial);
}

TEST(SseParser, SplitAtEveryByte) {
  for (std::size_t cut = 0; cut <= kStream.size(); ++cut)
    expect_stream_events(parse_in_pieces(kStream, {cut}));
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < kStream.size(); ++i) every.push_back(i);
  expect_stream_events(parse_in_pieces(kStream, every));
}

TEST(SseParser, RandomSplits) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::size_t> cuts;
    std::size_t at = 0;
    while (true) {
      at += std::uniform_int_distribution<std::size_t>(0, 9)(rng);
      if (at >= kStream.size()) break;
      cuts.push_back(at);
    }
    expect_stream_events(parse_in_pieces(kStream, cuts));
  }
}

TEST(SseParser, TruncatedStreamLeavesPartialState) {
  bool partial = false;
  auto e = parse_in_pieces("data: {\"a\":1}\n\ndata: {\"ch", {5}, &partial);
  EXPECT_EQ(e.size(), 1u);
  EXPECT_TRUE(partial);
  SseParser p;
  p.feed("data: 12345\ndata: 678", [](const SseEvent&) { return true; });
  EXPECT_EQ(p.pending_bytes(), 5u + 9u);  // "12345" held as data, "data: 678" as the line
  e = parse_in_pieces("data: {\"a\":1}\n\ndata: x\n", {}, &partial);  // line done, event not
  EXPECT_EQ(e.size(), 1u);
  EXPECT_TRUE(partial);
}

TEST(SseParser, StopsWhenTheHandlerSaysSo) {
  SseParser p;
  int n = 0;
  EXPECT_FALSE(p.feed("data: 1\n\ndata: 2\n\n", [&](const SseEvent&) { return ++n < 1; }));
  EXPECT_EQ(n, 1);
  EXPECT_EQ(p.bytes_seen(), 18u);
}

TEST(DecodeChunk, CompletionChatUsageDoneErrorsAndGarbage) {
  auto c = decode_openai_chunk(R"({"choices":[{"index":0,"text":" hi"}]})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kToken);
  EXPECT_EQ(c.text, " hi");
  c = decode_openai_chunk(R"({"choices":[{"delta":{"content":"yo"}}]})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kToken);
  EXPECT_EQ(c.text, "yo");
  c = decode_openai_chunk(R"({"choices":[{"delta":{"reasoning_content":"hmm","content":null}}]})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kToken);
  EXPECT_EQ(c.text, "hmm");
  c = decode_openai_chunk(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kEmpty);
  EXPECT_TRUE(c.has_choices);
  c = decode_openai_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kEmpty);
  EXPECT_EQ(*c.completion_tokens, 34);
  EXPECT_EQ(*c.prompt_tokens, 12);
  EXPECT_FALSE(c.has_choices);
  EXPECT_EQ(decode_openai_chunk("[DONE]").kind, StreamChunk::Kind::kDone);
  EXPECT_EQ(decode_openai_chunk("[DONE] \n").kind, StreamChunk::Kind::kDone);
  c = decode_openai_chunk(R"({"error":{"message":"overloaded","type":"x"}})");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kError);
  EXPECT_EQ(c.error, "server error in stream: overloaded");
  c = decode_openai_chunk("this is not json");
  EXPECT_EQ(c.kind, StreamChunk::Kind::kMalformed);
  EXPECT_NE(c.error.find("this is not json"), std::string::npos);
  EXPECT_EQ(decode_openai_chunk("{\"choices\":[{\"te").kind, StreamChunk::Kind::kMalformed);
  EXPECT_EQ(decode_openai_chunk(R"({"choices":"x"})").kind, StreamChunk::Kind::kMalformed);
  EXPECT_EQ(decode_openai_chunk("42").kind, StreamChunk::Kind::kMalformed);
}

}  // namespace
}  // namespace hymoe::bench
