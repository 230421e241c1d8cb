#!/usr/bin/env bats
# Pre-tokenizer patterns that PCRE2 cannot run as asked (src/lib/pretok.c):
# a match past the JIT's stack and a pattern without JIT code ((*NO_JIT))
# run in the interpreter, with the same pieces; a pattern that cannot run
# at all (a match limit) is an error of the plan at ovl-mix --check, and
# at run time one error (exit 1), never a bad record that on-error=skip
# drops document after document.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	TIK=$SAMPLES/tokenizers/sample.tiktoken
}

@test "pretok: a match past the JIT stack and a (*NO_JIT) pattern run, with the same ids" {
	# a piece of 150,000 letters, 8 groups a letter: past 8 MiB of JIT stack
	awk 'BEGIN { s = "a"; while (length(s) < 150000) s = s s;
	    printf "{\"text\":\"%s\"}\n{\"text\":\"ab ba\"}\n", substr(s, 1, 150000) }' > long.jsonl
	pat='(?:a(?:b|)(?:c|)(?:d|)(?:e|)(?:f|)(?:g|)(?:h|)|\s)+'
	run -0 "$OVL_SOURCE" --tokenizer "tiktoken:$TIK:$pat" --output jit.fr x long.jsonl
	run -0 "$OVL_SOURCE" --tokenizer "tiktoken:$TIK:(*NO_JIT)$pat" --output nojit.fr x long.jsonl
	cmp jit.fr nojit.fr
	run -0 "$OVL_SOURCE" --json --tokenizer "tiktoken:$TIK:$pat" x long.jsonl
	[ "$(grep -c '"ntokens":[1-9][0-9]*,' <<< "$output")" -eq 2 ]
}

@test "pretok: ovl-mix --check runs each pattern on a probe text: one that cannot run is an error at its line (exit 2)" {
	printf '%s\n' 'seq-len 256' \
	    "source web path=$SAMPLES/web/web-0.jsonl tokenizer=tiktoken:$TIK:(\\\\w|\\\\w\\\\w)+\\\\d" \
	    "source ok path=$SAMPLES/web/web-1.jsonl tokenizer=tiktoken:$TIK:(*NO_JIT)(a|b|\\\\s)+" > p.plan
	run -2 "$OVL_MIX" --check p.plan
	[[ "$output" == *"p.plan:2: source web: tokenizer tiktoken:custom cannot encode a probe text: pre-tokenizer failed: match limit exceeded at byte "* ]]
	[[ "$output" != *"source ok"* ]]
}

@test "pretok: at run time a pattern that cannot run is one error (exit 1), also with --on-error skip, and no document" {
	awk 'BEGIN { for (i = 1; i <= 50; i++)
	    printf "{\"text\":\"document %d aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa end\"}\n", i }' > d.jsonl
	run -1 --separate-stderr "$OVL_SOURCE" --json --on-error skip \
	    --tokenizer "tiktoken:$TIK:(\\w|\\w\\w)+\\d" x d.jsonl
	[ "$(grep -c 'pre-tokenizer failed' <<< "$stderr")" -eq 1 ]
	[[ "$stderr" == *"'d.jsonl': line 1: pre-tokenizer failed: match limit exceeded at byte 0 of the document (the tokenizer's pre-tokenizer pattern cannot run on it: a tokenizer error, not a bad record; ovl-mix --check tries the patterns)"* ]]
	[[ "$output" != *'"ntokens"'* ]]
}
