// The server's configured defaults against the real hymoe-server on the tiny checkpoint:
// --default-max-tokens bounds a request that gives no max_tokens on both endpoints (a request's
// own max_tokens wins); without it /v1/completions keeps OpenAI's 16. A +100 logit_bias on one
// token makes every output run to its limit (no early end of sequence on random weights).
// Environment (set by ctest): HYMOE_SERVER, HYMOE_MAKE_MODEL, HYMOE_TOKENIZER_DIR, HYMOE_JS_DIR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tinyServer } from './harness.mjs';

const limited = tinyServer('hymoe-defaults-', ['--served-model-name', 'tiny', '--default-max-tokens', '5']);
const plain = tinyServer('hymoe-nodefaults-', ['--served-model-name', 'tiny']);

async function forcedToken(server) {
  const r = await server.post('/tokenize', { prompt: ' the', add_special_tokens: false });
  const ids = (await r.json()).tokens;
  assert.equal(ids.length, 1, `' the' should be one token, got ${ids}`);
  return ids[0];
}

async function completionTokens(server, path, extra) {
  const id = await forcedToken(server);
  const body = path === '/v1/chat/completions'
    ? { model: 'tiny', messages: [{ role: 'user', content: 'Count to ten.' }], temperature: 0, ...extra }
    : { model: 'tiny', prompt: 'Count to ten.', temperature: 0, ...extra };
  body.logit_bias = { [id]: 100 };
  const r = await server.post(path, body);
  assert.equal(r.status, 200, await r.clone().text());
  const j = await r.json();
  return { tokens: j.usage.completion_tokens, finish: j.choices[0].finish_reason };
}

test('--default-max-tokens applies to chat and completions requests without max_tokens', async () => {
  for (const path of ['/v1/chat/completions', '/v1/completions']) {
    const got = await completionTokens(limited, path, {});
    assert.deepEqual(got, { tokens: 5, finish: 'length' }, path);
  }
});

test("a request's own max_tokens wins over the default", async () => {
  for (const path of ['/v1/chat/completions', '/v1/completions']) {
    assert.deepEqual(await completionTokens(limited, path, { max_tokens: 2 }), { tokens: 2, finish: 'length' }, path);
    assert.deepEqual(await completionTokens(limited, path, { max_tokens: 7 }), { tokens: 7, finish: 'length' }, path);
  }
});

test('without a configured default, completions stop at OpenAI\'s 16', async () => {
  assert.deepEqual(await completionTokens(plain, '/v1/completions', {}), { tokens: 16, finish: 'length' });
});
