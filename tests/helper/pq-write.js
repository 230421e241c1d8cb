// pq-write.js: an independent parquet writer for the conformance tests.
// Reads JSON lines, writes them as a parquet file with Apache Arrow's Rust
// writer (the npm package parquet-wasm) and apache-arrow JS.
//
//   node pq-write.js NPMDIR IN.jsonl OUT.parquet [key=value ...]
//   node pq-write.js NPMDIR IN.jsonl --each LIST
//
// --each: one file per line of LIST, "OUT.parquet [key=value ...]" (words
// separated by spaces), all from the same records in one run.
// keys: compression=none|snappy|gzip|brotli|lz4|lz4_raw|zstd, version=1|2,
//       dict=0|1, encoding=plain|delta_length|delta, row-group=N,
//       page-size=BYTES, dict-size=BYTES (dictionary page limit: past it
//       the writer falls back to plain pages), batch=N (rows per batch)
// Every top-level key of the first record becomes a column: a string (or
// null) is Utf8, an object is a struct of Utf8 fields, a number is Int64,
// an array of numbers is List<Int32>.
'use strict';
const fs = require('fs');
const { createRequire } = require('module');
const [npmdir, inPath, outPath, ...kv] = process.argv.slice(2);
if (!outPath) {
	process.stderr.write('usage: pq-write.js NPMDIR IN.jsonl OUT.parquet [key=value ...]\n' +
	    '       pq-write.js NPMDIR IN.jsonl --each LIST\n');
	process.exit(2);
}
const req = createRequire(npmdir.replace(/\/?$/, '/'));
const arrow = req('apache-arrow');
const pq = req('parquet-wasm/node');

function options(words) {
	const o = {};
	for (const a of words) {
		const i = a.indexOf('=');
		o[a.slice(0, i)] = a.slice(i + 1);
	}
	return o;
}
const rows = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l !== '')
	.map((l) => JSON.parse(l));

function typeOf(v) {
	if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
		return new arrow.Struct(Object.keys(v).map((k) =>
			new arrow.Field(k, typeOf(v[k]), true)));
	}
	if (Array.isArray(v))
		return new arrow.List(new arrow.Field('item', new arrow.Int32(), true));
	if (typeof v === 'number')
		return new arrow.Int64();
	return new arrow.Utf8();
}
function conv(v, t) {
	if (v === null || v === undefined)
		return null;
	if (t instanceof arrow.Int64)
		return BigInt(v);
	if (t instanceof arrow.Struct) {
		const o = {};
		for (const f of t.children)
			o[f.name] = conv(v[f.name], f.type);
		return o;
	}
	return v;
}
const first = rows[0] || {};
const cols = {};
for (const k of Object.keys(first)) {
	const t = typeOf(first[k]);
	cols[k] = arrow.vectorFromArray(rows.map((r) => conv(r[k], t)), t);
}
const table = new arrow.Table(cols);

const C = pq.Compression;
const comp = { none: C.UNCOMPRESSED, snappy: C.SNAPPY, gzip: C.GZIP,
	brotli: C.BROTLI, lz4: C.LZ4, lz4_raw: C.LZ4_RAW, zstd: C.ZSTD };
const E = pq.Encoding;
const enc = { plain: E.PLAIN, delta_length: E.DELTA_LENGTH_BYTE_ARRAY,
	delta: E.DELTA_BYTE_ARRAY };
// the writer's properties for the options opt
function properties(opt) {
	let b = new pq.WriterPropertiesBuilder();
	if (opt.compression !== undefined) {
		if (!(opt.compression in comp))
			throw new Error('unknown compression ' + opt.compression);
		b = b.setCompression(comp[opt.compression]);
	}
	if (opt.version !== undefined)
		b = b.setWriterVersion(opt.version === '2' ? pq.WriterVersion.V2 : pq.WriterVersion.V1);
	if (opt.dict !== undefined)
		b = b.setDictionaryEnabled(opt.dict === '1');
	// the value encoding of the string columns (others keep their default:
	// the DELTA_*_BYTE_ARRAY encodings exist only for strings)
	function strings(t, prefix, out) {
		if (t instanceof arrow.Struct) {
			for (const f of t.children)
				strings(f.type, prefix + f.name + '.', out);
		} else if (t instanceof arrow.Utf8)
			out.push(prefix.slice(0, -1));
		return out;
	}
	if (opt.encoding !== undefined) {
		if (!(opt.encoding in enc))
			throw new Error('unknown encoding ' + opt.encoding);
		for (const k of Object.keys(cols))
			for (const path of strings(cols[k].type, k + '.', []))
				b = b.setColumnEncoding(path, enc[opt.encoding]);
	}
	if (opt['row-group'] !== undefined)
		b = b.setMaxRowGroupSize(Number(opt['row-group']));
	if (opt['page-size'] !== undefined)
		b = b.setDataPageSizeLimit(Number(opt['page-size']));
	if (opt['dict-size'] !== undefined)
		b = b.setDictionaryPageSizeLimit(Number(opt['dict-size']));
	if (opt.batch !== undefined)
		b = b.setWriteBatchSize(Number(opt.batch));
	return b.build();
}
const ipc = arrow.tableToIPC(table, 'stream');
function write(out, opt) {
	fs.writeFileSync(out, pq.writeParquet(pq.Table.fromIPCStream(ipc), properties(opt)));
}
if (outPath === '--each') {
	for (const line of fs.readFileSync(kv[0], 'utf8').split('\n')) {
		const w = line.split(' ').filter((x) => x !== '');
		if (w.length > 0)
			write(w[0], options(w.slice(1)));
	}
} else
	write(outPath, options(kv));
