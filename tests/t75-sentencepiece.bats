#!/usr/bin/env bats
# sentencepiece: tokenizer.model files through Debian's libsentencepiece.
# Models are trained here with spm_train (Debian package sentencepiece) as
# Llama 2 and Mistral were made (unigram and BPE, byte fallback, split
# digits, white space kept), and overlord's ids are compared with
# spm_encode's, the library's own command, on more than 5 MB of text, one
# document per line as spm_encode reads it.

load test_helper

T_BPE="$OVL_BUILDDIR/tests/unit/t-bpe"
DIR="$OVL_BUILDDIR/spm-test"

setup_file() {
	command -v spm_train >/dev/null 2>&1 || return 0
	[ -s "$DIR/lines.txt" ] && [ -s "$DIR/bpe.model" ] && return 0
	mkdir -p "$DIR"
	# the text: this project's sources, man pages and test texts, and
	# seeded random lines of tricky pieces when node is there
	{
		cat "$OVL_SRCDIR"/src/*/*.c "$OVL_SRCDIR"/src/lib/*.h "$OVL_SRCDIR"/man/*.[0-9] \
			"$OVL_SRCDIR"/README.md "$OVL_SRCDIR"/tests/bpe/texts/*.txt
		if command -v node >/dev/null 2>&1; then
			node "$OVL_SRCDIR/tests/bpe/gen.js" 5 3000 "$DIR/rand.txt" hf
			tr '\0\r' '\n\n' < "$DIR/rand.txt"
		fi
	} | grep -v '^$' > "$DIR/text.txt"
	# more than 5 MB: the text again, each line reversed word by word
	cp "$DIR/text.txt" "$DIR/lines.tmp"
	while [ "$(stat -c %s "$DIR/lines.tmp")" -lt 5200000 ]; do
		awk '{ for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "\n") }' \
			"$DIR/text.txt" >> "$DIR/lines.tmp"
		cat "$DIR/text.txt" >> "$DIR/lines.tmp"
	done
	grep -v '^$' "$DIR/lines.tmp" > "$DIR/lines.txt"
	rm -f "$DIR/lines.tmp"
	head -c 2000000 "$DIR/text.txt" > "$DIR/train.txt"
	spm_train --input="$DIR/train.txt" --model_prefix="$DIR/uni" --vocab_size=2000 \
		--model_type=unigram --byte_fallback=true --split_digits=true \
		--character_coverage=0.9995 --minloglevel=2 >/dev/null 2>&1
	spm_train --input="$DIR/train.txt" --model_prefix="$DIR/bpe" --vocab_size=2000 \
		--model_type=bpe --byte_fallback=true --split_digits=true \
		--remove_extra_whitespaces=false --minloglevel=2 >/dev/null 2>&1
}

setup() {
	command -v spm_encode >/dev/null 2>&1 ||
		skip "spm_encode not found: install the Debian package sentencepiece (scripts/bootstrap does)"
	[ -s "$DIR/bpe.model" ] || skip "spm_train could not train the test models"
}

# same_as_spm_encode MODEL: the ids of MODEL on lines.txt equal spm_encode's
same_as_spm_encode() {
	[ "$(stat -c %s "$DIR/lines.txt")" -gt 5000000 ]
	tr '\n' '\0' < "$DIR/lines.txt" | head -c -1 > "$BATS_TEST_TMPDIR/docs"
	spm_encode --model="$DIR/$1.model" --output_format=id < "$DIR/lines.txt" > "$BATS_TEST_TMPDIR/ref"
	"$T_BPE" encode --nul "sentencepiece:$DIR/$1.model" "$BATS_TEST_TMPDIR/docs" > "$BATS_TEST_TMPDIR/our"
	[ "$(wc -l < "$BATS_TEST_TMPDIR/our")" -eq "$(wc -l < "$DIR/lines.txt")" ]
	cmp "$BATS_TEST_TMPDIR/ref" "$BATS_TEST_TMPDIR/our"
}

@test "sentencepiece: ids equal spm_encode's on more than 5 MB (unigram model)" {
	same_as_spm_encode uni
}

@test "sentencepiece: ids equal spm_encode's on more than 5 MB (BPE model)" {
	same_as_spm_encode bpe
}

@test "sentencepiece: byte fallback covers text the model never saw, and decoding gives it back" {
	printf 'Ω≈ç√∫ 東京 😀 \xe1\x88\xb4 x' > "$BATS_TEST_TMPDIR/t.txt"
	"$T_BPE" encode "sentencepiece:$DIR/bpe.model" "$BATS_TEST_TMPDIR/t.txt" > "$BATS_TEST_TMPDIR/ids"
	spm_encode --model="$DIR/bpe.model" --output_format=id < "$BATS_TEST_TMPDIR/t.txt" |
		cmp - "$BATS_TEST_TMPDIR/ids"
	# no unknown id: everything fell back to bytes
	! grep -qw 0 "$BATS_TEST_TMPDIR/ids" || false
	"$T_BPE" decode "sentencepiece:$DIR/bpe.model" "$BATS_TEST_TMPDIR/ids" | tr -d '\0' |
		cmp - "$BATS_TEST_TMPDIR/t.txt"
}

@test "sentencepiece: through ovl-source, with the model's </s> and <s> by name" {
	printf '{"text": "Hello world"}\n{"text": "1234"}\n' > "$BATS_TEST_TMPDIR/d.jsonl"
	run -0 "$OVL_SOURCE" --json --tokenizer "sentencepiece:$DIR/uni.model" --bos-token '<s>' t "$BATS_TEST_TMPDIR/d.jsonl"
	want=$(printf 'Hello world\n' | spm_encode --model="$DIR/uni.model" --output_format=id | tr ' ' ,)
	[[ "${lines[0]}" == *"\"tokens\":[1,$want,2]"* ]]
	# split digits, as trained
	want=$(printf '1234\n' | spm_encode --model="$DIR/uni.model" --output_format=id | tr ' ' ,)
	[ "$(echo "$want" | tr , '\n' | wc -l)" -ge 4 ]
	[[ "${lines[1]}" == *"\"tokens\":[1,$want,2]"* ]]
	"$OVL_SOURCE" --tokenizer "sentencepiece:$DIR/uni.model" t "$BATS_TEST_TMPDIR/d.jsonl" > "$BATS_TEST_TMPDIR/f"
	grep -a -q 'tokenizer sentencepiece:[0-9a-f]\{16\}' "$BATS_TEST_TMPDIR/f"
	grep -a -q 'vocab 2000' "$BATS_TEST_TMPDIR/f"
	grep -a -q 'eod 2' "$BATS_TEST_TMPDIR/f"
}

@test "sentencepiece: a missing or bad model is an error naming the file, in ovl-mix --check too" {
	printf '{"text": "x"}\n' > "$BATS_TEST_TMPDIR/d.jsonl"
	run -2 "$OVL_SOURCE" --tokenizer "sentencepiece:$BATS_TEST_TMPDIR/none.model" t "$BATS_TEST_TMPDIR/d.jsonl"
	[[ "$output" == *"none.model: No such file or directory"* ]]
	head -c 1000 "$DIR/uni.model" > "$BATS_TEST_TMPDIR/cut.model"
	run -2 "$OVL_SOURCE" --tokenizer "sentencepiece:$BATS_TEST_TMPDIR/cut.model" t "$BATS_TEST_TMPDIR/d.jsonl"
	[[ "$output" == *"cut.model: not a SentencePiece model"* ]]
	printf 'source a path=d.jsonl tokenizer=sentencepiece:cut.model\n' > "$BATS_TEST_TMPDIR/p.plan"
	run -2 "$OVL_MIX" --check "$BATS_TEST_TMPDIR/p.plan"
	[[ "$output" == *"p.plan:1: source a: $BATS_TEST_TMPDIR/cut.model: not a SentencePiece model"* ]]
	run -2 "$OVL_SOURCE" --tokenizer "sentencepiece:$DIR/uni.model" --eod-token '<nope>' t "$BATS_TEST_TMPDIR/d.jsonl"
	[[ "$output" == *"unknown special token '<nope>'"* ]]
}
