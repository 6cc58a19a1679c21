// Soak: concurrent streaming clients against the real hymoe-server on the tiny checkpoint, with
// random early closes and bad requests mixed in, for HYMOE_SOAK_SECONDS (default 30) over
// loopback. Afterwards nothing runs or waits, the KV cache is empty, every early close ended its
// request as aborted, every answer was one the API documents (no 5xx, no dropped connection on a
// good request) and the resident memory grew by less than the stated bound over its value after
// a warm-up.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import { makeTinyModel, startServer, metric, rssKiB, rawExchange, sleep } from './harness.mjs';

const SECONDS = Number(process.env.HYMOE_SOAK_SECONDS ?? 30);
const CLIENTS = 12;
// Growth allowed after the warm-up: allocator caches and thread stacks settle within it, a leak
// of one KV sequence, a Generation or a connection buffer per request does not.
// HYMOE_SOAK_RSS_BOUND_MIB overrides it where memory is held on purpose (ASan's quarantine).
const RSS_GROWTH_BOUND_KIB = Number(process.env.HYMOE_SOAK_RSS_BOUND_MIB ?? 48) * 1024;
const SEED = Number(process.env.HYMOE_TEST_SEED ?? Date.now() % 100000);

let workdir, S;

before(async () => {
  workdir = mkdtempSync(join(tmpdir(), 'hymoe-soak-'));
  const model = join(workdir, 'tiny');
  await makeTinyModel(model);
  S = await startServer(model, ['--served-model-name', 'tiny', '--max-running', '6', '--max-waiting', '64',
                         '--kv-cache-bytes', String(64 << 20), '--max-body-bytes', String(1 << 20)]);
});

after(async () => {
  if (S && S.proc.exitCode === null) S.proc.kill('SIGKILL');
  rmSync(workdir, { recursive: true, force: true });
});

// xorshift32: the soak's choices repeat for a seed.
function rng(seed) {
  let x = seed || 1;
  return () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x / 4294967296;
  };
}

// One streamed chat request through node:http; `closeAfter` data events, if set, destroys the
// socket then (an early close). Resolves to { status, done, error }.
function stream(body, closeAfter) {
  return new Promise((resolve) => {
    const data = JSON.stringify(body);
    const req = http.request(S.base + '/v1/chat/completions', {
      method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) },
    }, (res) => {
      let events = 0, text = '';
      res.on('data', (d) => {
        text += d;
        if (closeAfter !== undefined && ++events >= closeAfter) {
          req.destroy();
          resolve({ status: res.statusCode, done: false, closedEarly: true });
        }
      });
      res.on('end', () => resolve({ status: res.statusCode, done: text.trimEnd().endsWith('data: [DONE]'), text }));
      res.on('error', () => {});
    });
    req.on('error', (e) => resolve({ status: 0, error: e.code }));
    req.setTimeout(60000, () => { req.destroy(); resolve({ status: 0, error: 'timeout' }); });
    req.end(data);
  });
}

const deep = '['.repeat(50000) + ']'.repeat(50000);
const bad = [
  () => fetch(S.base + '/v1/chat/completions', { method: 'POST', body: `{"model":"tiny","tools":${deep},"messages":[]}` }),
  () => fetch(S.base + '/v1/completions', { method: 'POST', body: Buffer.from('{"model":"tiny","prompt":"\xff"}', 'latin1') }),
  () => fetch(S.base + '/%FF'),
  () => fetch(S.base + '/v1/chat/completions', { method: 'POST', body: '{"model":"tiny","messages":[' }),
  () => fetch(S.base + '/v1/chat/completions', { method: 'POST', body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], temperature: 9 }) }),
  () => rawExchange(S.port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n{}').then((r) => ({ status: Number(r.data.toString().split(' ')[1]) })),
  () => rawExchange(S.port, 'GARBAGE\r\n\r\n').then((r) => ({ status: Number(r.data.toString().split(' ')[1]) })),
];

// Whether, within 15 s, nothing runs or waits and the KV cache is empty.
async function becomesIdle() {
  for (let i = 0; i < 150; i++) {
    if ((await metric(S.base, 'vllm:num_requests_running')) === 0 &&
        (await metric(S.base, 'vllm:num_requests_waiting')) === 0 &&
        (await metric(S.base, 'vllm:kv_cache_usage_perc')) === 0) return true;
    await sleep(100);
  }
  return false;
}

async function client(id, deadline, tally) {
  const rand = rng(SEED * 31 + id);
  // A client's first request is of the kind its id picks (ids mod 4: stream, stream, early close,
  // bad request), so every kind is sent however few requests a slow machine gets through.
  for (let n = 0; Date.now() < deadline; n++) {
    const p = n === 0 ? ((id % 4) + 0.5) / 4 : rand();
    const body = { model: 'tiny', messages: [{ role: 'user', content: `soak ${id} ${Math.floor(rand() * 1e6)}` }],
                   max_tokens: 4 + Math.floor(rand() * 40), stream: true, ignore_eos: true, seed: id };
    if (p < 0.5) {
      const r = await stream(body);
      tally(r.status === 200 && r.done ? 'stream ok' : r.status === 429 ? '429' : `stream failed ${r.status} ${r.error ?? ''}`);
    } else if (p < 0.75) {
      // 200 tokens never finish within the <= 6 data events read: each close cancels a request.
      const r = await stream({ ...body, max_tokens: 200 }, 1 + Math.floor(rand() * 6));
      tally(r.closedEarly ? 'closed early' : r.status === 429 ? '429' : `early close failed ${r.status} ${r.error ?? ''}`);
    } else {
      const r = await bad[Math.floor(rand() * bad.length)]().catch((e) => ({ status: 0, error: String(e) }));
      if (r.arrayBuffer) await r.arrayBuffer();
      tally(r.status >= 400 && r.status < 500 ? 'bad refused' : `bad answered ${r.status} ${r.error ?? ''}`);
    }
  }
}

test(`soak: ${CLIENTS} clients for ${SECONDS} s leave nothing running and memory bounded`, { timeout: (SECONDS + 300) * 1000 }, async () => {
  console.log(`soak seed ${SEED} (HYMOE_TEST_SEED reproduces the clients' choices), ${SECONDS} s`);
  const counts = {};
  const tally = (k) => { counts[k] = (counts[k] ?? 0) + 1; };
  // Warm-up: every path once at full concurrency, so allocator pools and KV pages are touched.
  const t0 = Date.now();
  const since = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(1000 + i, Date.now() + 5000, tally)));
  console.log(`soak: warm-up done at ${since()}`);
  // Settled: the warm-up's cancelled requests counted before the abort counter is read.
  assert.ok(await becomesIdle(), 'requests still running or waiting 15 s after the warm-up');
  await sleep(500);
  const rssBefore = rssKiB(S.proc.pid);
  const abort = 'finished_reason="abort"';
  const abortsBefore = await metric(S.base, 'vllm:request_success_total', abort);
  const closedBefore = counts['closed early'] ?? 0;
  const deadline = Date.now() + SECONDS * 1000;
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i, deadline, tally)));
  console.log(`soak: clients done at ${since()} (their last requests end after the deadline)`);

  const idle = await becomesIdle();
  console.log(`soak: idle ${idle} at ${since()}`);
  const rssAfter = rssKiB(S.proc.pid);
  const aborts = (await metric(S.base, 'vllm:request_success_total', abort)) - abortsBefore;
  const closed = (counts['closed early'] ?? 0) - closedBefore;
  console.log(`soak: ${JSON.stringify(counts)}; ${aborts} requests aborted for ${closed} early closes after the ` +
              `warm-up; VmRSS ${rssBefore} KiB after warm-up, ${rssAfter} KiB at the end (bound +${RSS_GROWTH_BOUND_KIB} KiB)`);
  assert.equal(S.proc.exitCode, null, S.log().slice(-3000));
  const failures = Object.keys(counts).filter((k) => k.includes('failed') || k.startsWith('bad answered'));
  assert.deepEqual(failures, [], JSON.stringify(counts));
  // Every kind of traffic took place, so the checks below saw it.
  assert.ok(counts['stream ok'] > CLIENTS, JSON.stringify(counts));
  assert.ok(closed > 0 && counts['bad refused'] > 0, JSON.stringify(counts));
  assert.ok(idle, 'requests still running or waiting, or KV blocks still held, 15 s after the last client');
  // Each early close was noticed and cancelled its request (rather than it running to the end).
  assert.equal(aborts, closed, `${aborts} aborted requests for ${closed} early closes`);
  assert.ok(Number.isFinite(rssBefore) && Number.isFinite(rssAfter), 'no VmRSS reading');
  assert.ok(rssAfter - rssBefore < RSS_GROWTH_BOUND_KIB, `VmRSS grew by ${rssAfter - rssBefore} KiB`);
  const r = await fetch(S.base + '/v1/completions', { method: 'POST', body: JSON.stringify({ model: 'tiny', prompt: 'after', max_tokens: 2 }) });
  assert.equal(r.status, 200);
  await r.arrayBuffer();
  // A clean exit: under ASan, LeakSanitizer's report at exit would make it non-zero.
  S.proc.kill('SIGTERM');
  const exit = await Promise.race([S.exited, new Promise((res) => setTimeout(() => res('timeout'), 30000))]);
  assert.deepEqual(exit, { code: 0, signal: null }, S.log().slice(-3000));
});
