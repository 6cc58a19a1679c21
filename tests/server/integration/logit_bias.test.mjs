// logit_bias (issue 45) against the real hymoe-server on the tiny checkpoint: -100 on the token
// greedy decoding picks first makes it pick another; +100 on a token makes the whole output that
// token, on both endpoints, streamed and not, at any temperature; bad logit_bias values are 400s
// naming the parameter. Token ids come from the server's own /tokenize and /detokenize.
// Environment (set by ctest): HYMOE_SERVER, HYMOE_MAKE_MODEL, HYMOE_TOKENIZER_DIR, HYMOE_JS_DIR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { env, tinyServer } from './harness.mjs';

const OpenAI = createRequire(join(env('HYMOE_JS_DIR'), 'x.js'))('openai').OpenAI;

const server = tinyServer('hymoe-bias-', ['--served-model-name', 'tiny', '--max-running', '4']);

const client = () => new OpenAI({ apiKey: 'none', baseURL: server.base() + '/v1', maxRetries: 0 });
const post = server.post;
const tokenize = async (text) =>
  (await (await post('/tokenize', { prompt: text, add_special_tokens: false })).json()).tokens;
const detokenize = async (ids) => (await (await post('/detokenize', { tokens: ids })).json()).prompt;
const ask = [{ role: 'user', content: 'Write a haiku about memory bandwidth.' }];

// The first token of a greedy chat answer, as bytes (logprobs) and as an id: the id is the
// server's tokenisation of those bytes, checked to be one token that decodes back to them.
async function firstGreedyToken(extra = {}) {
  const r = await client().chat.completions.create({ model: 'tiny', messages: ask, max_tokens: 1, temperature: 0,
                                                     logprobs: true, top_logprobs: 2, ...extra });
  const lp = r.choices[0].logprobs.content[0];
  return { text: Buffer.from(lp.bytes).toString('utf8'), logprob: lp.logprob, top: lp.top_logprobs };
}

test('-100 on the greedy first token makes greedy decoding pick another', async () => {
  const first = await firstGreedyToken();
  const ids = await tokenize(first.text);
  assert.equal(ids.length, 1, `the greedy first token '${first.text}' should re-tokenise to one id, got ${ids}`);
  assert.equal(await detokenize(ids), first.text);
  const id = ids[0];
  // The runner-up of the unbiased distribution takes its place.
  const banned = await firstGreedyToken({ logit_bias: { [id]: -100 } });
  assert.notEqual(banned.text, first.text);
  assert.equal(Buffer.from(first.top[1].bytes).toString('utf8'), banned.text);
  // Log-probabilities come from the biased distribution: the banned token's mass is gone, so the
  // runner-up's log-probability is its raw one less log(1 - p_banned).
  const expected = first.top[1].logprob - Math.log1p(-Math.exp(first.logprob));
  assert.ok(Math.abs(banned.logprob - expected) < 1e-4, `${banned.logprob} vs ${expected}`);
  assert.ok(!banned.top.some((t) => Buffer.from(t.bytes).toString('utf8') === first.text),
            'the banned token is no longer among the best alternatives');
  // Same answer on /v1/completions with the same rendered prompt as token ids.
  const prompt = (await (await post('/tokenize', { messages: ask, add_generation_prompt: true })).json()).tokens;
  const c0 = await client().completions.create({ model: 'tiny', prompt, max_tokens: 1, temperature: 0 });
  const c1 = await client().completions.create({ model: 'tiny', prompt, max_tokens: 1, temperature: 0,
                                                logit_bias: { [id]: -100 } });
  assert.equal(c0.choices[0].text, first.text);
  assert.equal(c1.choices[0].text, banned.text);
});

test('+100 on a token makes the whole output that token', async () => {
  const ids = await tokenize(' memory');
  assert.equal(ids.length, 1, `' memory' is one token: ${ids}`);
  const id = ids[0];
  const n = 12;
  const want = await detokenize(Array(n).fill(id));
  for (const temperature of [0, 1, 2]) {
    const chat = await client().chat.completions.create({ model: 'tiny', messages: ask, max_tokens: n, temperature,
                                                          seed: 3, logit_bias: { [id]: 100 } });
    assert.equal(chat.choices[0].message.content, want, `chat at temperature ${temperature}`);
    assert.equal(chat.usage.completion_tokens, n);
    assert.equal(chat.choices[0].finish_reason, 'length');
    const text = await client().completions.create({ model: 'tiny', prompt: 'Tell me about', max_tokens: n, temperature,
                                                     seed: 3, logit_bias: { [id]: 100 } });
    assert.equal(text.choices[0].text, want, `completion at temperature ${temperature}`);
  }
  const stream = await client().chat.completions.create({ model: 'tiny', messages: ask, max_tokens: n, seed: 4,
                                                          stream: true, logit_bias: { [id]: 100, [id + 1]: -5 } });
  let content = '';
  for await (const ch of stream) content += ch.choices[0]?.delta?.content ?? '';
  assert.equal(content, want);
});

test('bad logit_bias values get a 400 naming logit_bias, and the server keeps serving', async () => {
  const many = Object.fromEntries(Array.from({ length: 301 }, (_, i) => [String(i), 1]));
  const cases = [
    ['an array', [1, 2]],
    ['a string', '5:10'],
    ['a key that is not a token id', { abc: 1 }],
    ['a negative key', { '-1': 1 }],
    ['a fractional key', { '1.5': 1 }],
    ['an id past the vocabulary', { 10000000: 1 }],
    ['an id past int32', { 2147483648: 1 }],
    ['a string value', { 5: '1' }],
    ['a null value', { 5: null }],
    ['a value above 100', { 5: 100.5 }],
    ['a value below -100', { 5: -101 }],
    ['301 entries', many],
  ];
  for (const [path, base] of [['/v1/chat/completions', { messages: ask }], ['/v1/completions', { prompt: 'Hi' }]]) {
    for (const [name, logit_bias] of cases) {
      const r = await post(path, { model: 'tiny', ...base, max_tokens: 2, logit_bias });
      const j = await r.json();
      assert.equal(r.status, 400, `${path} ${name}: ${JSON.stringify(j)}`);
      assert.equal(j.error.type, 'invalid_request_error', `${path} ${name}`);
      assert.equal(j.error.param, 'logit_bias', `${path} ${name}`);
    }
    // The limit is OpenAI's, and the message says so.
    const r = await post(path, { model: 'tiny', ...base, logit_bias: many });
    assert.match((await r.json()).error.message, /300.*OpenAI/);
  }
  // 300 entries, null and {} are fine.
  const ok300 = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [String(i + 1000), -100]));
  for (const logit_bias of [ok300, null, {}]) {
    const r = await post('/v1/completions', { model: 'tiny', prompt: 'Hi', max_tokens: 2, logit_bias });
    assert.equal(r.status, 200, JSON.stringify(logit_bias).slice(0, 40));
  }
});
