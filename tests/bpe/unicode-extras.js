#!/usr/bin/env node
// unicode-extras.js: the C string macros for src/lib/bpe.c that teach
// PCRE2 10.42 (Unicode 14) the letters, marks and numbers that the
// reference tokenizer's Rust regex knows from Unicode 15.0 to 16.0 (and
// the punctuation and symbols, for Hugging Face files' \p{P} and \p{S}).
//
//   node unicode-extras.js NODE_MODULES
//
// A code point is new when Python's unicodedata (Unicode 14 on Debian 12)
// has it unassigned and node (ICU) has it assigned; its class is node's,
// kept only when the reference tokenizer (npm tiktoken) agrees, probed with
// "X's" (cl100k: letters and numbers keep "'s" apart; o200k: marks too).
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { get_encoding } = require(path.join(process.argv[2], 'tiktoken'));

const py = 'import unicodedata\n' +
    'print(" ".join(str(c) for c in range(0x110000) if not 0xd800 <= c < 0xe000 ' +
    'and unicodedata.category(chr(c)) == "Cn"))';
const cn14 = execFileSync('python3', ['-c', py], { maxBuffer: 1 << 26 })
    .toString().trim().split(' ').map(Number);
const cl = get_encoding('cl100k_base'), o2 = get_encoding('o200k_base');
const sTok = o2.encode_ordinary('s')[0];
const groups = { Lu: [], Ll: [], Lt: [], Lm: [], Lo: [], M: [], N: [], P: [], S: [] };
const cat = (s) => {
	for (const k of ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'M', 'N'])
		if (new RegExp('\\p{' + k + '}', 'u').test(s))
			return k;
	return null;
};
for (const c of cn14) {
	const s = String.fromCodePoint(c);
	const k = cat(s);
	if (k === null) {
		// punctuation and symbols: no tiktoken pattern tells them apart;
		// Hugging Face files (DeepSeek V3) do, and t73 checks them
		for (const q of ['P', 'S'])
			if (new RegExp('\\p{' + q + '}', 'u').test(s))
				groups[q].push(c);
		continue;
	}
	const ln = cl.encode_ordinary(s + "'s").includes(596);
	const o = o2.encode_ordinary(s + "'s");
	const lm = o[o.length - 1] !== sTok;
	if ((k === 'M' && lm && !ln) || (k !== 'M' && ln))
		groups[k].push(c);
}
const hex = (c) => c.toString(16).toUpperCase();
for (const [k, cps] of Object.entries(groups)) {
	const r = [];
	for (let i = 0; i < cps.length; ) {
		let j = i;
		while (j + 1 < cps.length && cps[j + 1] === cps[j] + 1)
			j++;
		r.push(i === j ? `\\\\x{${hex(cps[i])}}` : `\\\\x{${hex(cps[i])}}-\\\\x{${hex(cps[j])}}`);
		i = j + 1;
	}
	let line = `#define U16_${k}\t"`, out = [];
	for (const x of r) {
		if (line.length + x.length > 76) {
			out.push(line + '" \\');
			line = '\t\t"';
		}
		line += x;
	}
	out.push(line + '"');
	console.log(`/* ${cps.length} code points */`);
	console.log(out.join('\n'));
}
