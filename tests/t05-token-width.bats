#!/usr/bin/env bats
# Token widths (ovl-frame(5) minor 2): DOC and SEQ frames carry 16-bit ids
# where the vocabulary has at most 65,536 ids, 32-bit ones above, and a SEQ
# whose positions restart at every piece sends none. Every stage reads
# each layout, and the same data gives the same tokens at every stage and
# the same output files, whichever width crossed the pipes.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	W0=$SAMPLES/web/web-0.jsonl
	W1=$SAMPLES/web/web-1.jsonl
	B=$SAMPLES/books/book-00.txt
	cat > p.plan <<EOF
source web path=$W0 path=$W1
source books path=$B format=text doc-per=blank-line
ranks 2
seq-len 256
checkpoint every=4
EOF
}

# sources BITS: both sources' DOC streams with --token-bits BITS (web.BITS,
# books.BITS), and the mixed stream mix.BITS
sources() {
	"$OVL_SOURCE" --token-bits "$1" --id 0 web "$W0" "$W1" > "web.$1"
	"$OVL_SOURCE" --token-bits "$1" --id 1 --format text \
	    --doc-per blank-line books "$B" > "books.$1"
	"$OVL_MIX" p.plan "web=web.$1" "books=books.$1" > "mix.$1"
}

# frame_sizes FILE KIND: the payload sizes of FILE's frames of KIND
frame_sizes() {
	"$OVL_TEST_TOOL" frames "$1" | awk -v k="$2" '$3 == k { print $4 }'
}

@test "16-bit and 32-bit streams of the same data: the same tokens at every stage, the same files" {
	sources 16
	sources 32
	# the default for the bytes tokenizer (257 ids) is 16 bits
	"$OVL_SOURCE" --id 0 web "$W0" "$W1" > web.default
	cmp web.default web.16
	# half the bytes: 80 fixed bytes, then 2 instead of 4 per id
	[ "$(stat -c %s web.16)" -lt "$(stat -c %s web.32)" ]
	paste <(frame_sizes web.16 DOC) <(frame_sizes web.32 DOC) |
	    awk '{ n = ($2 - 80) / 4; want = 80 + 2 * n + (n % 2 ? 2 : 0)
		   if ($1 != want) { print "DOC of " n " ids: " $1 " bytes"; bad = 1 } }
		 END { exit bad }'
	# sources and mixer: the same documents, ids and cursors
	"$OVL_TEST_TOOL" dump web.16 | sed 's/ hash=.*//' > d16
	"$OVL_TEST_TOOL" dump web.32 | sed 's/ hash=.*//' > d32
	cmp d16 d32
	"$OVL_MIX" --json p.plan web=web.16 books=books.16 > j16
	"$OVL_MIX" --json p.plan web=web.32 books=books.32 > j32
	cmp j16 j32
	grep -q '"tokens":\[' j16
	# the constructor writes the same frames from either
	"$OVL_CONSTRUCT" p.plan < mix.16 > c.16
	"$OVL_CONSTRUCT" p.plan < mix.32 > c.16b
	cmp c.16 c.16b
	"$OVL_CONSTRUCT" --json p.plan < mix.16 > cj16
	"$OVL_CONSTRUCT" --json p.plan < mix.32 > cj32
	cmp cj16 cj32
	# and, asked for minor 1's layout, 32-bit tokens and positions
	"$OVL_CONSTRUCT" --token-bits 32 p.plan < mix.16 > c.32
	[ "$(stat -c %s c.16)" -lt "$(stat -c %s c.32)" ]
	# the sink: the same sequences, and byte-identical files
	"$OVL_CKPT" --json --dir ck.j16 p.plan < c.16 > kj16
	"$OVL_CKPT" --json --dir ck.j32 p.plan < c.32 > kj32
	cmp kj16 kj32
	grep -q '"positions":\[0,1,2' kj16
	local fmt f
	for fmt in megatron npy jsonl; do
		"$OVL_CKPT" --dir "ck.$fmt.16" -f "$fmt" -o "o16/$fmt" p.plan < c.16
		"$OVL_CKPT" --dir "ck.$fmt.32" -f "$fmt" -o "o32/$fmt" p.plan < c.32
	done
	[ -s o16/megatron.bin ] && [ -s o16/npy.tokens.npy ] && [ -s o16/jsonl.jsonl ]
	for f in o16/*; do
		cmp "$f" "o32/${f#o16/}"
	done
	# per-rank frame streams pass the SEQs on as they are: 16-bit and smaller
	"$OVL_CKPT" --dir ck.p16 -p r16.%d p.plan < c.16
	"$OVL_CKPT" --dir ck.p32 -p r32.%d p.plan < c.32
	[ "$(stat -c %s r16.0)" -lt "$(stat -c %s r32.0)" ]
	# the sample reader (numpy) reads both layouts the same
	local py
	if py=$(ovl_python_numpy); then
		"$py" "$OVL_SRCDIR/samples/reader.py" --tokens frames r16.0 > rd16
		"$py" "$OVL_SRCDIR/samples/reader.py" --tokens frames r32.0 > rd32
		[ -s rd16 ]
		cmp rd16 rd32
	fi
}

@test "a vocabulary of 65,536 ids is 16-bit, one of 65,537 stays 32-bit" {
	local i v n
	{
		for ((i = 0; i < 256; i++)); do
			printf "$(printf '\\%03o' "$i")" | base64 | tr -d '\n'
			echo " $i"
		done
	} > base.tiktoken
	# the highest rank makes the size (r50k's <|endoftext|> is 50256)
	{ cat base.tiktoken; echo "$(printf xyz | base64) 65535"; } > v65536.tiktoken
	{ cat base.tiktoken; echo "$(printf xyz | base64) 65536"; } > v65537.tiktoken
	printf 'hello xyz world\n' > in.txt	# 15 ids and the end token
	for v in 65536 65537; do
		"$OVL_SOURCE" --tokenizer "tiktoken:$PWD/v$v.tiktoken:r50k" t in.txt > "s$v"
		"$OVL_SOURCE" --tokenizer "tiktoken:$PWD/v$v.tiktoken:r50k" --json \
		    t in.txt > "j$v"
		grep -q "^vocab $v\$" <("$OVL_TEST_TOOL" dump "s$v" | head -n 1 | tr '|' '\n')
	done
	cmp j65536 j65537
	# 16 ids: 80 + 32 bytes at 16 bits, 80 + 64 at 32
	[ "$(frame_sizes s65536 DOC)" = 112 ]
	[ "$(frame_sizes s65537 DOC)" = 144 ]
	run -2 --separate-stderr "$OVL_SOURCE" --token-bits 16 \
	    --tokenizer "tiktoken:$PWD/v65537.tiktoken:r50k" t in.txt
	[[ "$stderr" == *"--token-bits 16"*"65537 ids"* ]]
	# the constructor follows the stream's vocab: a SEQ of 16 tokens with
	# no position array is 32 + 32 + 8 + 40 bytes at 16 bits, 32 + 64 +
	# 8 + 40 at 32
	for v in 65536 65537; do
		printf 'source t path=in.txt format=text\nseq-len 64\n' > "v$v.plan"
		"$OVL_MIX" "v$v.plan" "t=s$v" | "$OVL_CONSTRUCT" "v$v.plan" > "c$v"
	done
	[ "$(frame_sizes c65536 SEQ)" = 112 ]
	[ "$(frame_sizes c65537 SEQ)" = 144 ]
	cmp <("$OVL_CONSTRUCT" --json v65536.plan < <("$OVL_MIX" v65536.plan t=s65536) |
	    grep '"seq"') \
	    <("$OVL_CONSTRUCT" --json v65537.plan < <("$OVL_MIX" v65537.plan t=s65537) |
	    grep '"seq"')
}

@test "a SEQ flag no reader knows is a malformed frame (status 3), never misread" {
	sources 16
	"$OVL_CONSTRUCT" p.plan < mix.16 > c.16
	# the first SEQ's header flags byte set to a bit no reader knows, the
	# CRC resealed by poke: a malformed payload (status 3), not misread
	local idx
	idx=$("$OVL_TEST_TOOL" frames c.16 | awk '$3 == "SEQ" { print $1; exit }')
	cp c.16 bad.fr
	"$OVL_TEST_TOOL" poke bad.fr "$idx" flags 8
	run -3 --separate-stderr "$OVL_CKPT" --dir ck p.plan --input bad.fr
	[[ "$stderr" == *"byte offset"* ]]
}

@test "an id over 16 bits in a stream of a small vocabulary: status 1, never cut to 16 bits" {
	sources 32
	# the first DOC's first id (payload offset 80) set to 70000, CRC resealed
	local idx
	idx=$("$OVL_TEST_TOOL" frames mix.32 | awk '$3 == "DOC" { print $1; exit }')
	cp mix.32 big.fr
	"$OVL_TEST_TOOL" poke big.fr "$idx" 80 70000
	run -1 --separate-stderr "$OVL_CONSTRUCT" p.plan --input big.fr
	[[ "$stderr" == *"token id 70000, not below the stream's vocabulary"* ]]
	# asked for 32-bit output, it passes on as before
	run -0 "$OVL_CONSTRUCT" --token-bits 32 p.plan --input big.fr --output out.fr
}
