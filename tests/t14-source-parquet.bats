#!/usr/bin/env bats
# ovl-source --format parquet, against an independent writer: Apache
# Arrow's Rust parquet writer (npm parquet-wasm, with apache-arrow JS)
# writes the same records as a jsonl file in every combination of codec,
# data page version and value encoding, with nulls, struct columns, small
# pages and small row groups; ovl-source must read from each exactly the
# documents it reads from the jsonl. Then the errors: every one names the
# file, and a page's names the row group, the column and the page. The
# writer is installed once per machine (npm_ref pq); without npm (or
# network for the first install) the conformance tests skip, saying so.
# Resume and partitions of parquet are in t11 and t12, over samples/parquet.

load test_helper

NPM_DIR="$OVL_NPM_CACHE/npm-pq"
PQW="$OVL_SRCDIR/tests/helper/pq-write.js"
TT="$OVL_BUILDDIR/tests/helper/ovl-test-tool"

setup_file() {
	command -v node >/dev/null 2>&1 || return 0
	npm_ref pq parquet-wasm@0.8.0 apache-arrow@21.2.0 >/dev/null || true
}

need_writer() {
	[ -f "$NPM_DIR/node_modules/parquet-wasm/node/parquet_wasm.js" ] ||
		skip "npm parquet-wasm could not be installed (no node, npm or registry)"
}

# The records: the sample web text with nulls, empty and non-ASCII values,
# a long one, and the same text in a struct column.
make_records() {
	python3 - "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-1.jsonl" > "$BATS_TEST_TMPDIR/in.jsonl" <<'EOF'
import json, sys
rows = []
for f in sys.argv[1:]:
    for l in open(f):
        rows.append(json.loads(l)["text"])
rows[3] = ""
rows[5] = "\u00e9t\u00e9 \u2603 \U0001f600 " * 3
rows[8] = "long " * 20000
for i, t in enumerate(rows):
    text = None if i % 7 == 0 else t
    print(json.dumps({"text": text, "meta": {"body": t, "n": "x%d" % i}, "k": i}))
EOF
}

# docs FIELD FILE...: the documents ovl-source reads from FIELD of the
# FILEs (one run, the files in turn), each line without its place (source,
# pos, cursor, off, file): the token count, the tokens and the text
docs() {
	local field=$1
	shift
	"$OVL_SOURCE" --json --text --on-error skip --field "$field" t "$@" |
	    sed -E 's/^\{"source":"t","id":0,"pos":\[[0-9,]*\],"cursor":"[^"]*","off":[0-9]*,//
		s/,"file":"[^"]*","text":/,"text":/'
}

# same_docs FIELD FILE...: each FILE holds the documents of in.jsonl in
# FIELD; else names the first file that differs
same_docs() {
	local field=$1 d=$BATS_TEST_TMPDIR n line f
	shift
	docs "$field" "$d/in.jsonl" > "$d/want.$field"
	n=$(wc -l < "$d/want.$field")
	[ "$n" -gt 150 ]
	for f; do cat "$d/want.$field"; done > "$d/wants.$field"
	docs "$field" "$@" > "$d/got.$field"
	cmp -s "$d/got.$field" "$d/wants.$field" && return 0
	line=$(cmp "$d/got.$field" "$d/wants.$field" 2>&1 | sed -n 's/.*line \([0-9]*\).*/\1/p')
	f=$(($# + 1))
	[ -z "$line" ] || f=$(((line - 1) / n + 1))
	echo "${!f##*/}: $field differs"
	return 1
}

@test "parquet conformance: every codec, page version and value encoding gives the jsonl's documents" {
	need_writer
	make_records
	local d=$BATS_TEST_TMPDIR c v e opts info f files=()
	# every combination, written in one run of the writer
	for c in none snappy gzip brotli lz4 lz4_raw zstd; do
		for v in 1 2; do
			for e in dict plain delta_length delta fallback; do
				case $e in
				dict) opts="dict=1" ;;
				fallback) opts="dict=1 dict-size=3000 batch=4" ;;
				*) opts="dict=0 encoding=$e" ;;
				esac
				echo "$d/$c.$v.$e.parquet compression=$c version=$v $opts row-group=23 page-size=3000"
			done
		done
	done > "$d/list"
	node "$PQW" "$NPM_DIR" "$d/in.jsonl" --each "$d/list"
	while read -r f _; do
		IFS=. read -r c v e _ <<< "${f##*/}"
		# what the file holds is what was asked for
		info=$("$TT" parquet "$f" text | head -n 1)
		case "$v:$info" in
		1:*" v2=0 "*|2:*" v1=0 "*) ;;
		*) echo "$c v$v $e: $info"; false ;;
		esac
		case "$e:$info" in
		dict:*RLE_DICTIONARY*|plain:*enc=PLAIN" "*|fallback:*PLAIN*RLE_DICTIONARY*) ;;
		delta_length:*enc=DELTA_LENGTH_BYTE_ARRAY" "*|delta:*enc=DELTA_BYTE_ARRAY" "*) ;;
		fallback:*DELTA_BYTE_ARRAY*RLE_DICTIONARY*) ;;
		*) echo "$c v$v $e: $info"; false ;;
		esac
		[[ "$info" == *"rowgroups=9 rows=205 values=175 nulls=30 "* ]] ||
			{ echo "$c v$v $e: $info"; false; }
		files+=("$f")
	done < "$d/list"
	[ "${#files[@]}" -eq 70 ]
	# the documents of every file, read in one run per column
	same_docs text "${files[@]}"
	same_docs meta.body "${files[@]}"
}

@test "parquet: the frames of a row group hold each row's cursor; chunks are row groups, partitions share them" {
	need_writer
	make_records
	local d=$BATS_TEST_TMPDIR
	node "$PQW" "$NPM_DIR" "$d/in.jsonl" "$d/f.parquet" compression=zstd row-group=50
	run -0 "$OVL_SOURCE" --json --on-error skip --field meta.body t "$d/f.parquet"
	# 205 rows in row groups of 50: chunks 0..4, the cursor's offset the row
	[ "$(grep -c '"pos":\[0,4,' <<< "$output")" -eq 5 ]
	[[ "$(sed -n 51p <<< "$output")" == *'"cursor":"0:1:1:1"'* ]]
	"$OVL_SOURCE" --on-error skip --field meta.body t "$d/f.parquet" > "$d/all.frames"
	run -0 "$TT" dump "$d/all.frames"
	[[ "$output" == *"source.t.chunks 5"* ]]
	[ "$(grep -c '^CHUNK_END' <<< "$output")" -eq 5 ]
}

@test "parquet: every column error names the file and the columns" {
	need_writer
	make_records
	local d=$BATS_TEST_TMPDIR
	node "$PQW" "$NPM_DIR" "$d/in.jsonl" "$d/f.parquet"
	run -1 "$OVL_SOURCE" --field nope t "$d/f.parquet"
	[[ "$output" == *"f.parquet': no column 'nope' (columns: text, meta.body, meta.n, k)"* ]]
	run -1 "$OVL_SOURCE" --field meta t "$d/f.parquet"
	[[ "$output" == *"column 'meta' is a group: name one of its fields"* ]]
	run -1 "$OVL_SOURCE" --field k t "$d/f.parquet"
	[[ "$output" == *"column 'k' is not a string (BYTE_ARRAY) column"* ]]
	# a list column
	printf '{"ids": [1, 2, 3]}\n{"ids": [4]}\n' > "$d/l.jsonl"
	node "$PQW" "$NPM_DIR" "$d/l.jsonl" "$d/l.parquet"
	run -1 "$OVL_SOURCE" --field ids.list.item t "$d/l.parquet"
	[[ "$output" == *"column 'ids.list.item' is repeated (a list)"* ]]
	# nulls: an error naming the row, or counted
	run -1 "$OVL_SOURCE" --field text t "$d/f.parquet"
	[[ "$output" == *"f.parquet': row group 0 row 0: column 'text' is null"* ]]
	run -0 "$OVL_SOURCE" --on-error skip --field text t "$d/f.parquet"
	[[ "$output" == *"skipped 30 bad records (30 missing field)"* ]]
}

@test "parquet: a damaged file is an error naming the row group, the column and the page" {
	need_writer
	make_records
	local d=$BATS_TEST_TMPDIR off len
	node "$PQW" "$NPM_DIR" "$d/in.jsonl" "$d/f.parquet" compression=gzip row-group=50 dict=0 page-size=3000
	read -r off len < <("$TT" parquet "$d/f.parquet" meta.body | sed -n 's/^rg=1 off=\([0-9]*\) len=\([0-9]*\).*/\1 \2/p')
	# a byte in the middle of row group 1's compressed pages
	cp "$d/f.parquet" "$d/bad.parquet"
	printf '\377\377\377\377' | dd of="$d/bad.parquet" bs=1 seek=$((off + len / 2)) conv=notrunc status=none
	run -1 "$OVL_SOURCE" --field meta.body t "$d/bad.parquet"
	[[ "$output" == *"bad.parquet': row group 1, column 'meta.body', page "*" (byte "*"): "* ]] ||
		[[ "$output" == *"bad.parquet': row group 1 row "*": row group 1, column 'meta.body', page "* ]]
	# the rows before the damage are read; --on-error skip counts the rest as one
	run -0 "$OVL_SOURCE" --json --on-error skip --field meta.body t "$d/bad.parquet"
	[[ "$output" == *"skipped 1 bad record (1 unreadable or corrupt input)"* ]]
	# a cut file, a file that is not parquet, a stream
	head -c 5000 "$d/f.parquet" > "$d/cut.parquet"
	run -1 "$OVL_SOURCE" --field text t "$d/cut.parquet"
	[[ "$output" == *"cut.parquet': not a parquet file (no PAR1 magic at its start and end)"* ]]
	run -1 "$OVL_SOURCE" --format parquet t "$SAMPLES/web/web-0.jsonl"
	[[ "$output" == *"web-0.jsonl': not a parquet file"* ]]
	run -1 "$OVL_SOURCE" --format parquet t - < "$d/f.parquet"
	[[ "$output" == *"'-' is a stream: a parquet file is read from its end"* ]]
	run -2 "$OVL_SOURCE" --field-type ids --field text t "$d/f.parquet"
	[[ "$output" == *"--field-type ids reads jsonl only"* ]]
}

@test "parquet in a plan: format=parquet through ovl-mix --check and ovl-run, the jsonl plan's output byte for byte" {
	local d=$BATS_TEST_TMPDIR f
	cat > "$d/p.plan" <<EOF
source a path=$SAMPLES/parquet/web-0.parquet
source b path=$SAMPLES/parquet/web-1.parquet format=parquet field=doc.text partitions=2
ranks 2
seq-len 256
output format=npy path=$d/pq/out
EOF
	# the same texts as jsonl
	sed -e "s|parquet/web-\([01]\).parquet|web/web-\1.jsonl|" -e 's/ format=parquet field=doc.text//' \
		-e "s|$d/pq/|$d/js/|" "$d/p.plan" > "$d/j.plan"
	run -0 "$OVL_MIX" --check "$d/p.plan"
	[[ "$output" == *"format=parquet"* ]]
	[[ "$output" == *"field=doc.text"* ]]
	mkdir -p "$d/pq" "$d/js"
	run -0 "$OVL_RUN" -q -c "$d/ckpt-pq" "$d/p.plan"
	run -0 "$OVL_RUN" -q -c "$d/ckpt-js" "$d/j.plan"
	run -0 "$OVL_CKPT" verify "$d/ckpt-pq" "$d"/pq/*.npy
	for f in "$d"/js/*; do
		cmp "$f" "$d/pq/${f##*/}"
	done
	[ "$(ls "$d/pq" | wc -l)" -ge 2 ]
}
