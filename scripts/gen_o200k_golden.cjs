#!/usr/bin/env node
// Writes tests/data/o200k_tiktoken.tsv: tiktoken's o200k_base encode_ordinary ids (the encoder gpt-oss
// was trained with) for seeded random strings that stress the o200k pattern where llama.cpp's
// rewrite of it differs: combining marks (Devanagari, Khmer, Thai, U+0301), case changes inside
// non-ASCII words, titlecase and modifier letters, contractions (also with U+017F), every kind of
// whitespace, digits, punctuation runs with slashes and newlines, emoji.
//
//   npm install tiktoken@1.0.22            (in any directory; NODE_PATH=<it>/node_modules)
//   node scripts/gen_o200k_golden.cjs > tests/data/o200k_tiktoken.tsv
//
// Format: one line per string: index, the string's UTF-8 as hex, the ids separated by spaces.
const { get_encoding } = require("tiktoken");
const enc = get_encoding("o200k_base");

const pieces = ["the", "The", "THE", "don't", "DON'T", "it's", "IT'S", "we'RE", "they'Ll", "'s", "'\u017f",
  "\u017f", "'S", "'", "Hello", "hELLO", "हिन्दी", " हिन्दी", "नमस्ते", "क्षत्रिय", "e\u0301", "E\u0301",
  "cafe\u0301", "ញ៉ាំ", "ខ្មែរ", "ไทย", "ภาษาไทย", "Привет", "ПРИВЕТмир", "приВЕТ", "Ελληνικά", "ΣΣσς",
  "ǅungla", "ǈ", "ᾈ", "日本語", "中文", "한국어", "こんにちは", "ｱｲｳ", "ʰ", "ʰello", "aʰb", "ǃ", "العربية",
  "עברית", "😀", "👍🏽", "❤️", "👨‍👩‍👧", "🇫🇷", "١٢٣", "٣.١٤", "Ⅻ", "½", "²", "12345", "3.14", "1e10",
  "x86_64", "foo_bar", "a/b", "http://x.y/z", ".", ",", "!", "?", ";", ":", "\"", "(", ")", "[", "]", "{",
  "}", "-", "--", "...", "…", "/", "\\", "@", "#", "$", "%", "^", "&", "*", "+", "=", "<", ">", "|", "~",
  "`", "_", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\u00a0", "\u3000", "\u2003", "\u200b",
  "\u0085", " \u0301", "\u0301", "\u0903", "\u094d", "ﬁ", "Ａｂｃ", "µ", "ß", "ẞ", "İstanbul", "ǰ", "ﬀ",
  "ℌ", "ℵ", "ⓐ", "Ⓐ", "𝐀𝐁𝐜", "𐐀𐐨", "ꙮ"];

let state = 0x9E3779B97F4A7C15n;
function rnd(n) {                       // xorshift64, deterministic
  state ^= (state << 13n) & 0xFFFFFFFFFFFFFFFFn;
  state ^= state >> 7n;
  state ^= (state << 17n) & 0xFFFFFFFFFFFFFFFFn;
  return Number((state >> 11n) % BigInt(n));
}

const out = [];
for (let i = 0; i < 400; i++) {
  let s = "";
  const n = 1 + rnd(24);
  for (let k = 0; k < n; k++) {
    s += pieces[rnd(pieces.length)];
    if (rnd(10) < 4) s += " ";
  }
  out.push(i + "\t" + Buffer.from(s, "utf8").toString("hex") + "\t" + Array.from(enc.encode_ordinary(s)).join(" "));
}
process.stdout.write(out.join("\n") + "\n");
