// Prefix caching against the real hymoe-server on the tiny checkpoint, through the openai npm
// SDK: a chat whose second turn re-sends the first (system prompt, question, the model's answer)
// reports usage.prompt_tokens_details.cached_tokens > 0, streamed and not, on both endpoints,
// and /metrics counts the queried and cached tokens; with --no-prefix-cache nothing is cached.
// Environment (set by ctest): HYMOE_SERVER, HYMOE_MAKE_MODEL, HYMOE_TOKENIZER_DIR, HYMOE_JS_DIR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { env, metric, tinyServer } from './harness.mjs';

const OpenAI = createRequire(join(env('HYMOE_JS_DIR'), 'x.js'))('openai').OpenAI;

const cached = tinyServer('hymoe-prefix-', ['--served-model-name', 'tiny']);
const cold = tinyServer('hymoe-noprefix-', ['--served-model-name', 'tiny', '--no-prefix-cache']);

// Long enough for several 64-token KV blocks.
const system = 'You are a careful assistant. ' + Array.from({ length: 40 }, (_, i) => `Rule ${i}: answer briefly.`).join(' ');

async function twoTurns(server, stream) {
  const client = new OpenAI({ baseURL: server.base() + '/v1', apiKey: 'none' });
  const messages = [{ role: 'system', content: system }, { role: 'user', content: 'What is a prefix cache?' }];
  const ask = async () => {
    const body = { model: 'tiny', messages, max_tokens: 12, temperature: 0 };
    if (!stream) {
      const r = await client.chat.completions.create(body);
      return { text: r.choices[0].message.content ?? '', usage: r.usage };
    }
    let text = '', usage;
    for await (const c of await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } })) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    return { text, usage };
  };
  const first = await ask();
  messages.push({ role: 'assistant', content: first.text }, { role: 'user', content: 'And why does it help?' });
  const second = await ask();
  return { first, second };
}

for (const stream of [false, true]) {
  test(`the second turn of a chat reports cached prompt tokens (${stream ? 'streamed' : 'not streamed'})`, async () => {
    const { first, second } = await twoTurns(cached, stream);
    assert.ok(first.usage.prompt_tokens > 128, `prompt of ${first.usage.prompt_tokens} tokens`);
    const hit = second.usage.prompt_tokens_details.cached_tokens;
    assert.ok(hit >= 128, `cached_tokens ${hit}`);
    assert.equal(hit % 64, 0);
    assert.ok(hit < second.usage.prompt_tokens);
  });
}

test('completions report cached_tokens too, and /metrics counts queries and hits', async () => {
  const client = new OpenAI({ baseURL: cached.base() + '/v1', apiKey: 'none' });
  const queries0 = await metric(cached.base(), 'vllm:prefix_cache_queries_total');
  const hits0 = await metric(cached.base(), 'vllm:prefix_cache_hits_total');
  // (A prompt of the system text alone would hit the chats' blocks: the template puts it first.)
  const prompt = 'Completion. ' + system;
  const r1 = await client.completions.create({ model: 'tiny', prompt, max_tokens: 3, temperature: 0 });
  const r2 = await client.completions.create({ model: 'tiny', prompt: prompt + ' Once more', max_tokens: 3, temperature: 0 });
  assert.equal(r1.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(r2.usage.prompt_tokens_details.cached_tokens >= 128);
  const queries = await metric(cached.base(), 'vllm:prefix_cache_queries_total');
  const hits = await metric(cached.base(), 'vllm:prefix_cache_hits_total');
  assert.equal(queries - queries0, r1.usage.prompt_tokens + r2.usage.prompt_tokens);
  assert.equal(hits - hits0, r2.usage.prompt_tokens_details.cached_tokens);
});

test('--no-prefix-cache: nothing cached, the same answers', async () => {
  const off = await twoTurns(cold, false);
  const on = await twoTurns(cached, false);
  assert.equal(off.second.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(off.first.text, on.first.text);
  assert.equal(off.second.text, on.second.text);
  assert.equal(await metric(cold.base(), 'vllm:prefix_cache_hits_total'), 0);
});
