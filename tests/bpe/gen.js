#!/usr/bin/env node
// gen.js: deterministic random documents for the BPE conformance test.
//   node gen.js SEED COUNT DIR [pool]
// Writes DIR/rand-N.txt (or, when DIR ends in .txt, that one file with the
// documents separated by NUL bytes), each a random mix of pieces drawn from the
// tricky parts of the pre-tokenizer patterns: letters of every case class,
// marks, digits of many scripts, every kind of white space, contractions,
// punctuation, emoji, CJK. With "all" as the pool, also code points drawn
// from the whole of Unicode (assigned in Unicode 14, which PCRE2 10.42 and
// Rust's regex agree on). With "hf", also the pieces Hugging Face
// tokenizer.json files are sensitive to: text NFC changes, right-to-left
// scripts, combining marks, long runs of white space, the metaspace and
// byte-fallback spellings, and the added tokens of the models tested.
'use strict';
const fs = require('fs');
const [seed, count, dir, pool] = process.argv.slice(2);
let s = BigInt(seed) * 6364136223846793005n + 1442695040888963407n;
function rnd(n) {
	s = (s * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
	return Number((s >> 33n) % BigInt(n));
}
const pick = (a) => a[rnd(a.length)];
const pieces = [
	' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', '\r', '\v', '\f', '\u00a0', '\u0085',
	'\u1680', '\u2000', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000',
	'\u180e', '\ufeff', '\u200b', '\u200d', '\u2060',
	"'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'m", "'M", "'ll", "'LL", "'d", "'D",
	"'\u017f", "'x", "'", "''", '\u2019s',
	'a', 'Z', 'hello', 'World', 'HELLO', 'camelCase', 'XMLHttp', 'ǅ', 'ǈa', 'ʰ', 'ª', 'º',
	'ß', 'ẞ', 'İ', 'ı', 'ﬁ', 'Ω', 'ω', 'Σ', 'ς', 'Я', 'я', 'ա', 'Ա',
	'\u0301', '\u0308', 'e\u0301', '\u0903', '\u20dd', '\u0e31', 'क्ष', 'ि', 'ส', 'ั', 'ม',
	'0', '1', '12', '123', '1234', '٣', '५', '٣٤٥', '¹', '½', 'Ⅻ', '①', '１', '𝟘',
	'.', ',', '!', '?', '-', '_', '/', '//', '\\', '(', ')', '{', '}', '<', '>', '"', '#',
	'@', '$', '€', '+', '=', '*', '&', '|', '~', '`', '^', '%', ';', ':', '...', '—', '«', '»',
	'😀', '👍🏽', '👨‍👩‍👧', '🇯🇵', '❤️', '\ufe0f', '中', '文字', '日本語', 'カタカナ', '한국어',
	'\ue000', '\ufffd', '𠀀', 'ＡＢ', 'ｶﾀ', '\u00ad', '\u061c', '\u0600',
	'<|endoftext|>', '<|fim_prefix|>', '<|endofprompt|>',
];
if (pool === 'hf')
	pieces.push('e\u0301', 'A\u030a', '\u212b', '\u1100\u1161\u11a8', 'n\u0303o', '\u0065\u0308\u0301',
		'ﾊﾟ', '\u00c5', '\u01c4', 'ﬃ', '㍿', '\u0300\u0301\u0302', 'o\u0328\u0301',
		'مرحبا', 'بالعالم', 'السلام عليكم', 'שלום', 'עולם', '\u200f', '\u200e', '\u202b', 'ٱلْعَرَبِيَّة',
		'हिन्दी', 'ภาษาไทย', 'ქართული', 'Ελληνικά', 'русский язык', 'Tiếng Việt',
		' '.repeat(17), '\t'.repeat(9), '\n'.repeat(7), ' \n \n  \t', '    def f(x):\n        return x\n',
		'int main(void) { return 0; }', 'for (i = 0; i < n; i++)', '{"a": [1, 2.5e-3]}', 'x => x*2;',
		'\u2581', '\u2581\u2581', '\u2581the', '<0x41>', '<0x0A>', '<unk>', '<s>', '</s>', '<eos>', '<bos>',
		'<pad>', '<mask>', '<|begin_of_text|>', '<|end_of_text|>', '<|im_start|>', '<|im_end|>', '<think>',
		'</think>', '<tool_call>', '<｜end▁of▁sentence｜>', '<｜begin▁of▁sentence｜>', '<｜User｜>',
		'<start_of_turn>', '<end_of_turn>', '<unused7>', '<|startoftext|>', '<|return|>', '<|channel|>',
		'1234567', '3.14159', '0x1F', '１２３', '٠١٢', '𝟙𝟚');
const single = dir.endsWith('.txt');
const docs = [];
if (!single)
	fs.mkdirSync(dir, { recursive: true });
for (let d = 0; d < Number(count); d++) {
	let out = '';
	const n = 20 + rnd(400);
	for (let i = 0; i < n; i++) {
		if (pool === 'all' && rnd(4) === 0) {
			let cp;
			do {
				cp = rnd(0x30000);
			} while ((cp >= 0xd800 && cp < 0xe000) || !/\P{Cn}/u.test(String.fromCodePoint(cp)));
			out += String.fromCodePoint(cp);
		} else {
			const p = pick(pieces);
			out += rnd(8) === 0 ? p.repeat(1 + rnd(6)) : p;
		}
	}
	if (single)
		docs.push(out);
	else
		fs.writeFileSync(`${dir}/rand-${d}.txt`, out);
}
if (single)
	fs.writeFileSync(dir, docs.join('\0'));
