// Shared by the integration tests: the tiny checkpoint, a hymoe-server on a free port, raw
// sockets for what HTTP clients will not send, and /metrics and /proc readings.
// Environment (set by ctest): HYMOE_SERVER, HYMOE_MAKE_MODEL, HYMOE_TOKENIZER_DIR, HYMOE_JS_DIR.
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { promisify } from 'node:util';

export const run = promisify(execFile);
export const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set`);
  return process.env[k];
};
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Writes the tiny random checkpoint (seed 7) into `dir`.
export async function makeTinyModel(dir) {
  await run(env('HYMOE_MAKE_MODEL'), ['--preset', 'tiny', '--seed', '7', '--tokenizer', env('HYMOE_TOKENIZER_DIR'),
                                      '--out', dir, '--log-level', 'warn']);
}

// One server on a fresh tiny checkpoint for a whole test file: written and started before its
// tests, killed and its folder removed after them. base() is its URL once started; post(path,
// body) sends JSON (a string body as is).
export function tinyServer(prefix, args) {
  let workdir, server;
  before(async () => {
    workdir = mkdtempSync(join(tmpdir(), prefix));
    const model = join(workdir, 'tiny');
    await makeTinyModel(model);
    server = await startServer(model, args);
  });
  after(async () => {
    if (server && server.proc.exitCode === null) server.proc.kill('SIGKILL');
    if (workdir) rmSync(workdir, { recursive: true, force: true });
  });
  const base = () => server.base;
  const post = (path, body) =>
    fetch(base() + path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                           body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { base, post };
}

// Starts hymoe-server on a free port; resolves once /health says ready.
export async function startServer(model, args) {
  const proc = spawn(env('HYMOE_SERVER'), ['--model', model, '--port', '0', '--threads', '2', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no port in 60 s:\n' + log)), 60000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => reject(new Error(`server exited ${code}:\n${log}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    const r = await fetch(base + '/health').catch(() => null);
    if (r && r.status === 200) break;
    if (i === 599) throw new Error('not ready in 60 s:\n' + log);
    await sleep(100);
  }
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return { proc, base, port, exited, log: () => log };
}

// A gauge or counter from /metrics (the first line of `name` whose labels include `labels`).
export async function metric(base, name, labels = '') {
  const text = await (await fetch(base + '/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(name + '{') && l.includes(labels));
  return line ? Number(line.split(' ').pop()) : NaN;
}

// Resident memory of a process in KiB (VmRSS).
export function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

// Sends `data` (string or Buffer) on a fresh connection and collects what comes back until the
// server closes it or `timeoutMs` passes: { data: Buffer, closed: bool, ms }.
export function rawExchange(port, data, { timeoutMs = 5000, halfClose = false } = {}) {
  return new Promise((resolve) => {
    const chunks = [];
    const t0 = Date.now();
    const sock = net.connect(port, '127.0.0.1');
    const finish = (closed) => {
      clearTimeout(timer);
      sock.destroy();
      resolve({ data: Buffer.concat(chunks), closed, ms: Date.now() - t0 });
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.on('connect', () => (halfClose ? sock.end(data) : sock.write(data)));
    sock.on('data', (d) => chunks.push(d));
    sock.on('error', () => {});
    sock.on('close', () => finish(true));
  });
}

// Splits bytes into HTTP/1.1 responses: [{ status, headers (lower-case names), body }].
// Bodies are delimited by Content-Length or chunked encoding; a truncated tail is dropped.
export function parseResponses(buf) {
  const out = [];
  let off = 0;
  while (off < buf.length) {
    const end = buf.indexOf('\r\n\r\n', off);
    if (end < 0) break;
    const lines = buf.subarray(off, end).toString('latin1').split('\r\n');
    const status = Number(lines[0].split(' ')[1]);
    const headers = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      const k = l.slice(0, i).trim().toLowerCase();
      headers[k] = k in headers ? headers[k] + ', ' + l.slice(i + 1).trim() : l.slice(i + 1).trim();
    }
    let pos = end + 4;
    const parts = [];
    if ((headers['transfer-encoding'] ?? '').toLowerCase() === 'chunked') {
      for (;;) {
        const eol = buf.indexOf('\r\n', pos);
        if (eol < 0) return out;
        const n = parseInt(buf.subarray(pos, eol).toString('latin1'), 16);
        pos = eol + 2;
        if (n === 0) { pos += 2; break; }
        parts.push(buf.subarray(pos, pos + n));
        pos += n + 2;
      }
    } else {
      const n = Number(headers['content-length'] ?? 0);
      if (pos + n > buf.length) return out;
      parts.push(buf.subarray(pos, pos + n));
      pos += n;
    }
    out.push({ status, headers, body: Buffer.concat(parts).toString('utf8') });
    off = pos;
  }
  return out;
}
