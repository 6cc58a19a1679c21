// response_format json_object and json_schema (issue 45) against the real hymoe-server on the tiny
// checkpoint, through the openai npm SDK: random weights write no JSON by themselves, so every
// answer that ends on its own parsing as one object (conforming to the schema) is the
// constraint's doing. Both endpoints, streamed and not, greedy and sampled; the SDK's
// chat.completions.parse for json_schema; max_tokens cuts with finish_reason "length"; bad
// response_format values, schemas outside the subset and conflicting options are 400s naming the
// parameter.
// Environment (set by ctest): HYMOE_SERVER, HYMOE_MAKE_MODEL, HYMOE_TOKENIZER_DIR, HYMOE_JS_DIR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { env, tinyServer } from './harness.mjs';

const OpenAI = createRequire(join(env('HYMOE_JS_DIR'), 'x.js'))('openai').OpenAI;

const server = tinyServer('hymoe-json-', ['--served-model-name', 'tiny', '--max-running', '4']);

const client = () => new OpenAI({ apiKey: 'none', baseURL: server.base() + '/v1', maxRetries: 0 });
const post = server.post;
const ask = [{ role: 'user', content: 'Describe a cat as a JSON object.' }];
const json_object = { type: 'json_object' };

// The ids of '"' and '}': a bias towards them makes the random model close its strings and
// objects within a few dozen tokens (added after the mask: it cannot bring back a refused token).
async function closingBias() {
  const bias = {};
  for (const text of ['"', '}']) {
    const ids = (await (await post('/tokenize', { prompt: text, add_special_tokens: false })).json()).tokens;
    assert.equal(ids.length, 1, `'${text}' is one token`);
    bias[ids[0]] = 6;
  }
  return bias;
}

// An answer that stopped on its own is one JSON object; one cut by max_tokens is not whole.
function checkJson(text, finish, what) {
  assert.ok(finish === 'stop' || finish === 'length', `${what}: finish_reason ${finish}`);
  if (finish === 'stop') {
    let v;
    assert.doesNotThrow(() => { v = JSON.parse(text); }, `${what}: ${JSON.stringify(text)}`);
    assert.equal(typeof v, 'object', what);
    assert.ok(v !== null && !Array.isArray(v), `${what}: ${text}`);
  } else {
    assert.match(text, /^\s*\{/, `${what}: starts an object: ${JSON.stringify(text)}`);
  }
}

test('chat and completions answers parse as JSON objects, streamed and not, at any temperature', async () => {
  const logit_bias = await closingBias();
  let stopped = 0;
  for (const temperature of [0, 0.7, 1.3]) {
    for (const seed of [1, 2]) {
      const what = `temperature ${temperature} seed ${seed}`;
      const chat = await client().chat.completions.create({
        model: 'tiny', messages: ask, response_format: json_object, max_tokens: 48, temperature, seed, logit_bias });
      checkJson(chat.choices[0].message.content, chat.choices[0].finish_reason, `chat ${what}`);
      if (chat.choices[0].finish_reason === 'stop') ++stopped;

      const stream = await client().chat.completions.create({
        model: 'tiny', messages: ask, response_format: json_object, max_tokens: 48, temperature, seed, logit_bias,
        stream: true });
      let content = '';
      let finish = null;
      for await (const ch of stream) {
        content += ch.choices[0]?.delta?.content ?? '';
        finish = ch.choices[0]?.finish_reason ?? finish;
      }
      checkJson(content, finish, `streamed chat ${what}`);
      // The same request streamed and not: the same answer.
      assert.equal(content, chat.choices[0].message.content, `streamed = non-streamed, ${what}`);

      const text = await client().completions.create({
        model: 'tiny', prompt: 'A JSON object:', response_format: json_object, max_tokens: 48, temperature, seed,
        logit_bias });
      checkJson(text.choices[0].text, text.choices[0].finish_reason, `completion ${what}`);
      if (text.choices[0].finish_reason === 'stop') ++stopped;
    }
  }
  assert.ok(stopped >= 3, `most answers end as whole objects (${stopped} of 12 did)`);
});

test('max_tokens cuts a JSON answer with finish_reason length; logprobs stay finite', async () => {
  const r = await client().chat.completions.create({
    model: 'tiny', messages: ask, response_format: json_object, max_tokens: 4, temperature: 1, seed: 9,
    logprobs: true, top_logprobs: 3 });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 4);
  checkJson(c.message.content, 'length', 'max_tokens 4');
  assert.equal(c.logprobs.content.length, 4);
  for (const lp of c.logprobs.content) {
    assert.ok(Number.isFinite(lp.logprob) && lp.logprob <= 0, JSON.stringify(lp));
    for (const alt of lp.top_logprobs) assert.ok(Number.isFinite(alt.logprob), JSON.stringify(alt));
  }
});

// A weather report: required and optional properties, an enum, a nullable number, a bounded array
// of objects, an integer.
const weatherSchema = {
  type: 'object',
  properties: {
    city: { type: 'string' },
    unit: { enum: ['celsius', 'fahrenheit'] },
    temperature: { type: ['number', 'null'] },
    note: { type: 'string' },
    days: {
      type: 'array', maxItems: 2,
      items: { type: 'object', properties: { day: { type: 'integer' }, rain: { type: 'boolean' } },
               required: ['day', 'rain'], additionalProperties: false },
    },
  },
  required: ['city', 'unit', 'temperature', 'days'],
  additionalProperties: false,
};
const weather = { type: 'json_schema', json_schema: { name: 'weather', schema: weatherSchema, strict: true } };

// What weatherSchema allows, checked by hand (keys in the schema's order, as the server writes them).
function checkWeather(v, what) {
  assert.equal(typeof v, 'object', what);
  const keys = Object.keys(v);
  const order = Object.keys(weatherSchema.properties);
  assert.deepEqual(keys, order.filter((k) => keys.includes(k)), `${what}: key order ${keys}`);
  for (const k of weatherSchema.required) assert.ok(k in v, `${what}: ${k} missing`);
  assert.equal(typeof v.city, 'string', what);
  assert.ok(['celsius', 'fahrenheit'].includes(v.unit), what);
  assert.ok(v.temperature === null || typeof v.temperature === 'number', what);
  if ('note' in v) assert.equal(typeof v.note, 'string', what);
  assert.ok(Array.isArray(v.days) && v.days.length <= 2, what);
  for (const d of v.days) {
    assert.deepEqual(Object.keys(d), ['day', 'rain'], what);
    assert.ok(Number.isInteger(d.day) && typeof d.rain === 'boolean', what);
  }
}

// The ids of the bytes that end strings, values and containers: a bias towards them makes the
// random model finish within a few dozen tokens.
async function finishingBias() {
  const bias = {};
  for (const text of ['"', '}', ']', ',', '0']) {
    const ids = (await (await post('/tokenize', { prompt: text, add_special_tokens: false })).json()).tokens;
    assert.equal(ids.length, 1, `'${text}' is one token`);
    bias[ids[0]] = 5;
  }
  return bias;
}

test('json_schema answers conform to the schema: chat (SDK parse) and completions, streamed and not', async () => {
  const logit_bias = await finishingBias();
  let stopped = 0;
  for (const temperature of [0, 0.8, 1.5]) {
    for (const seed of [3, 4]) {
      const what = `temperature ${temperature} seed ${seed}`;
      const params = { model: 'tiny', messages: ask, response_format: weather, max_tokens: 96, temperature, seed,
                       logit_bias };
      let content = null;
      try {
        // The SDK parses content for json_schema, and throws on finish_reason length.
        const parsed = await client().chat.completions.parse(params);
        const c = parsed.choices[0];
        assert.equal(c.finish_reason, 'stop', what);
        checkWeather(c.message.parsed, `chat ${what}`);
        content = c.message.content;
        ++stopped;
      } catch (e) {
        assert.equal(e.constructor.name, 'LengthFinishReasonError', `${what}: ${e}`);
      }
      const stream = await client().chat.completions.create({ ...params, stream: true });
      let streamed = '';
      let finish = null;
      for await (const ch of stream) {
        streamed += ch.choices[0]?.delta?.content ?? '';
        finish = ch.choices[0]?.finish_reason ?? finish;
      }
      if (content !== null) {
        assert.equal(finish, 'stop', what);
        assert.equal(streamed, content, `streamed = non-streamed, ${what}`);
      } else {
        assert.equal(finish, 'length', what);
      }

      const text = await client().completions.create({
        model: 'tiny', prompt: 'Weather as JSON:', response_format: weather, max_tokens: 96, temperature, seed,
        logit_bias });
      const tc = text.choices[0];
      if (tc.finish_reason === 'stop') {
        checkWeather(JSON.parse(tc.text), `completion ${what}`);
        ++stopped;
      } else {
        assert.equal(tc.finish_reason, 'length', what);
        assert.match(tc.text, /^\s*\{/, `completion ${what}: ${tc.text}`);
      }
    }
  }
  assert.ok(stopped >= 3, `most answers end as whole objects (${stopped} of 12 did)`);
});

test('json_schema outside the supported subset: 400 naming the keyword and its path', async () => {
  const cases = [
    [{ type: 'object', properties: { a: { type: 'string', pattern: '^x' } } }, /'pattern' at '\/properties\/a'/, 'unsupported'],
    [{ type: 'object', properties: { n: { type: 'integer', minimum: 1 } } }, /'minimum'/, 'unsupported'],
    [{ type: 'array' }, /root schema must be an object/, 'unsupported'],
    [{ type: 'object', properties: { a: { type: 'strng' } } }, /unknown type 'strng'/, null],
  ];
  for (const [schema, message, code] of cases) {
    for (const [path, body] of [['/v1/chat/completions', { messages: ask }], ['/v1/completions', { prompt: 'Hi' }]]) {
      const r = await post(path, { model: 'tiny', max_tokens: 2, ...body,
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema, strict: true } } });
      const j = await r.json();
      assert.equal(r.status, 400, JSON.stringify(j));
      assert.equal(j.error.param, 'response_format.json_schema.schema', JSON.stringify(j));
      assert.match(j.error.message, message);
      assert.equal(j.error.code, code, JSON.stringify(j));
    }
  }
});

test('bad response_format values and conflicting options get a 400 naming the parameter', async () => {
  const schema = { type: 'json_schema', json_schema: { name: 'cat', schema: { type: 'object' }, strict: true } };
  const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }];
  const cases = [
    ['/v1/chat/completions', { messages: ask, response_format: 'json_object' }, 'response_format'],
    ['/v1/chat/completions', { messages: ask, response_format: { type: 'xml' } }, 'response_format.type'],
    ['/v1/chat/completions', { messages: ask, response_format: {} }, 'response_format.type'],
    ['/v1/chat/completions', { messages: ask, response_format: { type: 'json_schema' } },
     'response_format.json_schema'],
    ['/v1/chat/completions', { messages: ask, response_format: { type: 'json_schema', json_schema: { schema: {} } } },
     'response_format.json_schema.name'],
    ['/v1/chat/completions', { messages: ask, response_format: schema, tools }, 'response_format'],
    ['/v1/chat/completions', { messages: ask, response_format: json_object, tools }, 'response_format'],
    ['/v1/chat/completions', { messages: ask, response_format: json_object, ignore_eos: true }, 'ignore_eos'],
    ['/v1/completions', { prompt: 'Hi', response_format: { type: 'json' } }, 'response_format.type'],
    ['/v1/completions', { prompt: 'Hi', response_format: schema, ignore_eos: true }, 'ignore_eos'],
  ];
  for (const [path, body, param] of cases) {
    const r = await post(path, { model: 'tiny', max_tokens: 2, ...body });
    const j = await r.json();
    assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}: ${JSON.stringify(j)}`);
    assert.equal(j.error.type, 'invalid_request_error');
    assert.equal(j.error.param, param, JSON.stringify(j));
  }
  // Tools the model may not call, and type text, are fine.
  for (const extra of [{ tools, tool_choice: 'none', response_format: json_object }, { response_format: { type: 'text' } },
                       { tools, tool_choice: 'none', response_format: schema }]) {
    const ok = await post('/v1/chat/completions', { model: 'tiny', messages: ask, max_tokens: 2, ...extra });
    assert.equal(ok.status, 200, JSON.stringify(extra));
  }
});
