#!/usr/bin/env bats
# Pre-tokenized jsonl: a field holding an array of token ids
# (--field-type ids, plan field-type=ids) gives the documents the
# tokenizer would give for their text, checked against the stream's
# tokenizer: an id outside its vocabulary, a value that is not an
# integer, a field that is not an array are bad records naming the file
# and line (--on-error skip counts them).

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	TJ="hf:$SAMPLES/tokenizers/sample-tokenizer.json"
}

@test "ids: the documents of pre-tokenized text equal the tokenized text's" {
	ids_jsonl ids.jsonl "$SAMPLES"/web/web-0.jsonl
	"$OVL_SOURCE" --json --tokenizer "$TJ" web "$SAMPLES"/web/web-0.jsonl |
		sed 's/.*"tokens":\(\[[^]]*\]\).*/\1/' > want
	"$OVL_SOURCE" --json --tokenizer "$TJ" --field ids --field-type ids web ids.jsonl |
		sed 's/.*"tokens":\(\[[^]]*\]\).*/\1/' > got
	[ "$(wc -l < got)" -ge 100 ]
	cmp want got
	# through a plan, to the mixer (the same tokenizer name in META)
	printf 'source web path=ids.jsonl field=ids field-type=ids tokenizer=%s\nstop steps=3\nseq-len 256\noutput format=jsonl path=out/s\n' "$TJ" > p.plan
	run -0 "$OVL_RUN" -q -d run p.plan 3>&-
	[ "$(wc -l < out/s.jsonl)" -ge 3 ]
}

@test "ids: out-of-range ids, non-integers, non-arrays are bad records with file and line" {
	printf '{"ids": [1, 2]}\n{"ids": [1, 5000]}\n{"ids": [1, "x"]}\n{"ids": "text"}\n{"other": 1}\n{"ids": []}\n' > bad.jsonl
	run -1 "$OVL_SOURCE" --tokenizer "$TJ" --field ids --field-type ids web bad.jsonl
	[[ "$output" == *"'bad.jsonl': line 2: token 1 of field 'ids' is out of range: not an id of hf:"*"(vocabulary 2002)"* ]]
	run -0 --separate-stderr "$OVL_SOURCE" --json --on-error skip --tokenizer "$TJ" \
		--field ids --field-type ids web bad.jsonl
	# the first and the empty document (just its end token) pass
	[ "${#lines[@]}" -eq 2 ]
	[[ "$stderr" == *"4 bad records skipped"* ]] || [[ "$stderr" == *"skipped"* ]]
	run -2 "$OVL_SOURCE" --field-type words web bad.jsonl
	[[ "$output" == *"unknown --field-type 'words' (text, ids)"* ]]
	printf 'source a path=bad.jsonl field-type=words\n' > q.plan
	run -2 "$OVL_MIX" --check q.plan
	[[ "$output" == *"q.plan:1: bad field-type 'words': expected one of text, ids"* ]]
}
