// Requests a hostile client sends, against the real hymoe-server on the tiny checkpoint: JSON
// nested 100,000 deep, invalid UTF-8 in the URL and the body, pipelined requests, broken
// framing (Content-Length and chunk sizes), bytes that are not HTTP. Each must get its
// documented answer (or a closed connection where no answer can be framed) and the server must
// keep serving (issue 47).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTinyModel, startServer, rawExchange, parseResponses } from './harness.mjs';

const MAX_BODY = 1 << 20;
const MAX_DEPTH = 128;  // RequestLimits::max_json_depth
let workdir, S;

before(async () => {
  workdir = mkdtempSync(join(tmpdir(), 'hymoe-hard-'));
  const model = join(workdir, 'tiny');
  await makeTinyModel(model);
  S = await startServer(model, ['--served-model-name', 'tiny', '--max-body-bytes', String(MAX_BODY)]);
});

after(async () => {
  if (S && S.proc.exitCode === null) S.proc.kill('SIGKILL');
  rmSync(workdir, { recursive: true, force: true });
});

const post = (path, body) => fetch(S.base + path, {
  method: 'POST', headers: { 'Content-Type': 'application/json' },
  body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
});
const nested = (levels) => '['.repeat(levels) + '1' + ']'.repeat(levels);
const hi = [{ role: 'user', content: 'hi' }];

async function assertServing(what) {
  assert.equal(S.proc.exitCode, null, `${what}: the server exited\n${S.log().slice(-2000)}`);
  const r = await post('/v1/completions', { model: 'tiny', prompt: 'still there?', max_tokens: 2 });
  assert.equal(r.status, 200, what);
  assert.equal((await r.json()).usage.completion_tokens, 2, what);
}

test('JSON nested 100,000 deep is refused with 400 naming the limit, in every place', async () => {
  const deep = nested(100000);
  const msgs = JSON.stringify(hi);
  const cases = [
    ['tools', '/v1/chat/completions', `{"model":"tiny","messages":${msgs},"tools":${deep}}`],
    ['unknown field before messages', '/v1/chat/completions', `{"model":"tiny","x":${deep},"messages":${msgs}}`],
    ['inside a message', '/v1/chat/completions', `{"model":"tiny","messages":[{"role":"user","content":"hi","x":${deep}}]}`],
    ['prompt', '/v1/completions', `{"model":"tiny","prompt":${deep}}`],
    ['objects', '/v1/completions', `{"model":"tiny","prompt":"x","y":${'{"a":'.repeat(100000)}1${'}'.repeat(100000)}}`],
    ['tokenize messages', '/tokenize', `{"messages":${deep}}`],
    ['detokenize', '/detokenize', `{"tokens":${deep}}`],
  ];
  for (const [name, path, body] of cases) {
    const r = await post(path, body);
    assert.equal(r.status, 400, name);
    const e = (await r.json()).error;
    assert.equal(e.code, 'json_too_deep', name);
    assert.equal(e.param, 'body', name);
    assert.ok(e.message.includes(String(MAX_DEPTH)), e.message);
    assert.equal(e.type, 'invalid_request_error', name);
  }
  await assertServing('after deep JSON');
});

test('nesting just under the limit is served', async () => {
  // The body is level 1, so a field may add MAX_DEPTH - 1 levels.
  const at = `{"model":"tiny","messages":${JSON.stringify(hi)},"max_tokens":2,"x":${nested(MAX_DEPTH - 1)}}`;
  const r = await post('/v1/chat/completions', at);
  assert.equal(r.status, 200, await r.clone().text());
  assert.equal((await r.json()).usage.completion_tokens, 2);
  const over = `{"model":"tiny","messages":${JSON.stringify(hi)},"max_tokens":2,"x":${nested(MAX_DEPTH)}}`;
  assert.equal((await post('/v1/chat/completions', over)).status, 400);
  // Deep tools reach the chat template: refused or rendered, never a crash or a 5xx.
  const tools = await post('/v1/chat/completions', `{"model":"tiny","messages":${JSON.stringify(hi)},"max_tokens":2,"tools":${nested(MAX_DEPTH - 1)}}`);
  assert.ok(tools.status === 200 || tools.status === 400, String(tools.status));
  await assertServing('after JSON at the limit');
});

test('invalid UTF-8 in the URL path gets a valid JSON 404', async () => {
  for (const path of ['/%FF', '/v1/%C0%AF', '/%ED%A0%80x', '/%00']) {
    const { data } = await rawExchange(S.port, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const [res] = parseResponses(data);
    assert.ok(res, `${path}: no answer`);
    assert.equal(res.status, 404, path);
    const e = JSON.parse(res.body).error;  // throws on invalid JSON
    assert.equal(e.type, 'not_found_error');
    assert.ok(e.message.startsWith('no route for GET /'), e.message);
  }
  const r = await fetch(S.base + '/%FF');
  assert.equal(r.status, 404);
  assert.ok((await r.json()).error.message.includes('\uFFFD'));
  await assertServing('after /%FF');
});

test('invalid UTF-8 in a body field value or name gets 400', async () => {
  const bytes = (s) => Buffer.from(s, 'latin1');
  const cases = [
    ['value', bytes('{"model":"tiny","messages":[{"role":"user","content":"\xff\xfe"}]}')],
    ['name', bytes('{"model":"tiny","\xc0\xaf":1,"messages":[{"role":"user","content":"x"}]}')],
    ['model', bytes('{"model":"\xed\xa0\x80","messages":[{"role":"user","content":"x"}]}')],
    ['lone surrogate escape', bytes('{"model":"tiny","messages":[{"role":"user","content":"\\ud800"}]}')],
  ];
  for (const [name, body] of cases) {
    const r = await post('/v1/chat/completions', body);
    assert.equal(r.status, 400, name);
    assert.equal((await r.json()).error.param, 'body', name);
  }
  await assertServing('after invalid UTF-8 bodies');
});

const get = (path, extra = '') => `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`;
const postRaw = (path, body, extra = '') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

test('pipelined requests on one connection are all answered, in order', async () => {
  const tok = (text) => postRaw('/tokenize', JSON.stringify({ prompt: text }));
  const burst = get('/health') + tok('one') + get('/v1/models') + tok('two two two') + get('/health', 'Connection: close\r\n');
  const { data, closed, ms } = await rawExchange(S.port, burst, { timeoutMs: 4000 });
  const res = parseResponses(data);
  assert.deepEqual(res.map((r) => r.status), [200, 200, 200, 200, 200], data.toString().slice(0, 2000));
  assert.equal(JSON.parse(res[0].body).status, 'ok');
  assert.ok(JSON.parse(res[1].body).count < JSON.parse(res[3].body).count);
  assert.equal(JSON.parse(res[2].body).object, 'list');
  assert.equal(res[4].headers.connection, 'close');
  assert.ok(closed, 'the connection stayed open after Connection: close');
  assert.ok(ms < 3000, `took ${ms} ms`);
  // The same, one byte at a time would be slow to test; split mid-request instead.
  const parts = [burst.slice(0, 30), burst.slice(30, 170), burst.slice(170)];
  const split = await new Promise((resolve) => {
    import('node:net').then(({ default: net }) => {
      const chunks = [];
      const sock = net.connect(S.port, '127.0.0.1', async () => {
        for (const p of parts) { sock.write(p); await new Promise((r) => setTimeout(r, 50)); }
      });
      sock.on('data', (d) => chunks.push(d));
      sock.on('error', () => {});
      sock.on('close', () => resolve(Buffer.concat(chunks)));
      setTimeout(() => sock.destroy(), 4000);
    });
  });
  assert.equal(parseResponses(split).length, 5);
});

test('a streamed answer on a pipelined connection is followed by the next answer', async () => {
  const body = JSON.stringify({ model: 'tiny', prompt: 'stream', max_tokens: 3, stream: true });
  const { data } = await rawExchange(S.port, postRaw('/v1/completions', body) + get('/health', 'Connection: close\r\n'),
                                     { timeoutMs: 20000 });
  const res = parseResponses(data);
  assert.deepEqual(res.map((r) => r.status), [200, 200]);
  assert.ok(res[0].body.trimEnd().endsWith('data: [DONE]'), res[0].body);
  assert.equal(JSON.parse(res[1].body).status, 'ok');
});

test('invalid framing gets 400 (or 411/413) and the connection closes; nothing hangs', async () => {
  const body = JSON.stringify({ prompt: 'x' });
  const hex = body.length.toString(16);
  const chunkedHead = 'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n';
  const framing = { code: 'invalid_framing' };
  // [what, bytes sent, status, { halfClose: the client shuts down its sending side after the
  // bytes, code: the error code expected }]
  const cases = [
    ['Content-Length not a number', `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n${body}`, 400, framing],
    ['negative Content-Length', `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n${body}`, 400, framing],
    ['conflicting Content-Lengths', `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n${body}`, 400, framing],
    ['Content-Length larger than the body, then the client closes',
     `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length + 100}\r\n\r\n${body}`, 400,
     { halfClose: true, ...framing }],
    ['Content-Length and chunked', `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`, 400, framing],
    ['unknown Transfer-Encoding', `POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n${body}`, 400, framing],
    ['bad chunk size', `${chunkedHead}zz\r\n${body}\r\n0\r\n\r\n`, 400, framing],
    ['negative chunk size', `${chunkedHead}-2\r\n${body}\r\n0\r\n\r\n`, 400, framing],
    ['chunk size with 0x', `${chunkedHead}0x${hex}\r\n${body}\r\n0\r\n\r\n`, 400, framing],
    ['chunk size followed by junk', `${chunkedHead}${hex}zz\r\n${body}\r\n0\r\n\r\n`, 400, framing],
    ['chunk size past 2^48', `${chunkedHead}fffffffffffffffffff\r\n${body}\r\n0\r\n\r\n`, 400, framing],
    ['chunk longer than its size', `${chunkedHead}3\r\n${body}\r\n0\r\n\r\n`, 400, framing],
    ['no CRLF after chunk data', `${chunkedHead}${hex}\r\n${body}0\r\n\r\n`, 400, framing],
    ['chunked body cut short, then the client closes', `${chunkedHead}${hex}\r\n${body.slice(0, 3)}`, 400,
     { halfClose: true, ...framing }],
    ['no length at all', `POST /tokenize HTTP/1.1\r\nHost: x\r\n\r\n${body}`, 411, framing],
    ['PRI without a length', 'PRI * HTTP/1.1\r\nHost: x\r\n\r\nSM\r\n\r\n', 411, framing],
    ['Expect: 100-continue with a bad Content-Length (no 100 first)',
     'POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: abc\r\n\r\n', 400, framing],
    ['Content-Length past the limit', `POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n${body}`, 413,
     { code: 'request_too_large' }],
    ['not HTTP at all', 'hello there\r\n\r\n', 400],
    ['request line without a version', 'GET /health\r\n\r\n', 400],
  ];
  for (const [name, bytes, status, opts = {}] of cases) {
    const { data, closed, ms } = await rawExchange(S.port, bytes, { timeoutMs: 5000, halfClose: !!opts.halfClose });
    const all = parseResponses(data);
    const [res] = all;
    assert.ok(res, `${name}: no answer (${data.length} bytes back, closed ${closed})`);
    assert.equal(all.length, 1, `${name}: ${all.length} answers: ${data.toString('latin1').slice(0, 1500)}`);
    assert.equal(res.status, status, `${name}: ${res.body}`);
    const e = JSON.parse(res.body).error;
    assert.equal(typeof e.message, 'string', name);
    assert.equal(e.type, 'invalid_request_error', name);
    if (opts.code) assert.equal(e.code, opts.code, `${name}: ${e.message}`);
    assert.equal(res.headers.connection, 'close', name);
    assert.ok(closed && ms < 2500, `${name}: connection open after ${ms} ms`);
  }
  await assertServing('after broken framing');
});

test('a bad request in a pipeline: the answers before it, its 400 with Connection: close, none after', async () => {
  const burst = get('/health') + postRaw('/tokenize', JSON.stringify({ prompt: 'one' })) +
                'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n' +
                get('/health') + get('/v1/models');
  const { data, closed, ms } = await rawExchange(S.port, burst, { timeoutMs: 5000 });
  const res = parseResponses(data);
  assert.deepEqual(res.map((r) => r.status), [200, 200, 400], data.toString('latin1').slice(0, 2000));
  assert.notEqual(res[0].headers.connection, 'close');
  assert.equal(res[2].headers.connection, 'close');
  assert.equal(JSON.parse(res[2].body).error.code, 'invalid_framing');
  assert.ok(closed && ms < 2500, `connection open after ${ms} ms`);
});

test('a valid chunked body (with extensions) leaves the next pipelined request intact', async () => {
  const body = JSON.stringify({ prompt: 'chunked then more' });
  const burst = 'POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n' +
                `${(5).toString(16)};ext=1\r\n${body.slice(0, 5)}\r\n` +
                `00${(body.length - 5).toString(16).toUpperCase()}\r\n${body.slice(5)}\r\n0;end\r\n\r\n` +
                postRaw('/tokenize', body) + get('/health', 'Connection: close\r\n');
  const { data, closed, ms } = await rawExchange(S.port, burst, { timeoutMs: 4000 });
  const res = parseResponses(data);
  assert.deepEqual(res.map((r) => r.status), [200, 200, 200], data.toString('latin1').slice(0, 2000));
  assert.deepEqual(JSON.parse(res[0].body).tokens, JSON.parse(res[1].body).tokens);
  assert.ok(closed && ms < 3000);
});

test('a chunked body is bounded by max_body_bytes and a good one is served', async () => {
  const chunk = (s) => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`;
  const good = JSON.stringify({ prompt: 'chunked hello' });
  const ok = await rawExchange(S.port, `POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` +
                                       chunk(good.slice(0, 5)) + chunk(good.slice(5)) + '0\r\n\r\n');
  const [r1] = parseResponses(ok.data);
  assert.equal(r1.status, 200, r1.body);
  assert.ok(JSON.parse(r1.body).count > 0);
  const piece = 'x'.repeat(64 * 1024);
  const big = chunk(piece).repeat(Math.ceil((MAX_BODY + 1) / piece.length)) + '0\r\n\r\n';
  const tooBig = await rawExchange(S.port, `POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n` + big,
                                   { timeoutMs: 10000 });
  const [r2] = parseResponses(tooBig.data);
  assert.equal(r2.status, 413, r2.body);
  assert.equal(JSON.parse(r2.body).error.code, 'request_too_large');
});

test('a GET with a body answers and closes rather than reading the body as a request', async () => {
  const { data, closed } = await rawExchange(S.port, `GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n\r\nGET /nope HTTP`);
  const res = parseResponses(data);
  assert.deepEqual(res.map((r) => r.status), [200]);
  assert.equal(res[0].headers.connection, 'close');
  assert.ok(closed);
  await assertServing('after a GET with a body');
});

test('after all of it, SIGTERM exits 0 (under ASan: with no leak report)', async () => {
  S.proc.kill('SIGTERM');
  const exit = await Promise.race([S.exited, new Promise((r) => setTimeout(() => r('timeout'), 30000))]);
  assert.deepEqual(exit, { code: 0, signal: null }, S.log().slice(-3000));
});
