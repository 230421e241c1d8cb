#!/usr/bin/env node
// ref-hf.js: the reference implementations of Hugging Face tokenizer.json
// files, for the conformance test (tests/t73-hf-conformance.bats) and the
// benchmark (scripts/bench-bpe hf).
//
//   node ref-hf.js NODE_MODULES encode LIB TOKENIZER.JSON [--nul] FILE...
//       one line of ids per FILE (with --nul, one per NUL-separated
//       document), as encode(text, add_special_tokens = false) gives them:
//       added tokens in the text are split out, special or not
//   node ref-hf.js NODE_MODULES decode LIB TOKENIZER.JSON IDS-FILE
//       the text of each line of ids, NUL-terminated
//   node ref-hf.js NODE_MODULES jobs LIB TOKENIZER.JSON JOB...
//       several of the above in one process (one start of node, one load
//       of each tokenizer), in order; a JOB is --encode OUT FILE (encode
//       --nul FILE into OUT), --decode OUT IDS-FILE (decode into OUT) or
//       --tokenizer TOKENIZER.JSON (the jobs after it use that file) or
//       --special (the encodings after it as encode(text,
//       add_special_tokens = true) gives them: the post_processor's
//       template around each document; "hf" only)
//   node ref-hf.js NODE_MODULES bench LIB TOKENIZER.JSON FILE
//       encode each NUL-separated document; print "LIB bytes B tokens T
//       seconds S hash H" (S: CPU seconds spent encoding, H: FNV-1a over
//       the ids, as tests/unit/t-bpe bench computes it)
//
// LIB: "hf", HF's own Rust tokenizers through its npm binding (package
// "tokenizers"), or "js", the JavaScript port of transformers.js
// (package "@lenml/tokenizers").
'use strict';
const fs = require('fs');

const [mods, mode, lib, file, ...rest] = process.argv.slice(2);
if (!mods || !mode || !lib || !file) {
	process.stderr.write('usage: ref-hf.js NODE_MODULES encode|decode|bench hf|js TOKENIZER.JSON ...\n');
	process.exit(2);
}
const need = (name) => require(require.resolve(name, { paths: [mods] }));

let addSpecial = false;

// An object with async encode(text) -> ids and decode(ids) -> text.
function load(file) {
	if (lib === 'hf') {
		const { Tokenizer } = need('tokenizers');
		const t = Tokenizer.fromFile(file);
		return {
			encode: async (s) => (await t.encode(s, null, { addSpecialTokens: addSpecial })).getIds(),
			decode: async (ids) => t.decode(ids, false),
		};
	}
	if (lib === 'js') {
		const { TokenizerLoader } = need('@lenml/tokenizers');
		const dir = require('path').dirname(file);
		const cfgFile = dir + '/tokenizer_config.json';
		const cfg = fs.existsSync(cfgFile) ? JSON.parse(fs.readFileSync(cfgFile, 'utf8')) : {};
		const t = TokenizerLoader.fromPreTrained({
			tokenizerJSON: JSON.parse(fs.readFileSync(file, 'utf8')),
			tokenizerConfig: cfg,
		});
		return {
			encode: async (s) => t.encode(s, { add_special_tokens: false }),
			decode: async (ids) => t.decode(ids, { skip_special_tokens: false }),
		};
	}
	throw new Error('unknown library ' + lib);
}

function fnv(h, ids) {
	for (let i = 0; i < ids.length; i++)
		h = Math.imul(h ^ ids[i], 16777619) >>> 0;
	return h;
}

// The ids of FILES' documents (with nul, NUL-separated ones), one line each.
async function encodeText(t, nul, files) {
	const out = [];
	for (const f of files) {
		const text = fs.readFileSync(f, 'utf8');
		for (const d of nul ? text.split('\0') : [text])
			out.push(Array.from(await t.encode(d)).join(' '));
	}
	return out.join('\n') + (out.length ? '\n' : '');
}

// The text of each line of ids of FILE, NUL-terminated.
async function decodeText(t, f) {
	const lines = fs.readFileSync(f, 'utf8').split('\n');
	if (lines[lines.length - 1] === '')
		lines.pop();
	const out = [];
	for (const l of lines)
		out.push((await t.decode(l === '' ? [] : l.split(' ').map(Number))) + '\0');
	return out.join('');
}

(async () => {
	let t = load(file);
	if (mode === 'encode') {
		let nul = false;
		while (rest.length && rest[0].startsWith('--'))
			if (rest.shift() === '--nul')
				nul = true;
		process.stdout.write(await encodeText(t, nul, rest));
	} else if (mode === 'decode') {
		process.stdout.write(await decodeText(t, rest[0]));
	} else if (mode === 'jobs') {
		while (rest.length) {
			const job = rest.shift();
			if (job === '--tokenizer' && rest.length >= 1)
				t = load(rest.shift());
			else if (job === '--special' && lib === 'hf')
				addSpecial = true;
			else if (job === '--encode' && rest.length >= 2)
				fs.writeFileSync(rest.shift(), await encodeText(t, true, [rest.shift()]));
			else if (job === '--decode' && rest.length >= 2)
				fs.writeFileSync(rest.shift(), await decodeText(t, rest.shift()));
			else
				throw new Error('bad job ' + job + ' (--encode OUT FILE, --decode OUT IDS, --tokenizer FILE, --special)');
		}
	} else if (mode === 'bench') {
		const docs = fs.readFileSync(rest[0], 'utf8').split('\0');
		const bytes = fs.statSync(rest[0]).size;
		await t.encode('warm up');
		let tokens = 0, h = 2166136261, cpu = 0;
		for (const d of docs) {
			const c0 = process.cpuUsage();
			const ids = await t.encode(d);
			const c1 = process.cpuUsage(c0);
			cpu += c1.user + c1.system;
			tokens += ids.length;
			h = fnv(h, ids);
		}
		process.stdout.write(`${lib} bytes ${bytes} tokens ${tokens} seconds ${(cpu / 1e6).toFixed(3)} hash ${h.toString(16)}\n`);
	} else {
		process.stderr.write('ref-hf.js: unknown mode ' + mode + '\n');
		process.exit(2);
	}
})().catch((e) => {
	process.stderr.write('ref-hf.js: ' + (e && e.stack || e) + '\n');
	process.exit(1);
});
