#include "hymoe/server/openai_request.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>

namespace hymoe::server {
namespace {

// Expects parsing to fail with status 400 naming `param`.
template <typename F>
void expect_param_error(F&& parse, const std::string& body, const std::string& param) {
  try {
    parse(body);
    ADD_FAILURE() << "accepted: " << body;
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().status, 400) << body;
    ASSERT_TRUE(e.error().param.has_value()) << body;
    EXPECT_EQ(*e.error().param, param) << body << " -> " << e.error().message;
  }
}

auto chat = [](const std::string& b) { return parse_chat_request(b); };
auto completion = [](const std::string& b) { return parse_completion_request(b); };

TEST(ChatRequest, ParsesFullRequest) {
  auto r = parse_chat_request(R"({
    "model": "tiny", "messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}],
    "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 11,
    "max_completion_tokens": 33, "max_tokens": 5, "stop": ["\n\n", "END"], "stream": true,
    "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 3})");
  EXPECT_EQ(r.model, "tiny");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "hi there");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_DOUBLE_EQ(r.sampling.temperature, 0.7);
  EXPECT_DOUBLE_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_DOUBLE_EQ(r.sampling.min_p, 0.05);
  EXPECT_EQ(r.sampling.seed, 11u);
  EXPECT_EQ(r.sampling.max_tokens, 33);
  EXPECT_EQ(r.sampling.stop.size(), 2u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 3);
}

TEST(ChatRequest, RejectsBadInputNamingTheField) {
  expect_param_error(chat, "{not json", "body");
  expect_param_error(chat, "[1,2]", "body");
  expect_param_error(chat, "\xff\xfe", "body");
  expect_param_error(chat, R"({"messages":[{"role":"user","content":"x"}]})", "model");
  expect_param_error(chat, R"({"model":"m"})", "messages");
  expect_param_error(chat, R"({"model":"m","messages":"hi"})", "messages");
  expect_param_error(chat, R"({"model":"m","messages":[]})", "messages");
  expect_param_error(chat, R"({"model":"m","messages":[{"role":"robot","content":"x"}]})", "messages[0].role");
  expect_param_error(chat, R"({"model":"m","messages":[{"role":"user"}]})", "messages[0].content");
  expect_param_error(chat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
                     "messages[0].content");
  const std::string ok = R"("model":"m","messages":[{"role":"user","content":"x"}])";
  expect_param_error(chat, "{" + ok + R"(,"temperature":"hot"})", "temperature");
  expect_param_error(chat, "{" + ok + R"(,"temperature":2.5})", "temperature");
  expect_param_error(chat, "{" + ok + R"(,"top_p":0})", "top_p");
  expect_param_error(chat, "{" + ok + R"(,"top_k":1.5})", "top_k");
  expect_param_error(chat, "{" + ok + R"(,"max_tokens":0})", "max_tokens");
  expect_param_error(chat, "{" + ok + R"(,"max_tokens":-3})", "max_tokens");
  expect_param_error(chat, "{" + ok + R"(,"max_completion_tokens":"9"})", "max_completion_tokens");
  expect_param_error(chat, "{" + ok + R"(,"stop":[1]})", "stop");
  expect_param_error(chat, "{" + ok + R"(,"stop":["a","b","c","d","e"]})", "stop");
  expect_param_error(chat, "{" + ok + R"(,"n":0})", "n");
  expect_param_error(chat, "{" + ok + R"(,"n":129})", "n");
  expect_param_error(chat, "{" + ok + R"(,"n":1.5})", "n");
  expect_param_error(chat, "{" + ok + R"(,"stream":"yes"})", "stream");
  expect_param_error(chat, "{" + ok + R"(,"stream_options":{"include_usage":true}})", "stream_options");
  expect_param_error(chat, "{" + ok + R"(,"top_logprobs":2})", "top_logprobs");
  expect_param_error(chat, "{" + ok + R"(,"logprobs":true,"top_logprobs":21})", "top_logprobs");
}

TEST(ChatRequest, DefaultsAndNulls) {
  auto r = parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":null,"top_k":-1})");
  EXPECT_DOUBLE_EQ(r.sampling.temperature, 1.0);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.sampling.max_tokens, 0);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.sampling.seed.has_value());
}

TEST(CompletionRequest, PromptForms) {
  auto a = parse_completion_request(R"({"model":"m","prompt":"Hello"})");
  EXPECT_EQ(a.prompt, "Hello");
  EXPECT_EQ(a.sampling.max_tokens, 16);
  auto b = parse_completion_request(R"({"model":"m","prompt":[5,6,7],"max_tokens":3,"logprobs":2})");
  EXPECT_TRUE(b.prompt_is_tokens);
  EXPECT_EQ(b.prompt_ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(b.sampling.max_tokens, 3);
  EXPECT_TRUE(b.sampling.logprobs);
  EXPECT_EQ(b.sampling.top_logprobs, 2);
  auto c = parse_completion_request(R"({"model":"m","prompt":["one"]})");
  EXPECT_EQ(c.prompt, "one");
  expect_param_error(completion, R"({"model":"m"})", "prompt");
  expect_param_error(completion, R"({"model":"m","prompt":""})", "prompt");
  expect_param_error(completion, R"({"model":"m","prompt":["a","b"]})", "prompt");
  expect_param_error(completion, R"({"model":"m","prompt":[1,-2]})", "prompt");
  expect_param_error(completion, R"({"model":"m","prompt":{"t":1}})", "prompt");
  expect_param_error(completion, R"({"model":"m","prompt":"x","suffix":"y"})", "suffix");
}

TEST(LogitBias, ParsesSortedAndNullOrEmptyIsNone) {
  const std::string ok = R"("model":"m","messages":[{"role":"user","content":"x"}])";
  auto r = parse_chat_request("{" + ok + R"(,"logit_bias":{"50":-100,"7":2.5,"0":100,"0012":0}})");
  EXPECT_EQ(r.sampling.logit_bias,
            (std::vector<std::pair<int32_t, float>>{{0, 100.0f}, {7, 2.5f}, {12, 0.0f}, {50, -100.0f}}));
  EXPECT_TRUE(parse_chat_request("{" + ok + R"(,"logit_bias":null})").sampling.logit_bias.empty());
  EXPECT_TRUE(parse_chat_request("{" + ok + R"(,"logit_bias":{}})").sampling.logit_bias.empty());
  EXPECT_TRUE(parse_chat_request("{" + ok + "}").sampling.logit_bias.empty());
  auto c = parse_completion_request(R"({"model":"m","prompt":"x","logit_bias":{"2147483647":-1}})");
  EXPECT_EQ(c.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{2147483647, -1.0f}}));
}

TEST(LogitBias, RejectsEveryBadFormNamingTheParameter) {
  const std::string bad[] = {
      // not an object
      R"([1,2])", R"("5:10")", R"(7)", R"(true)",
      // keys that are not decimal token ids
      R"({"abc":1})", R"({"":1})", R"({"-1":1})", R"({"+1":1})", R"({"1.0":1})", R"({" 1":1})",
      R"({"1e3":1})", R"({"2147483648":1})", R"({"99999999999":1})",
      // values that are not numbers or lie outside [-100, 100]
      R"({"1":"5"})", R"({"1":null})", R"({"1":true})", R"({"1":[1]})", R"({"1":{}})",
      R"({"1":100.5})", R"({"1":-100.001})", R"({"1":101})", R"({"1":1e300})",
      // one id twice
      R"({"5":1,"05":2})",
  };
  for (const auto& b : bad) {
    expect_param_error(chat, R"({"model":"m","messages":[{"role":"user","content":"x"}],"logit_bias":)" + b + "}",
                       "logit_bias");
    expect_param_error(completion, R"({"model":"m","prompt":"x","logit_bias":)" + b + "}", "logit_bias");
  }
}

TEST(LogitBias, AtMost300EntriesAndTheBoundsThemselves) {
  auto body = [](int entries, const char* value) {
    std::string b = R"({"model":"m","prompt":"x","logit_bias":{)";
    for (int i = 0; i < entries; ++i) b += (i ? ",\"" : "\"") + std::to_string(i) + "\":" + value;
    return b + "}}";
  };
  const auto r = parse_completion_request(body(300, "-100"));
  ASSERT_EQ(r.sampling.logit_bias.size(), 300u);
  EXPECT_EQ(r.sampling.logit_bias.front(), (std::pair<int32_t, float>{0, -100.0f}));
  EXPECT_EQ(r.sampling.logit_bias.back(), (std::pair<int32_t, float>{299, -100.0f}));
  EXPECT_EQ(parse_completion_request(body(1, "100")).sampling.logit_bias[0].second, 100.0f);
  expect_param_error(completion, body(301, "1"), "logit_bias");
  try {
    parse_completion_request(body(301, "1"));
  } catch (const ApiException& e) {
    EXPECT_NE(e.error().message.find("300"), std::string::npos) << e.error().message;
    EXPECT_NE(e.error().message.find("OpenAI"), std::string::npos) << e.error().message;
  }
  RequestLimits small;
  small.max_logit_bias = 2;
  EXPECT_THROW(parse_completion_request(body(3, "1"), small), ApiException);
}

TEST(LogitBias, VocabularyRangeIsCheckedAgainstTheModel) {
  SamplingParams s;
  s.logit_bias = {{0, 1.0f}, {999, -1.0f}};
  EXPECT_NO_THROW(check_logit_bias_vocab(s, 1000));
  EXPECT_NO_THROW(check_logit_bias_vocab(SamplingParams{}, 1000));
  try {
    check_logit_bias_vocab(s, 999);
    ADD_FAILURE() << "accepted id 999 in a vocabulary of 999";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().status, 400);
    EXPECT_EQ(e.error().param, std::optional<std::string>("logit_bias"));
    EXPECT_NE(e.error().message.find("999"), std::string::npos) << e.error().message;
  }
}

TEST(ChatRequest, ToolsToolChoiceAndToolMessages) {
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d",
         "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
        {"type":"function","function":{"name":"search"}}])";
  const std::string user = R"("messages":[{"role":"user","content":"hi"}])";
  auto body = [&](const std::string& extra) { return R"({"model":"m",)" + user + "," + tools + extra + "}"; };
  auto r = parse_chat_request(body(""));
  EXPECT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kAuto);
  EXPECT_TRUE(r.parallel_tool_calls);
  r = parse_chat_request(body(R"(,"tool_choice":"required","parallel_tool_calls":false)"));
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kRequired);
  EXPECT_FALSE(r.parallel_tool_calls);
  r = parse_chat_request(body(R"(,"tool_choice":{"type":"function","function":{"name":"search"}})"));
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kFunction);
  EXPECT_EQ(r.tool_choice.function, "search");
  EXPECT_EQ(parse_chat_request(body(R"(,"tool_choice":"none")")).tool_choice.mode, ToolChoice::Mode::kNone);
  // Forced calls carry their functions' compiled parameters (null: any object).
  EXPECT_TRUE(parse_chat_request(body("")).tool_choice.forced.empty());
  ASSERT_EQ(r.tool_choice.forced.size(), 1u);
  EXPECT_EQ(r.tool_choice.forced[0].name, "search");
  EXPECT_EQ(r.tool_choice.forced[0].parameters, nullptr);
  r = parse_chat_request(body(R"(,"tool_choice":"required")"));
  ASSERT_EQ(r.tool_choice.forced.size(), 2u);
  EXPECT_EQ(r.tool_choice.forced[0].name, "get_weather");
  EXPECT_NE(r.tool_choice.forced[0].parameters, nullptr);
  // Parameters outside the supported subset: any object, unless the function is strict (a 400).
  const std::string odd = R"({"model":"m",)" + user + R"(,"tool_choice":"required","tools":[{"type":"function",
      "function":{"name":"f","parameters":{"type":"object","properties":{"s":{"type":"string","pattern":"^a"}}})";
  r = parse_chat_request(odd + "}}]}");
  ASSERT_EQ(r.tool_choice.forced.size(), 1u);
  EXPECT_EQ(r.tool_choice.forced[0].parameters, nullptr);
  expect_param_error(chat, odd + R"(,"strict":true}}]})", "tools[0].function.parameters");
  // No tools: none by default, and none is the only choice.
  const std::string plain = R"({"model":"m",)" + user;
  EXPECT_EQ(parse_chat_request(plain + "}").tool_choice.mode, ToolChoice::Mode::kNone);
  EXPECT_NO_THROW(parse_chat_request(plain + R"(,"tool_choice":"none"})"));
  expect_param_error(chat, plain + R"(,"tool_choice":"auto"})", "tool_choice");

  expect_param_error(chat, body(R"(,"tool_choice":"always")"), "tool_choice");
  expect_param_error(chat, body(R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})"), "tool_choice");
  expect_param_error(chat, body(R"(,"tool_choice":{"type":"function"})"), "tool_choice");
  expect_param_error(chat, body(R"(,"tool_choice":3)"), "tool_choice");
  expect_param_error(chat, body(R"(,"parallel_tool_calls":"yes")"), "parallel_tool_calls");
  auto with_tools = [&](const std::string& t) { return R"({"model":"m",)" + user + R"(,"tools":)" + t + "}"; };
  expect_param_error(chat, with_tools("{}"), "tools");
  expect_param_error(chat, with_tools("[]"), "tools");
  expect_param_error(chat, with_tools("[1]"), "tools[0]");
  expect_param_error(chat, with_tools(R"([{"type":"code","function":{"name":"f"}}])"), "tools[0].type");
  expect_param_error(chat, with_tools(R"([{"type":"function"}])"), "tools[0].function");
  expect_param_error(chat, with_tools(R"([{"type":"function","function":{"name":"a b"}}])"), "tools[0].function.name");
  expect_param_error(chat, with_tools(R"([{"type":"function","function":{"name":"f","parameters":[]}}])"),
                     "tools[0].function.parameters");
  expect_param_error(chat, with_tools(R"([{"type":"function","function":{"name":"f","description":1}}])"),
                     "tools[0].function.description");
  expect_param_error(chat, with_tools(R"([{"type":"function","function":{"name":"f"}},
                                          {"type":"function","function":{"name":"f"}}])"),
                     "tools[1].function.name");
}

TEST(ChatRequest, AssistantToolCallsAreNormalisedForTheTemplates) {
  auto r = parse_chat_request(R"({"model":"m","messages":[
      {"role":"user","content":"weather?"},
      {"role":"assistant","content":"","tool_calls":[
        {"id":"a","function":{"name":"f","arguments":{"city":"東京","n":[1,2]}}},
        {"id":"b","type":"function","function":{"name":"g","arguments":"{\"x\": 1}"}}]},
      {"role":"tool","tool_call_id":"a","content":"sunny"},
      {"role":"assistant","content":"done","tool_calls":[]},
      {"role":"assistant","content":"ok","tool_calls":null}]})");
  const auto& m = r.messages;
  EXPECT_TRUE(m[1]["content"].is_null());  // "" beside tool calls: the templates test `is none`
  EXPECT_EQ(m[1]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], R"({"city":"東京","n":[1,2]})");
  EXPECT_EQ(m[1]["tool_calls"][1]["function"]["arguments"], R"({"x": 1})");
  EXPECT_EQ(m[2]["tool_call_id"], "a");
  EXPECT_FALSE(m[3].contains("tool_calls"));
  EXPECT_FALSE(m[4].contains("tool_calls"));

  auto msgs = [](const std::string& msg) { return R"({"model":"m","messages":[{"role":"user","content":"q"},)" + msg + "]}"; };
  expect_param_error(chat, msgs(R"({"role":"tool","content":"x"})"), "messages[1].tool_call_id");
  expect_param_error(chat, msgs(R"({"role":"tool","tool_call_id":7,"content":"x"})"), "messages[1].tool_call_id");
  expect_param_error(chat, msgs(R"({"role":"assistant","tool_calls":{}})"), "messages[1].tool_calls");
  expect_param_error(chat, msgs(R"({"role":"user","content":"x","tool_calls":[{"id":"a"}]})"), "messages[1].tool_calls");
  expect_param_error(chat, msgs(R"({"role":"assistant","tool_calls":[3]})"), "messages[1].tool_calls[0]");
  expect_param_error(chat, msgs(R"({"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]})"),
                     "messages[1].tool_calls[0].id");
  expect_param_error(chat, msgs(R"({"role":"assistant","tool_calls":[{"id":"a","type":"x","function":{"name":"f","arguments":"{}"}}]})"),
                     "messages[1].tool_calls[0].type");
  expect_param_error(chat, msgs(R"({"role":"assistant","tool_calls":[{"id":"a","function":{"arguments":"{}"}}]})"),
                     "messages[1].tool_calls[0].function.name");
  expect_param_error(chat, msgs(R"({"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":[1]}}]})"),
                     "messages[1].tool_calls[0].function.arguments");
  expect_param_error(chat, msgs(R"({"role":"assistant","tool_calls":[]})"), "messages[1].content");
}

// `levels` arrays nested inside `field` of an otherwise valid chat body, e.g. [[[1]]] for 3.
std::string nested_field(const std::string& field, int levels, bool before_messages) {
  const std::string deep = std::string(static_cast<size_t>(levels), '[') + "1" + std::string(static_cast<size_t>(levels), ']');
  const std::string messages = R"("messages":[{"role":"user","content":"x"}])";
  return before_messages ? R"({"model":"m",")" + field + "\":" + deep + "," + messages + "}"
                         : R"({"model":"m",)" + messages + ",\"" + field + "\":" + deep + "}";
}

// The code of the 400 a body gets (empty when it has none); fails the test when it parses.
template <typename F>
std::string error_code(F&& parse, const std::string& body) {
  try {
    parse(body);
    ADD_FAILURE() << "accepted: " << body;
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().status, 400) << body;
    return e.error().code.value_or("");
  }
  return {};
}

TEST(ResponseFormat, TextAndJsonObjectOnBothEndpoints) {
  const std::string c = R"("model":"m","messages":[{"role":"user","content":"x"}])";
  const std::string p = R"("model":"m","prompt":"x")";
  EXPECT_EQ(parse_chat_request("{" + c + "}").response_format.type, ResponseFormat::Type::kText);
  EXPECT_EQ(parse_chat_request("{" + c + R"(,"response_format":null})").response_format.type, ResponseFormat::Type::kText);
  EXPECT_EQ(parse_chat_request("{" + c + R"(,"response_format":{"type":"text"}})").response_format.type,
            ResponseFormat::Type::kText);
  EXPECT_EQ(parse_chat_request("{" + c + R"(,"response_format":{"type":"json_object"}})").response_format.type,
            ResponseFormat::Type::kJsonObject);
  EXPECT_EQ(parse_completion_request("{" + p + R"(,"response_format":{"type":"json_object"}})").response_format.type,
            ResponseFormat::Type::kJsonObject);
  EXPECT_EQ(parse_completion_request("{" + p + "}").response_format.type, ResponseFormat::Type::kText);
  // Tools the model may not call do not conflict.
  const std::string tools = R"(,"tools":[{"type":"function","function":{"name":"f"}}])";
  EXPECT_EQ(parse_chat_request("{" + c + tools + R"(,"tool_choice":"none","response_format":{"type":"json_object"}})")
                .response_format.type,
            ResponseFormat::Type::kJsonObject);
  // Sampling options it leaves alone.
  auto r = parse_chat_request("{" + c + R"(,"response_format":{"type":"json_object"},"temperature":1.3,"top_p":0.8,)"
                              R"("logprobs":true,"top_logprobs":2,"stream":true,"max_tokens":7})");
  EXPECT_DOUBLE_EQ(r.sampling.temperature, 1.3);
  EXPECT_EQ(r.sampling.top_logprobs, 2);
  EXPECT_EQ(r.sampling.max_tokens, 7);
  EXPECT_FALSE(r.sampling.constraint);  // the routes attach it, knowing the model
}

TEST(ChatRequest, NChoicesOnBothEndpoints) {
  const std::string c = R"({"model":"m","messages":[{"role":"user","content":"x"}])";
  const std::string p = R"({"model":"m","prompt":"x")";
  EXPECT_EQ(parse_chat_request(c + "}").n, 1);
  EXPECT_EQ(parse_chat_request(c + R"(,"n":null})").n, 1);
  EXPECT_EQ(parse_chat_request(c + R"(,"n":3})").n, 3);
  EXPECT_EQ(parse_completion_request(p + R"(,"n":128})").n, 128);
  RequestLimits few;
  few.max_n = 4;
  expect_param_error([&](const std::string& b) { return parse_completion_request(b, few); }, p + R"(,"n":5})", "n");
}

TEST(ResponseFormat, JsonSchemaCompiledOnBothEndpoints) {
  const std::string c = R"("model":"m","messages":[{"role":"user","content":"x"}])";
  const std::string p = R"("model":"m","prompt":"x")";
  const std::string schema = R"(,"response_format":{"type":"json_schema","json_schema":{"name":"cat-1","strict":true,)"
                             R"("schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],)"
                             R"("additionalProperties":false}}}})";
  for (const auto& f : {parse_chat_request("{" + c + schema).response_format,
                        parse_completion_request("{" + p + schema).response_format}) {
    EXPECT_EQ(f.type, ResponseFormat::Type::kJsonSchema);
    EXPECT_EQ(f.schema_name, "cat-1");
    ASSERT_TRUE(f.schema);
    JsonSchemaMachine m(*f.schema);
    EXPECT_TRUE(m.feed(std::string_view(R"({"name":"Tom"})")));
    EXPECT_TRUE(m.complete());
  }
  // No schema: any JSON object, as json_object.
  const auto any = parse_chat_request("{" + c + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}})");
  EXPECT_EQ(any.response_format.type, ResponseFormat::Type::kJsonSchema);
  EXPECT_FALSE(any.response_format.schema);
  // Beside tools the model may call: refused, as json_object.
  const std::string tools = R"(,"tools":[{"type":"function","function":{"name":"f"}}])";
  expect_param_error(chat, "{" + c + tools + schema, "response_format");
}

TEST(ResponseFormat, RejectsBadFormsNamingTheField) {
  const std::string c = R"("model":"m","messages":[{"role":"user","content":"x"}])";
  const std::string p = R"("model":"m","prompt":"x")";
  for (const auto& [prefix, parse] : {std::pair<std::string, std::function<void(const std::string&)>>{c, chat},
                                      std::pair<std::string, std::function<void(const std::string&)>>{p, completion}}) {
    expect_param_error(parse, "{" + prefix + R"(,"response_format":"json_object"})", "response_format");
    expect_param_error(parse, "{" + prefix + R"(,"response_format":[]})", "response_format");
    expect_param_error(parse, "{" + prefix + R"(,"response_format":{}})", "response_format.type");
    expect_param_error(parse, "{" + prefix + R"(,"response_format":{"type":1}})", "response_format.type");
    expect_param_error(parse, "{" + prefix + R"(,"response_format":{"type":"json"}})", "response_format.type");
    expect_param_error(parse, "{" + prefix + R"(,"response_format":{"type":"json_schema"}})",
                       "response_format.json_schema");
    // json_schema: a name as OpenAI has it, strict a boolean, a schema in the supported subset.
    auto with = [&](const std::string& js) { return "{" + prefix + R"(,"response_format":{"type":"json_schema","json_schema":)" + js + "}}"; };
    expect_param_error(parse, with(R"({"schema":{"type":"object"}})"), "response_format.json_schema.name");
    expect_param_error(parse, with(R"({"name":"a b","schema":{"type":"object"}})"), "response_format.json_schema.name");
    expect_param_error(parse, with(R"({"name":"n","strict":"yes"})"), "response_format.json_schema.strict");
    expect_param_error(parse, with(R"({"name":"n","schema":[]})"), "response_format.json_schema.schema");
    const std::string pattern = with(R"({"name":"n","schema":{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}})");
    expect_param_error(parse, pattern, "response_format.json_schema.schema");
    EXPECT_EQ(error_code(parse, pattern), "unsupported");
    try {
      parse(pattern);
    } catch (const ApiException& e) {
      EXPECT_NE(e.error().message.find("'pattern' at '/properties/a'"), std::string::npos) << e.error().message;
    }
    const std::string bad_type = with(R"({"name":"n","schema":{"type":"object","properties":{"a":{"type":"strng"}}}})");
    expect_param_error(parse, bad_type, "response_format.json_schema.schema");
    EXPECT_EQ(error_code(parse, bad_type), "");
    expect_param_error(parse, "{" + prefix + R"(,"ignore_eos":true,"response_format":{"type":"json_schema","json_schema":{"name":"n"}}})",
                       "ignore_eos");
    // The output ends when the object does.
    expect_param_error(parse, "{" + prefix + R"(,"ignore_eos":true,"response_format":{"type":"json_object"}})",
                       "ignore_eos");
  }
  // A tool call is no JSON object text: tools the model may call conflict with JSON mode.
  const std::string tools = R"(,"tools":[{"type":"function","function":{"name":"f"}}])";
  for (const std::string choice : {"", R"(,"tool_choice":"auto")", R"(,"tool_choice":"required")",
                                   R"(,"tool_choice":{"type":"function","function":{"name":"f"}})"}) {
    expect_param_error(chat, "{" + c + tools + choice + R"(,"response_format":{"type":"json_object"}})",
                       "response_format");
  }
}

TEST(JsonDepth, CountsBracketsOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("1"), 0);
  EXPECT_EQ(json_nesting_depth("{}"), 1);
  EXPECT_EQ(json_nesting_depth(R"({"a":[{"b":[]}],"c":{}})"), 4);
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[{{{{","b":"\"[[[\\"})"), 1);  // brackets in strings, escapes
  EXPECT_EQ(json_nesting_depth("]]]][[]"), 2);                              // malformed: still bounded
  EXPECT_EQ(json_nesting_depth(std::string(100000, '['), 10), 11);          // stops past the limit
}

TEST(JsonDepth, DeepBodiesAreRefusedBeforeParsing) {
  // 100,000 levels overflowed the stack in the recursive copy of the parsed document (an
  // object member re-allocated behind a deep value, `tools`, `prompt`) before the limit existed.
  const RequestLimits limits;
  for (const bool before : {false, true}) {
    for (const std::string field : {"tools", "unknown_field"}) {
      try {
        parse_chat_request(nested_field(field, 100000, before), limits);
        ADD_FAILURE() << field << " accepted";
      } catch (const ApiException& e) {
        EXPECT_EQ(e.error().status, 400);
        EXPECT_EQ(e.error().code.value_or(""), "json_too_deep");
        EXPECT_NE(e.error().message.find(std::to_string(limits.max_json_depth)), std::string::npos);
      }
    }
  }
  const std::string deep_prompt = R"({"model":"m","prompt":)" + std::string(100000, '[') + "1" +
                                  std::string(100000, ']') + "}";
  expect_param_error(completion, deep_prompt, "body");
  // Just under the limit is parsed: the body is level 1, the (ignored) field adds its own levels.
  // (`tools` is checked as tools now, so the depth is probed through a field nobody reads.)
  const auto r = parse_chat_request(nested_field("metadata", limits.max_json_depth - 1, false), limits);
  EXPECT_EQ(r.model, "m");
  expect_param_error(chat, nested_field("tools", limits.max_json_depth, false), "body");
  // The limit is the caller's.
  RequestLimits tight;
  tight.max_json_depth = 4;
  EXPECT_NO_THROW(parse_chat_request(nested_field("metadata", 3, true), tight));  // 4 levels
  EXPECT_THROW(parse_chat_request(nested_field("metadata", 4, true), tight), ApiException);
}

TEST(Utf8, ReplacesInvalidBytes) {
  EXPECT_EQ(to_valid_utf8("plain"), "plain");
  EXPECT_EQ(to_valid_utf8("\xe4\xbd\xa0"), "\xe4\xbd\xa0");
  EXPECT_EQ(to_valid_utf8("/\xff"), "/\xef\xbf\xbd");
  EXPECT_EQ(to_valid_utf8("a\xe4\xbd"), "a\xef\xbf\xbd\xef\xbf\xbd");  // truncated: one U+FFFD a byte
  EXPECT_EQ(to_valid_utf8("\xed\xa0\x80!"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd!");
  for (const std::string s : {"\xff", "\xc0\xaf", "x\x80y", "\xf4\x90\x80\x80"}) {
    EXPECT_TRUE(is_valid_utf8(to_valid_utf8(s)));
  }
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80"));  // 你好 😀
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe4\xbd"));          // truncated
  EXPECT_FALSE(is_valid_utf8("a\x80"));             // stray continuation
}

}  // namespace
}  // namespace hymoe::server
