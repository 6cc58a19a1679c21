// n > 1 (issue 45) against the real hymoe-server on the tiny checkpoint, through the openai npm
// SDK: n choices indexed 0..n-1 in non-streamed and streamed answers of both endpoints, choice i
// the same text as a request of its own with seed + i, usage counting the prompt once and the
// completions summed, and the prompt's KV shared through the prefix cache (/metrics hits).
// Environment (set by ctest): HYMOE_SERVER, HYMOE_MAKE_MODEL, HYMOE_TOKENIZER_DIR, HYMOE_JS_DIR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { env, metric, tinyServer } from './harness.mjs';

const OpenAI = createRequire(join(env('HYMOE_JS_DIR'), 'x.js'))('openai').OpenAI;

const server = tinyServer('hymoe-n-', ['--served-model-name', 'tiny', '--max-running', '4']);
const client = () => new OpenAI({ apiKey: 'none', baseURL: server.base() + '/v1', maxRetries: 0 });
const ask = [{ role: 'user', content: 'Name three colours.' }];

test('chat n=3: choices indexed, each the answer of its own seed, usage summed, streamed the same', async () => {
  const body = { model: 'tiny', messages: ask, max_tokens: 8, temperature: 1, seed: 11, logprobs: true };
  const r = await client().chat.completions.create({ ...body, n: 3 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  let tokens = 0;
  for (const c of r.choices) tokens += c.logprobs.content.length;
  assert.equal(r.usage.completion_tokens, tokens);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + tokens);
  for (let i = 0; i < 3; ++i) {
    const one = await client().chat.completions.create({ ...body, seed: 11 + i });
    assert.equal(r.choices[i].message.content, one.choices[0].message.content, `choice ${i} = seed ${11 + i}`);
    assert.equal(r.usage.prompt_tokens, one.usage.prompt_tokens);
  }
  assert.ok(new Set(r.choices.map((c) => c.message.content)).size > 1, 'different seeds, different answers');

  const texts = ['', '', ''];
  const finish = [null, null, null];
  let usage = null;
  for await (const ch of await client().chat.completions.create({
    ...body, n: 3, stream: true, stream_options: { include_usage: true } })) {
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      texts[c.index] += c.delta?.content ?? '';
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  assert.deepEqual(texts, r.choices.map((c) => c.message.content));
  assert.deepEqual(finish, r.choices.map((c) => c.finish_reason));
  assert.equal(usage.completion_tokens, r.usage.completion_tokens);
});

test('completions n=2 share the prompt through the prefix cache; streamed choices match', async () => {
  const prompt = 'A long prompt. ' + Array.from({ length: 40 }, (_, i) => `Line ${i} of the shared prompt.`).join(' ');
  const hits0 = await metric(server.base(), 'vllm:prefix_cache_hits_total');
  const body = { model: 'tiny', prompt, max_tokens: 6, temperature: 0.9, seed: 5 };
  const r = await client().completions.create({ ...body, n: 2 });
  const hits1 = await metric(server.base(), 'vllm:prefix_cache_hits_total');
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.ok(r.usage.prompt_tokens > 128, `prompt of ${r.usage.prompt_tokens} tokens`);
  // Choice 1 took choice 0's full prompt blocks.
  assert.ok(hits1 - hits0 >= 128, `prefix cache hits ${hits0} -> ${hits1}`);
  const texts = ['', ''];
  for await (const ch of await client().completions.create({ ...body, prompt: prompt + ' Again.', n: 2, stream: true })) {
    for (const c of ch.choices) texts[c.index] += c.text;
  }
  for (let i = 0; i < 2; ++i) {
    const one = await client().completions.create({ ...body, prompt: prompt + ' Again.', seed: 5 + i });
    assert.equal(texts[i], one.choices[0].text, `streamed choice ${i} = seed ${5 + i}`);
  }
});

test('n outside [1, 128] is a 400 naming n', async () => {
  for (const n of [0, 129, 2.5]) {
    const r = await server.post('/v1/chat/completions', { model: 'tiny', messages: ask, max_tokens: 2, n });
    const j = await r.json();
    assert.equal(r.status, 400, JSON.stringify(j));
    assert.equal(j.error.param, 'n');
  }
});
