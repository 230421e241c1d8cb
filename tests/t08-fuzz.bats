#!/usr/bin/env bats
# The fuzz targets of tests/fuzz/ (libFuzzer, ASan and UBSan, clang), each
# run for a short bounded time from its seed corpus: no crash, no sanitizer
# report, no disagreement between the JSON extractor and jansson, no broken
# invariant of the record readers and tokenizer files.
# `make fuzz FUZZ_SECONDS=N` runs them longer.

load test_helper

setup_file() {
	export FUZZ_OUT="$OVL_BUILDDIR/fuzz"
}

fuzz_one() {	# fuzz_one TARGET: 400 inputs (at most 300 s), its "ok" line
	command -v clang > /dev/null || skip "clang is not installed (scripts/bootstrap installs it)"
	run -0 "$OVL_SRCDIR/scripts/fuzz" -r 400 -s 300 -o "$FUZZ_OUT" "$1"
	echo "# $output" >&3
	# the count of inputs run, whatever the machine's load
	[[ "$output" == "fuzz-$1: ok: "*" runs in at most 300 s, cov: "*", ft: "* ]]
	runs=$(sed -n "s/^fuzz-$1: ok: \([0-9]*\) runs.*/\1/p" <<< "$output")
	[ "$runs" -ge 400 ]
}

@test "fuzz: the frame parser and every frame decoder" {
	fuzz_one frame
}

@test "fuzz: the checkpoint log reader and the replay of its records" {
	fuzz_one ckptlog
}

@test "fuzz: the plan parser" {
	fuzz_one plan
}

@test "fuzz: the JSON field extractor agrees with jansson" {
	fuzz_one jsonl
}

@test "fuzz: the line and paragraph record reader, in uneven reads" {
	fuzz_one lines
}

@test "fuzz: tar and WebDataset member grouping, from the start and resumed" {
	fuzz_one wds
}

@test "fuzz: image headers (PNG, JPEG, WebP) and the placeholder cost models" {
	fuzz_one image
}

@test "fuzz: tiktoken rank files, loaded and used" {
	fuzz_one tiktoken
}

@test "fuzz: Hugging Face tokenizer.json files loaded and used, and text through two fixed ones" {
	fuzz_one hf
}

@test "fuzz: the parquet reader, read whole and resumed from a row group's middle" {
	fuzz_one parquet
}

@test "fuzz: .npy and Megatron index headers, and resume cursors" {
	fuzz_one tokfmt
}

@test "fuzz: the stream handshake, from either side, whatever a peer sends" {
	fuzz_one netauth
}

@test "fuzz: HTTP answers to ranged, sequential and whole reads, from a local server" {
	fuzz_one http
}

@test "fuzz: S3 ListObjectsV2 answers" {
	fuzz_one s3list
}

@test "fuzz: STATE and META texts, and the specs they repeat" {
	fuzz_one state
}
