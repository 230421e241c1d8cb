#!/usr/bin/env bats
# hf: tokenizers from small tokenizer.json files made here: the merge
# order, added tokens and the special-token policies, what is refused
# (each unsupported component named), bad files and bad text. The
# conformance with HF's own implementation on real models is t73.

load test_helper

T_BPE="$OVL_BUILDDIR/tests/unit/t-bpe"

# mk NAME [PYTHON-EDIT]: a byte-level BPE tokenizer.json at $D/NAME.json,
# edited by the python statements given (j is the JSON object).
mk() {
	python3 - "$D/$1.json" "${2:-pass}" <<'ZZEND'
import json, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs = bs[:]
n = 0
for b in range(256):
	if b not in bs:
		bs.append(b); cs.append(256 + n); n += 1
m = {b: chr(c) for b, c in zip(bs, cs)}
vocab = {m[b]: b for b in range(256)}
merges = []
def merge(a, b):
	merges.append(f'{a} {b}')
	vocab.setdefault(a + b, len(vocab))
# "ab" can come from a+b, and "abc" from ab+c or a+bc: the merge order
# decides, not the id order.
merge('b', 'c'); merge('a', 'b'); merge('ab', 'c'); merge('a', 'bc')
merge(m[32], 'a'); merge(m[32] + 'a', 'bc')
j = {
	'version': '1.0', 'truncation': None, 'padding': None,
	'added_tokens': [
		{'id': 300, 'content': '<|fin|>', 'single_word': False, 'lstrip': False,
		 'rstrip': False, 'normalized': False, 'special': True},
		{'id': 301, 'content': '<tool>', 'single_word': False, 'lstrip': False,
		 'rstrip': False, 'normalized': False, 'special': False}],
	'normalizer': None,
	'pre_tokenizer': {'type': 'ByteLevel', 'add_prefix_space': False,
		'trim_offsets': True, 'use_regex': True},
	'post_processor': None,
	'decoder': {'type': 'ByteLevel', 'add_prefix_space': True, 'trim_offsets': True,
		'use_regex': True},
	'model': {'type': 'BPE', 'dropout': None, 'unk_token': None,
		'continuing_subword_prefix': None, 'end_of_word_suffix': None,
		'fuse_unk': False, 'byte_fallback': False, 'vocab': vocab, 'merges': merges}}
exec(sys.argv[2])
json.dump(j, open(sys.argv[1], 'w'))
ZZEND
}

setup() {
	D=$BATS_TEST_TMPDIR
	mk tiny
}

enc() {	# enc SPEC-FILE TEXT [POLICY]: the ids of TEXT
	printf '%s' "$2" > "$D/in.txt"
	"$T_BPE" encode --special="${3:-plain}" "hf:$1" "$D/in.txt"
}

@test "hf: merges apply in the file's order, and a pair's rank, not its id, decides" {
	# ids: bc 256, ab 257, abc 258, " a" 259, " abc" 260
	run -0 enc "$D/tiny.json" "abc"
	[ "$output" = "258" ]
	# b+c (rank 0) before a+b (rank 1); then a+bc (rank 3) before
	# " "+a (rank 4), so " abc" (260) is never reached
	run -0 enc "$D/tiny.json" " abc"
	[ "$output" = "32 258" ]
	run -0 enc "$D/tiny.json" " ab"
	[ "$output" = "32 257" ]
	run -0 enc "$D/tiny.json" " a"
	[ "$output" = "259" ]
}

@test "hf: added tokens are split out; special ones follow the policy" {
	run -0 enc "$D/tiny.json" "a<tool>b"
	[ "$output" = "97 301 98" ]
	run -0 enc "$D/tiny.json" "a<|fin|>b" allow
	[ "$output" = "97 300 98" ]
	run -0 enc "$D/tiny.json" "a<|fin|>b" strip
	[ "$output" = "97 98" ]
	run -0 enc "$D/tiny.json" "a<|fin|>b" plain
	[ "$(echo "$output" | wc -w)" -gt 3 ]
	[[ "$output" != *300* ]]
	run -1 enc "$D/tiny.json" "a<|fin|>b" error
	[[ "$output" == *"special token text '<|fin|>' at byte 1"* ]]
}

@test "hf: invalid UTF-8 is refused at its byte offset, through ovl-source too" {
	printf 'ok \xe2\x82 x' > "$D/bad.txt"
	run -1 "$T_BPE" encode "hf:$D/tiny.json" "$D/bad.txt"
	[[ "$output" == *"invalid UTF-8 at byte 3"* ]]
	printf '{"text": "ok"}\n{"text": "a\\udc80"}\n' > "$D/bad.jsonl"
	run -1 "$OVL_SOURCE" --tokenizer "hf:$D/tiny.json" --eod-token '<|fin|>' t "$D/bad.jsonl"
	[[ "$output" == *"bad.jsonl"* ]]
	run -0 "$OVL_SOURCE" --tokenizer "hf:$D/tiny.json" --eod-token '<|fin|>' --on-error skip \
		--json t "$D/bad.jsonl"
	[ "$(echo "$output" | grep -c '"tokens"')" -eq 1 ]
}

@test "hf: every unsupported component is an error naming it" {
	mk n1 "j['normalizer'] = {'type': 'BertNormalizer'}"
	mk n2 "j['normalizer'] = {'type': 'Replace', 'pattern': {'Regex': ' +'}, 'content': ' '}"
	mk p1 "j['pre_tokenizer'] = {'type': 'Punctuation'}"
	mk p2 "j['pre_tokenizer'] = {'type': 'Split', 'pattern': {'String': 'x'}, 'behavior': 'Sideways'}"
	mk m1 "j['model']['type'] = 'WordPiece'"
	mk m2 "j['model']['continuing_subword_prefix'] = '##'"
	mk m3 "j['model']['dropout'] = 0.1"
	mk a1 "j['added_tokens'][0]['lstrip'] = True"
	mk r1 "j['pre_tokenizer'] = {'type': 'Split', 'pattern': {'Regex': '(unclosed'}, 'behavior': 'Isolated'}"
	for x in "n1:normalizer 'BertNormalizer' is not supported" \
		"n2:normalizer Replace with pattern 'Regex' is not supported" \
		"p1:pre-tokenizer 'Punctuation' is not supported" \
		"p2:Split behavior 'Sideways' is not supported" \
		"m1:model 'WordPiece' is not supported" \
		"m2:BPE continuing_subword_prefix '##' is not supported" \
		"m3:BPE dropout is not supported" \
		"a1:added token '<|fin|>': lstrip is not supported" \
		"r1:pre-tokenizer Split: regex:"; do
		run -2 "$OVL_SOURCE" --tokenizer "hf:$D/${x%%:*}.json" t "$D/tiny.json"
		[[ "$output" == *"$D/${x%%:*}.json: ${x#*:}"* ]]
	done
}

@test "hf: a bad file names itself and the line; the plan check reports it at the source's line" {
	printf '{\n  "model": {\n    "type": "BPE",\n    oops\n' > "$D/broken.json"
	run -2 "$OVL_SOURCE" --tokenizer "hf:$D/broken.json" t "$D/tiny.json"
	[[ "$output" == *"broken.json: line 4, column"* ]]
	printf '[1, 2]' > "$D/array.json"
	run -2 "$OVL_SOURCE" --tokenizer "hf:$D/array.json" t "$D/tiny.json"
	[[ "$output" == *"not a tokenizer.json"* ]]
	printf '{"text": "x"}\n' > "$D/d.jsonl"
	printf 'tokenizer hf:tiny.json\neod-token <|fin|>\nsource a path=d.jsonl\nsource b path=d.jsonl tokenizer=hf:broken.json\n' > "$D/p.plan"
	run -2 "$OVL_MIX" --check "$D/p.plan"
	[[ "$output" == *"p.plan:4: source b: $D/broken.json: line 4"* ]]
	# a tokenizer.json of an unknown model has no usual end of text
	printf 'tokenizer hf:tiny.json\nsource a path=d.jsonl\n' > "$D/q.plan"
	run -2 "$OVL_MIX" --check "$D/q.plan"
	[[ "$output" == *"q.plan:2: source a: tokenizer hf:$D/tiny.json has no usual end-of-document token: name one with eod-token="* ]]
	run -2 "$OVL_SOURCE" --tokenizer "hf:$D/tiny.json" t "$D/d.jsonl"
	[[ "$output" == *"name one with --eod-token"* ]]
	# relative to the plan's directory, and loaded: the check passes
	printf 'tokenizer hf:tiny.json\neod-token <|fin|>\nbos-token 301\nsource a path=d.jsonl\n' > "$D/ok.plan"
	run -0 "$OVL_MIX" --check "$D/ok.plan"
	[[ "$output" == *"tokenizer hf:$D/tiny.json"* ]]
	[[ "$output" == *"bos-token 301"* ]]
}

@test "hf: ovl-source records the tokenizer's name (the file's hash), vocabulary, end and beginning" {
	printf '{"text": "abc"}\n' > "$D/d.jsonl"
	"$OVL_SOURCE" --tokenizer "hf:$D/tiny.json" --eod-token '<|fin|>' --bos-token 301 t "$D/d.jsonl" > "$D/out"
	grep -a -q "tokenizer hf:[0-9a-f]\{16\}" "$D/out"
	grep -a -q "vocab 302" "$D/out"
	grep -a -q "eod 300" "$D/out"
	grep -a -q "bos 301" "$D/out"
	cp "$D/tiny.json" "$D/copy.json"
	"$OVL_SOURCE" --tokenizer "hf:$D/copy.json" --eod-token '<|fin|>' t "$D/d.jsonl" > "$D/out2"
	[ "$(grep -a -o 'tokenizer hf:[0-9a-f]*' "$D/out")" = "$(grep -a -o 'tokenizer hf:[0-9a-f]*' "$D/out2")" ]
	mk other "merge('c', 'a')"
	"$OVL_SOURCE" --tokenizer "hf:$D/other.json" --eod-token '<|fin|>' t "$D/d.jsonl" > "$D/out3"
	[ "$(grep -a -o 'tokenizer hf:[0-9a-f]*' "$D/out")" != "$(grep -a -o 'tokenizer hf:[0-9a-f]*' "$D/out3")" ]
}

@test "hf: the post_processor's template gives a document's first token, as HF's encode(add_special_tokens=True); bos-token, add-special-tokens no and pre-tokenized ids as they say" {
	local st="{'id': '<tool>', 'ids': [301], 'tokens': ['<tool>']}"
	local a="{'Sequence': {'id': 'A', 'type_id': 0}}" t="{'SpecialToken': {'id': '<tool>', 'type_id': 0}}"
	mk tpl "j['post_processor'] = {'type': 'Sequence', 'processors': [{'type': 'ByteLevel'}, {'type': 'TemplateProcessing', 'single': [$t, $a], 'pair': [], 'special_tokens': {'<tool>': $st}}]}"
	mk two "j['post_processor'] = {'type': 'TemplateProcessing', 'single': [$t, $t, $a], 'pair': [], 'special_tokens': {'<tool>': $st}}"
	mk bert "j['post_processor'] = {'type': 'BertProcessing', 'cls': ['<tool>', 301], 'sep': ['<|fin|>', 300]}"
	mk sep "j['post_processor'] = {'type': 'RobertaProcessing', 'cls': ['<tool>', 301], 'sep': ['x', 120], 'trim_offsets': True, 'add_prefix_space': False}"
	mk foo "j['post_processor'] = {'type': 'Foo'}"
	mk big "j['post_processor'] = {'type': 'BertProcessing', 'cls': ['<tool>', 301], 'sep': ['x', 302]}"
	printf '{"text": "abc", "ids": [97, 98]}\n' > "$D/d.jsonl"
	src() { run -0 "$OVL_SOURCE" --json --eod-token '<|fin|>' "$@" t "$D/d.jsonl"; }
	src --tokenizer "hf:$D/tpl.json"
	[[ "$output" == *'"tokens":[301,258,300]'* ]]
	src --tokenizer "hf:$D/bert.json"
	[[ "$output" == *'"tokens":[301,258,300]'* ]]
	src --tokenizer "hf:$D/tpl.json" --add-special-tokens no
	[[ "$output" == *'"tokens":[258,300]'* ]]
	src --tokenizer "hf:$D/tpl.json" --bos-token '<|fin|>'
	[[ "$output" == *'"tokens":[300,258,300]'* ]]
	src --tokenizer "hf:$D/two.json" --bos-token 301
	[[ "$output" == *'"tokens":[301,258,300]'* ]]
	# ids come as they are: a template is for text
	src --tokenizer "hf:$D/tpl.json" --field ids --field-type ids
	[[ "$output" == *'"tokens":[97,98,300]'* ]]
	run -0 "$OVL_BUILDDIR/ovl-tok" -t "hf:$D/tpl.json" info
	[[ "$output" == *"bos 301"* ]]
	# what a document cannot become is refused, naming the way out
	run -2 "$OVL_SOURCE" --eod-token '<|fin|>' --tokenizer "hf:$D/two.json" t "$D/d.jsonl"
	[[ "$output" == *"puts 2 tokens before a document, where one goes: name it with bos-token, or set add-special-tokens no"* ]]
	run -2 "$OVL_SOURCE" --eod-token '<|fin|>' --tokenizer "hf:$D/sep.json" t "$D/d.jsonl"
	[[ "$output" == *"puts token 120 after a document, not the end-of-document token 300"* ]]
	run -0 "$OVL_SOURCE" --eod-token '<|fin|>' --add-special-tokens no --tokenizer "hf:$D/sep.json" t "$D/d.jsonl"
	run -2 "$OVL_SOURCE" --eod-token '<|fin|>' --tokenizer "hf:$D/foo.json" t "$D/d.jsonl"
	[[ "$output" == *"foo.json: post_processor: type 'Foo' is not supported"* ]]
	run -2 "$OVL_SOURCE" --eod-token '<|fin|>' --tokenizer "hf:$D/big.json" t "$D/d.jsonl"
	[[ "$output" == *"big.json: post_processor: sep id 302 is not below the vocabulary size 302"* ]]
	run -2 "$OVL_SOURCE" --add-special-tokens maybe --tokenizer "hf:$D/tpl.json" t "$D/d.jsonl"
	# the plan: the check at the source's line; the key per source and plan-wide
	printf 'eod-token <|fin|>\nsource a path=d.jsonl tokenizer=hf:tpl.json\nsource b path=d.jsonl tokenizer=hf:two.json\n' > "$D/p.plan"
	run -2 "$OVL_MIX" --check "$D/p.plan"
	[[ "$output" == *"p.plan:3: source b: the post_processor of tokenizer hf:"*"puts 2 tokens before a document"* ]]
	printf 'eod-token <|fin|>\nadd-special-tokens no\nsource a path=d.jsonl tokenizer=hf:two.json\nsource b path=d.jsonl tokenizer=hf:two.json add-special-tokens=no\n' > "$D/q.plan"
	run -0 "$OVL_MIX" --check "$D/q.plan"
	[[ "$output" == *"add-special-tokens no"* ]]
	run -0 "$OVL_MIX" --source-args b "$D/q.plan"
	[[ "$output" == *"--add-special-tokens"* ]]
}
