// Random test strings for tokenizer parity: every category the tokenizer must get right.
// makeRng(seed) -> rng; sample(rng) -> {cat, bytes: Uint8Array} (bytes may be invalid UTF-8 only
// for the "invalid_utf8" category).

export function makeRng(seed) {
  let a = seed >>> 0;
  const rng = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  rng.int = (n) => Math.floor(rng() * n);
  rng.pick = (arr) => arr[rng.int(arr.length)];
  rng.range = (lo, hi) => lo + rng.int(hi - lo + 1);
  return rng;
}

const WORDS = ("the of and to in is was for on that with as by at from his it an were are which " +
  "this be or has had first one their its new after who they two her she been other when there " +
  "all during into school time may years more most only over city some world would where later up " +
  "such used many can state about national out known university united then made Hello World " +
  "DeepSeek Kimi tokenizer JavaScript don't can't I'm you're we've they'll he'd it's O'Neil " +
  "naïve café résumé Zürich façade Ångström Москва Привет мир Ελλάδα العربية שלום हिन्दी ไทย").split(" ");
const PUNCT = [".", ",", "!", "?", ";", ":", "...", " -", " —", "(", ")", "\"", "'", "«", "»",
  "“", "”", "、", "。", "！", "？", "·", "/", "\\", "@", "#", "$", "%", "&", "*", "~", "`"];
const CODE = ["def ", "fn ", "int ", "return ", "if (", ") {", "}", "{", " = ", " == ", " != ",
  "=>", "->", "::", "++", "--", " && ", " || ", "<<", ">>", "[i]", "(x)", ";", "\n", "\n    ",
  "\n\t", "\t\t", "//", "/* ", " */", "#include <vector>", "std::", "self.", "print(", "0x1F",
  "'str'", "\"s\"", "`t`", "x_1", "fooBar", "FOO_BAR", "__init__", "    ", "</div>", "<a href=",
  "$HOME", "${x}", "%d", "\\n", "λ", "→", "≠"];
const EMOJI = ["😀", "👍", "👍🏽", "🇯🇵", "🇺🇸", "👨‍👩‍👧‍👦", "🧑🏿‍💻", "❤️", "✨", "🔥", "🤖",
  "🏳️‍🌈", "1️⃣", "🫠", "🥲", "☕", "©", "™"];
const SPACES = [" ", "  ", "\t", "\n", "\r\n", "\n\n", "\r", "\u00a0", "\u3000", "\u2003",
  "\u200b", " \n ", "\t\n", "\n\n\n\n", "     "];

function cjk(rng, n) {
  const ranges = [[0x4e00, 0x9fa5], [0x3040, 0x309f], [0x30a0, 0x30ff], [0xac00, 0xd7a3],
    [0x3400, 0x4dbf], [0xff01, 0xff5e], [0x3000, 0x303f], [0x20000, 0x2a6df]];
  let s = "";
  for (let i = 0; i < n; i++) {
    const r = rng() < 0.85 ? ranges[rng.int(4)] : rng.pick(ranges);
    s += String.fromCodePoint(rng.range(r[0], r[1]));
    if (rng() < 0.1) s += rng.pick(["、", "。", "，", " ", "「", "」", "A", "1"]);
  }
  return s;
}

function number(rng) {
  const len = rng.range(1, 40);
  let s = "";
  for (let i = 0; i < len; i++) s += String.fromCharCode(48 + rng.int(10));
  const r = rng();
  if (r < 0.15) s = "-" + s;
  else if (r < 0.3) s = s + "." + number(rng);
  else if (r < 0.4) s = s.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  else if (r < 0.45) s = rng.pick(["١٢٣", "৩৪", "٣", "Ⅻ", "²", "½", "𝟘𝟙"]) + s;
  return s;
}

function combining(rng) {
  let s = "";
  const n = rng.range(1, 8);
  for (let i = 0; i < n; i++) {
    s += rng.pick(["a", "e", "o", "n", "क", "ا", "ก", "ᄀ", "Z", " "]);
    const m = rng.int(4);
    for (let j = 0; j < m; j++) s += String.fromCodePoint(rng.range(0x300, 0x36f));
    if (rng() < 0.3) s += rng.pick(EMOJI);
  }
  return s;
}

function randomUnicode(rng, n) {
  let s = "";
  for (let i = 0; i < n; i++) {
    let cp;
    const r = rng();
    if (r < 0.3) cp = rng.range(0x20, 0x7e);
    else if (r < 0.6) cp = rng.range(0x80, 0x2fff);
    else if (r < 0.85) cp = rng.range(0x3000, 0xffff);
    else cp = rng.range(0x10000, 0x10ffff);
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x41;
    s += String.fromCodePoint(cp);
  }
  return s;
}

function english(rng) {
  let s = "";
  const n = rng.range(1, 30);
  for (let i = 0; i < n; i++) {
    let w = rng.pick(WORDS);
    if (rng() < 0.1) w = w.toUpperCase();
    else if (rng() < 0.15) w = w[0].toUpperCase() + w.slice(1);
    s += (i && rng() < 0.9 ? " " : "") + w;
    if (rng() < 0.15) s += rng.pick(PUNCT);
  }
  return s;
}

function code(rng) {
  let s = "";
  const n = rng.range(3, 40);
  for (let i = 0; i < n; i++) s += rng() < 0.7 ? rng.pick(CODE) : rng.pick(WORDS);
  return s;
}

function whitespace(rng) {
  let s = "";
  const n = rng.range(1, 12);
  for (let i = 0; i < n; i++) s += rng() < 0.6 ? rng.pick(SPACES) : rng.pick(WORDS);
  return s;
}

const GENERATORS = {
  english, code, whitespace,
  cjk: (rng) => cjk(rng, rng.range(1, 40)),
  numbers: (rng) => {
    let s = number(rng);
    for (let i = rng.int(4); i > 0; i--) s += rng.pick([" ", "x", "+", "\n", "年", "%"]) + number(rng);
    return s;
  },
  emoji_combining: combining,
  random_unicode: (rng) => randomUnicode(rng, rng.range(1, 30)),
  mixed: (rng) => {
    const parts = [english, code, whitespace, combining, (r) => cjk(r, r.range(1, 10)), number];
    let s = "";
    for (let i = rng.range(2, 6); i > 0; i--) s += rng.pick(parts)(rng);
    return s;
  },
};

// One sample. specials: added-token texts to splice in (category "special_tokens").
export function sample(rng, specials) {
  const r = rng();
  if (r < 0.04) {  // invalid UTF-8: valid text with random bytes spliced in
    const enc = new TextEncoder().encode(english(rng));
    const out = [];
    for (const b of enc) {
      out.push(b);
      if (rng() < 0.2) {
        const junk = [0x80, 0xbf, 0xc0, 0xc1, 0xc3, 0xe0, 0xe2, 0x82, 0xed, 0xa0, 0xf0, 0x9f,
          0xf4, 0x90, 0xf5, 0xff, 0xfe];
        for (let k = rng.range(1, 3); k > 0; k--) out.push(rng.pick(junk));
      }
    }
    return {cat: "invalid_utf8", bytes: Uint8Array.from(out)};
  }
  const names = Object.keys(GENERATORS);
  let cat, text;
  if (r < 0.14 && specials.length) {
    cat = "special_tokens";
    text = "";
    for (let i = rng.range(1, 5); i > 0; i--) {
      text += GENERATORS[rng.pick(names)](rng);
      let sp = rng.pick(specials);
      if (rng() < 0.2) sp = sp.slice(0, Math.max(1, sp.length - 2));  // a near miss
      text += sp;
    }
  } else {
    cat = rng.pick(names);
    text = GENERATORS[cat](rng);
  }
  return {cat, bytes: new TextEncoder().encode(text)};
}

// A large mixed corpus (benchmark input): about `bytes` bytes of valid UTF-8 text.
export function corpus(seed, bytes) {
  const rng = makeRng(seed);
  const parts = [];
  let n = 0;
  const names = Object.keys(GENERATORS).filter((k) => k !== "random_unicode");
  while (n < bytes) {
    const s = GENERATORS[rng.pick(names)](rng) + rng.pick([" ", "\n", "\n\n", ". "]);
    parts.push(s);
    n += new TextEncoder().encode(s).length;
  }
  return parts.join("");
}
