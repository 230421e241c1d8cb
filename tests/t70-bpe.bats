#!/usr/bin/env bats
# BPE tokenizer (tiktoken rank files) without the npm reference: a tiny
# hand-made rank file with known merges, rank-file errors, invalid UTF-8,
# special tokens, long pieces. The conformance test against OpenAI's
# tiktoken is t71-bpe-conformance.bats.

load test_helper

T_BPE="$OVL_BUILDDIR/tests/unit/t-bpe"

# b64 BYTE...: REPLY is the base64 of the bytes (decimal values)
b64() {
	local A=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/ n
	REPLY=
	while [ $# -gt 0 ]; do
		n=$(($1 << 16 | ${2:-0} << 8 | ${3:-0}))
		REPLY+=${A:n >> 18 & 63:1}${A:n >> 12 & 63:1}
		if [ $# -ge 2 ]; then REPLY+=${A:n >> 6 & 63:1}; else REPLY+==; fi
		if [ $# -ge 3 ]; then REPLY+=${A:n & 63:1}; shift 3; else REPLY+==; shift $#; fi
	done
}

# tiny FILE: the 256 bytes, then ab cd abcd bc aa hello aaa he ll hell " w"
# with ranks 256.., written as tiktoken does (base64 of the bytes, rank).
tiny() {
	local i t k bytes
	{
		for ((i = 0; i < 256; i++)); do
			b64 $i
			echo "$REPLY $i"
		done
		for t in ab cd abcd bc aa hello aaa he ll hell " w"; do
			bytes=()
			for ((k = 0; k < ${#t}; k++)); do
				printf -v 'bytes[k]' '%d' "'${t:k:1}"
			done
			b64 "${bytes[@]}"
			echo "$REPLY $i"
			i=$((i + 1))
		done
	} > "$1"
}

setup_file() {
	tiny "$BATS_FILE_TMPDIR/tiny.tiktoken"
}

setup() {
	cp "$BATS_FILE_TMPDIR/tiny.tiktoken" "$BATS_TEST_TMPDIR/tiny.tiktoken"
}

@test "bpe: a tiny rank file merges as tiktoken does, through ovl-source" {
	printf 'hello world\n' > "$BATS_TEST_TMPDIR/in.txt"
	run -0 "$OVL_SOURCE" --tokenizer "tiktoken:$BATS_TEST_TMPDIR/tiny.tiktoken:r50k" \
		--json t "$BATS_TEST_TMPDIR/in.txt"
	# hello is a token; " world": " w" (266) then o r l d; 50256 ends it.
	[[ "$output" == *'"tokens":[261,266,111,114,108,100,50256]'* ]]
}

@test "bpe: merge order (lowest rank first, leftmost on ties) and decoding" {
	printf 'aaa' > "$BATS_TEST_TMPDIR/a3"
	printf 'aaaa' > "$BATS_TEST_TMPDIR/a4"
	printf 'bcd' > "$BATS_TEST_TMPDIR/bcd"
	printf 'abcd' > "$BATS_TEST_TMPDIR/abcd"
	run -0 "$T_BPE" encode "tiktoken:$BATS_TEST_TMPDIR/tiny.tiktoken:[a-z]+" \
		"$BATS_TEST_TMPDIR/a3" "$BATS_TEST_TMPDIR/a4" "$BATS_TEST_TMPDIR/bcd" \
		"$BATS_TEST_TMPDIR/abcd"
	[ "${lines[0]}" = "262" ]	# aa|a -> aaa
	[ "${lines[1]}" = "260 260" ]	# aa|a|a -> aa|aa (aaaa is no token)
	[ "${lines[2]}" = "98 257" ]	# cd (257) before bc (259)
	[ "${lines[3]}" = "258" ]
}

@test "bpe: the vocabulary counts special tokens; --eod-token picks one" {
	cp "$BATS_TEST_TMPDIR/tiny.tiktoken" "$BATS_TEST_TMPDIR/my-cl100k.tiktoken"
	printf 'ab\n' > "$BATS_TEST_TMPDIR/in.txt"
	run -0 "$OVL_SOURCE" --tokenizer "tiktoken:$BATS_TEST_TMPDIR/my-cl100k.tiktoken" \
		--eod-token '<|endofprompt|>' --json t "$BATS_TEST_TMPDIR/in.txt"
	[[ "$output" == *'"tokens":[256,100276]'* ]]
	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$BATS_TEST_TMPDIR/my-cl100k.tiktoken" \
		--eod-token '<|nope|>' --json t "$BATS_TEST_TMPDIR/in.txt"
	[[ "$output" == *"unknown special token '<|nope|>' for tokenizer tiktoken:cl100k"* ]]
	"$OVL_SOURCE" --tokenizer "tiktoken:$BATS_TEST_TMPDIR/my-cl100k.tiktoken" \
		t "$BATS_TEST_TMPDIR/in.txt" > "$BATS_TEST_TMPDIR/out.frames"
	run -0 "$OVL_SOURCE" --tokenizer "tiktoken:$BATS_TEST_TMPDIR/my-cl100k.tiktoken" \
		-v --json t "$BATS_TEST_TMPDIR/in.txt"
	grep -a -q 'tiktoken:cl100k' "$BATS_TEST_TMPDIR/out.frames"
	grep -a -q 'vocab 100277' "$BATS_TEST_TMPDIR/out.frames"
	grep -a -q 'eod 100257' "$BATS_TEST_TMPDIR/out.frames"
}

@test "bpe: special-token text is plain text by default; policies in the library" {
	cp "$BATS_TEST_TMPDIR/tiny.tiktoken" "$BATS_TEST_TMPDIR/x-cl100k.tiktoken"
	printf 'ab<|endoftext|>cd' > "$BATS_TEST_TMPDIR/sp"
	spec="tiktoken:$BATS_TEST_TMPDIR/x-cl100k.tiktoken"
	run -0 "$T_BPE" encode "$spec" "$BATS_TEST_TMPDIR/sp"
	[[ "$output" != *100257* ]]
	run -0 "$T_BPE" encode --special=allow "$spec" "$BATS_TEST_TMPDIR/sp"
	[ "$output" = "256 100257 257" ]
	run -0 "$T_BPE" encode --special=strip "$spec" "$BATS_TEST_TMPDIR/sp"
	[ "$output" = "256 257" ]
	run -1 "$T_BPE" encode --special=error "$spec" "$BATS_TEST_TMPDIR/sp"
	[[ "$output" == *"special token text '<|endoftext|>' at byte 2"* ]]
	run -2 "$T_BPE" encode --special=bogus "$spec" "$BATS_TEST_TMPDIR/sp"
	[[ "$output" == *"unknown special-token policy 'bogus'"* ]]
}

@test "bpe: rank-file errors name the file and line, exit 2" {
	d=$BATS_TEST_TMPDIR
	printf 'hi\n' > "$d/in.txt"
	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$d/missing-r50k.tiktoken" t "$d/in.txt"
	[[ "$output" == *"cannot open '$d/missing-r50k.tiktoken': No such file or directory"* ]]

	{ cat "$d/tiny.tiktoken"; echo 'YW*= 400'; } > "$d/b64-r50k.tiktoken"
	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$d/b64-r50k.tiktoken" t "$d/in.txt"
	[[ "$output" == *"$d/b64-r50k.tiktoken:268: bad base64 token 'YW*='"* ]]

	{ cat "$d/tiny.tiktoken"; echo 'eHl6 4o0'; } > "$d/rank-r50k.tiktoken"
	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$d/rank-r50k.tiktoken" t "$d/in.txt"
	[[ "$output" == *"$d/rank-r50k.tiktoken:268: bad rank '4o0'"* ]]

	{ cat "$d/tiny.tiktoken"; echo 'eHl6'; } > "$d/line-r50k.tiktoken"
	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$d/line-r50k.tiktoken" t "$d/in.txt"
	[[ "$output" == *"line-r50k.tiktoken:268: expected 'BASE64-TOKEN RANK'"* ]]

	{ cat "$d/tiny.tiktoken"; echo 'eHl6 260'; } > "$d/dup-r50k.tiktoken"
	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$d/dup-r50k.tiktoken" t "$d/in.txt"
	[[ "$output" == *"dup-r50k.tiktoken:268: rank 260 given twice"* ]]

	sed 1d "$d/tiny.tiktoken" > "$d/nobyte-r50k.tiktoken"
	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$d/nobyte-r50k.tiktoken" t "$d/in.txt"
	[[ "$output" == *"no token for byte 0x00"* ]]

	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$d/tiny.tiktoken" t "$d/in.txt"
	[[ "$output" == *"cannot tell the encoding from the name"* ]]

	run -2 "$OVL_SOURCE" --tokenizer "tiktoken:$d/tiny.tiktoken:(?<x" t "$d/in.txt"
	[[ "$output" == *"bad pre-tokenizer pattern at offset"* ]]
}

@test "bpe: invalid UTF-8 follows --on-error, never reaches the matcher" {
	d=$BATS_TEST_TMPDIR
	printf 'good one\nbad \xe2\x82 two\nbad \xed\xa0\x80 three\nfine\n' > "$d/in.txt"
	spec="tiktoken:$d/tiny.tiktoken:cl100k"
	run -1 "$OVL_SOURCE" --tokenizer "$spec" --json t "$d/in.txt"
	[[ "$output" == *"line 2: invalid UTF-8 at byte 4"* ]]
	run -0 "$OVL_SOURCE" --tokenizer "$spec" --on-error skip --json t "$d/in.txt"
	[ "$(grep -c '"tokens"' <<< "$output")" -eq 2 ]
	[[ "$output" == *"skipped 2 bad records"* ]]
	# The library refuses it too, with the offset (driver: whole file).
	run -1 "$T_BPE" encode "$spec" "$d/in.txt"
	[[ "$output" == *"invalid UTF-8 at byte 13"* ]]
}

@test "bpe: long pieces and long white-space runs stay fast and exact" {
	d=$BATS_TEST_TMPDIR
	{
		head -c 300000 /dev/zero | tr '\0' a
		head -c 200000 /dev/zero | tr '\0' ' '
		printf 'x'
		head -c 100000 /dev/zero | tr '\0' '\n'
		head -c 100000 /dev/zero | tr '\0' '='
	} > "$d/long"
	run -0 timeout 60 "$T_BPE" encode "tiktoken:$d/tiny.tiktoken:cl100k" "$d/long"
	# 300000 a: 150000 x "aa"; the spaces, x, newlines, = as bytes/tokens.
	[ "$(tr ' ' '\n' <<< "$output" | grep -c '^260$')" -eq 150000 ]
	[ "$(tr ' ' '\n' <<< "$output" | wc -l)" -eq $((150000 + 200000 + 1 + 100000 + 100000)) ]
}

@test "ovl-source --special: plain, allow, strip, error; bytes takes only plain" {
	t="tiktoken:$SAMPLES/tokenizers/sample.tiktoken:r50k"
	printf '{"text":"a <|endoftext|> b"}\n' > "$BATS_TEST_TMPDIR/sp.jsonl"
	for p in plain allow strip; do
		run -0 "$OVL_SOURCE" --json --tokenizer "$t" --special "$p" \
		    --format jsonl w "$BATS_TEST_TMPDIR/sp.jsonl"
		printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/$p.json"
	done
	grep -q '"tokens":\[97,32,50256,281,50256\]' "$BATS_TEST_TMPDIR/allow.json"
	grep -q '"tokens":\[97,32,281,50256\]' "$BATS_TEST_TMPDIR/strip.json"
	! grep -q '50256,281' "$BATS_TEST_TMPDIR/plain.json" || false
	run -1 "$OVL_SOURCE" --json --tokenizer "$t" --special error \
	    --format jsonl w "$BATS_TEST_TMPDIR/sp.jsonl"
	[[ "$output" == *"line 1: special token text '<|endoftext|>' at byte 2"* ]]
	run -2 "$OVL_SOURCE" --json --special allow --format jsonl w "$BATS_TEST_TMPDIR/sp.jsonl"
	run -2 "$OVL_SOURCE" --json --tokenizer "$t" --special frob \
	    --format jsonl w "$BATS_TEST_TMPDIR/sp.jsonl"
}
