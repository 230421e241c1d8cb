#!/usr/bin/env node
// ref.js: the reference tokenizers for the BPE tests and benchmark.
//
//   node ref.js NODE_MODULES encode ENC [--special=plain|allow] [--nul] FILE...
//       one line of ids per FILE (the whole file is one document; with
//       --nul, documents separated by NUL bytes), by the npm package
//       "tiktoken" (OpenAI's Rust core compiled to WebAssembly)
//   node ref.js NODE_MODULES bench ENC LIB FILE
//       FILE holds documents separated by NUL bytes; encode each with LIB
//       (tiktoken, js-tiktoken or gpt-tokenizer) and print
//       "LIB bytes B tokens T seconds S hash H" (S: CPU seconds spent
//       encoding; H: FNV-1a over the ids, as tests/unit/t-bpe bench
//       computes it for overlord)
//   node ref.js NODE_MODULES specials ENC
//       the special tokens of ENC, "TEXT ID" per line
//
// ENC: r50k_base, p50k_base, cl100k_base, o200k_base.
'use strict';
const fs = require('fs');
const path = require('path');

const [mods, mode, enc, ...rest] = process.argv.slice(2);
if (!mods || !mode || !enc) {
	process.stderr.write('usage: ref.js NODE_MODULES encode|bench|specials ENC ...\n');
	process.exit(2);
}
const need = (name) => require(require.resolve(name, { paths: [mods] }));

function wasmEncoder(special) {
	const { get_encoding } = need('tiktoken');
	const e = get_encoding(enc);
	if (special === 'allow')
		return (t) => e.encode(t, 'all');
	return (t) => e.encode(t, [], []);	// disallowed_special=(): specials are text
}

function encoder(lib) {
	if (lib === 'tiktoken')
		return wasmEncoder('plain');
	if (lib === 'js-tiktoken') {
		const { Tiktoken } = need('js-tiktoken/lite');
		const ranks = need('js-tiktoken/ranks/' + enc);
		const e = new Tiktoken(ranks);
		return (t) => e.encode(t, [], []);
	}
	if (lib === 'gpt-tokenizer') {
		const g = need('gpt-tokenizer/cjs/encoding/' + enc);
		const opts = { disallowedSpecial: new Set() };
		return (t) => g.encode(t, opts);
	}
	throw new Error('unknown library ' + lib);
}

function fnv(h, ids) {
	for (let i = 0; i < ids.length; i++)
		h = Math.imul(h ^ ids[i], 16777619) >>> 0;
	return h;
}

if (mode === 'encode') {
	let special = 'plain', nul = false;
	while (rest.length && rest[0].startsWith('--')) {
		const o = rest.shift();
		if (o.startsWith('--special='))
			special = o.slice(10);
		else if (o === '--nul')
			nul = true;
	}
	const f = wasmEncoder(special);
	const out = [];
	for (const file of rest) {
		const text = fs.readFileSync(file, 'utf8');
		for (const d of nul ? text.split('\0') : [text])
			out.push(Array.from(f(d)).join(' '));
	}
	process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
} else if (mode === 'bench') {
	const [lib, file] = rest;
	const f = encoder(lib);
	const buf = fs.readFileSync(file);
	const docs = buf.toString('utf8').split('\0');
	f('warm up');
	let tokens = 0, h = 2166136261;
	// CPU time (user + system) of encoding alone: the machine is shared.
	let cpu = 0;
	for (const d of docs) {
		const c0 = process.cpuUsage();
		const ids = f(d);
		const c1 = process.cpuUsage(c0);
		cpu += c1.user + c1.system;
		tokens += ids.length;
		h = fnv(h, ids);
	}
	const sec = cpu / 1e6;
	process.stdout.write(`${lib} bytes ${buf.length} tokens ${tokens} seconds ${sec.toFixed(3)} hash ${h.toString(16)}\n`);
} else if (mode === 'specials') {
	const j = need('tiktoken/encoders/' + enc + '.json');
	for (const [k, v] of Object.entries(j.special_tokens))
		process.stdout.write(`${k} ${v}\n`);
} else {
	process.stderr.write('ref.js: unknown mode ' + mode + '\n');
	process.exit(2);
}
