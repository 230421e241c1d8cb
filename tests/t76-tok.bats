#!/usr/bin/env bats
# ovl-tok: the EXAMPLES of its page against samples/, encode and decode
# round trips through the sample tokenizers, streams of DOC and SEQ frames
# decoded back to their documents, and the errors.

load test_helper

setup() {
	T=$BATS_TEST_TMPDIR
	HF="hf:$SAMPLES/tokenizers/sample-tokenizer.json"
	SPM="sentencepiece:$SAMPLES/tokenizers/sample-spm.model"
	TT="tiktoken:$SAMPLES/tokenizers/sample.tiktoken:r50k"
	OVL_TOK="$OVL_BUILDDIR/ovl-tok"
}

@test "ovl-tok(1) EXAMPLES run against samples/" {
	run_examples ovl-tok.1 3
	[ -z "$(cat "$EX"/err.*)" ]
	[ "$(wc -w < "$EX/out.1")" -gt 3 ]
	grep -q '^vocab 2002$' "$EX/out.2"
	grep -q '^bos 1$' "$EX/out.2"
	[ "$(wc -l < "$EX/out.3")" -eq 3 ]
}

@test "ovl-tok: encode then decode gives the text back, for every kind of tokenizer" {
	printf 'Hello, world!\ncaf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac 2024\n  indented\ttab\n' > "$T/in.txt"
	for spec in bytes "$TT" "$HF"; do
		"$OVL_TOK" -t "$spec" encode "$T/in.txt" > "$T/ids"
		[ "$(wc -l < "$T/ids")" -eq 3 ]
		"$OVL_TOK" -t "$spec" decode "$T/ids" > "$T/back"
		cmp "$T/in.txt" "$T/back"
	done
	# SentencePiece normalizes white space runs away (its model says so)
	"$OVL_TOK" -t "$SPM" encode "$T/in.txt" | "$OVL_TOK" -t "$SPM" decode > "$T/back"
	[ "$(sed -n 2p "$T/back")" = "café 東京 2024" ]
	# records with newlines, NUL-terminated
	printf 'two\nlines\0and one\0' > "$T/nul"
	"$OVL_TOK" -t "$HF" -0 encode "$T/nul" | "$OVL_TOK" -t "$HF" -0 decode | cmp - "$T/nul"
	# ids records may end in NUL too: every one is decoded, none dropped
	"$OVL_TOK" -t "$HF" -0 encode "$T/nul" | tr '\n' '\0' | "$OVL_TOK" -t "$HF" -0 decode | cmp - "$T/nul"
}

@test "ovl-tok: a source stream and a packed stream decode to the documents" {
	"$OVL_SOURCE" --tokenizer "$HF" --bos-token '<|begin|>' --format text --doc-per file \
		books "$SAMPLES"/books/*.txt > "$T/books.frames"
	"$OVL_TOK" -t "$HF" --bos-token '<|begin|>' decode "$T/books.frames" -0 > "$T/docs"
	for f in "$SAMPLES"/books/*.txt; do cat "$f"; printf '\0'; done | cmp - "$T/docs"
	# --keep-specials keeps them, as text
	"$OVL_TOK" -t "$HF" --bos-token '<|begin|>' --keep-specials decode "$T/books.frames" > "$T/kept"
	grep -q '^<|begin|>' "$T/kept"
	grep -q '<|endoftext|>$' "$T/kept"
	# through a pipe, saying so
	"$OVL_TOK" -t "$HF" decode --frames < "$T/books.frames" > "$T/piped"
	[ -s "$T/piped" ]
	run -1 bash -c 'cat "$1" | "$2" -t "$3" decode' _ "$T/books.frames" "$OVL_TOK" "$HF"
	[[ "$output" == *"a stream on a pipe needs --frames"* ]]
	# packed sequences: every piece of every SEQ is a run of one document
	printf '%s\n' "{\"text\": \"first document\"}" "{\"text\": \"second one, longer than the first\"}" \
		"{\"text\": \"third\"}" > "$T/d.jsonl"
	"$OVL_SOURCE" --tokenizer "$HF" w "$T/d.jsonl" > "$T/w.frames"
	"$OVL_CONSTRUCT" --seq-len 64 --ranks 1 < "$T/w.frames" > "$T/seqs" 2>/dev/null ||
		skip "ovl-construct needs a mixed stream here"
	"$OVL_TOK" -t "$HF" decode "$T/seqs" > "$T/pieces"
	grep -qx 'first document' "$T/pieces"
	grep -qx 'third' "$T/pieces"
}

@test "ovl-tok: errors name the record, the line or the file, with the documented status" {
	printf 'ok \xe2\x82\n' > "$T/bad.txt"
	run -1 "$OVL_TOK" -t "$HF" encode "$T/bad.txt"
	[[ "$output" == *"bad.txt': record 1: invalid UTF-8 at byte 3"* ]]
	printf '1 2 x\n' > "$T/ids"
	run -1 "$OVL_TOK" -t "$HF" decode "$T/ids"
	[[ "$output" == *"record 1: expected ids"* ]]
	printf '1 99999\n' > "$T/ids"
	run -1 "$OVL_TOK" -t "$HF" decode "$T/ids"
	[[ "$output" == *"record 1: an id is not a token of hf:"* ]]
	run -2 "$OVL_TOK" -t "hf:$T/none.json" info
	[[ "$output" == *"none.json: No such file or directory"* ]]
	run -2 "$OVL_TOK" -t "$HF" frobnicate
	[[ "$output" == *"unknown command 'frobnicate'"* ]]
	run -2 "$OVL_TOK" encode
	[[ "$output" == *"--tokenizer is needed"* ]]
	printf 'x' > "$T/x"
	"$OVL_SOURCE" --tokenizer "$HF" w "$SAMPLES"/web/web-1.jsonl | head -c 300 > "$T/cut.frames"
	run -3 "$OVL_TOK" -t "$HF" decode "$T/cut.frames"
	[[ "$output" == *"cut.frames"* ]]
}

@test "samples/plans/hf.plan: checked with its tokenizer, run, and its sequences decode to sample text" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	cp -r "$SAMPLES" "$T/samples"
	run -0 "$OVL_MIX" --check "$T/samples/plans/hf.plan"
	[[ "$output" == *"bos-token \"<|begin|>\""* ]]
	run -0 "$OVL_RUN" -q -d "$T/run/hf-run" "$T/samples/plans/hf.plan"
	"$py" -c '
import sys; sys.path.insert(0, sys.argv[1])
from overlord import offline
for i, s in enumerate(offline.npy(sys.argv[2])):
    if i == 2: break
    a, e = s.cu_seqlens[0], s.cu_seqlens[1]
    print(*s.tokens[a:e])' "$OVL_SRCDIR/python" "$T/run/hf-out/packed" > "$T/ids"
	head -c 5 "$T/ids" | grep -q '^2001 '
	"$OVL_TOK" -t "$HF" --bos-token '<|begin|>' -0 decode "$T/ids" > "$T/text"
	# each decoded piece is text of the samples (jsonl decoded, zstd too)
	zstdcat "$SAMPLES"/web/*.zst > "$T/web-zst.jsonl"
	"$py" -c '
import glob, json, sys
corpus = []
for p in glob.glob(sys.argv[2] + "/web/*.jsonl") + [sys.argv[3]]:
    corpus += [json.loads(l)["text"] for l in open(p, encoding="utf-8")]
corpus += [open(p, encoding="utf-8").read() for p in glob.glob(sys.argv[2] + "/books/*.txt")]
pieces = [x for x in open(sys.argv[1], encoding="utf-8").read().split("\0") if x]
assert len(pieces) == 2, pieces
for x in pieces:
    assert any(x[:80] in c for c in corpus), x[:80]' "$T/text" "$SAMPLES" "$T/web-zst.jsonl"
}
