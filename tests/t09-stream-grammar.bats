#!/usr/bin/env bats
# The stream grammar lives in the reader (src/lib/frameio.c): every stage
# declares what it reads and gets the same errors, status 3 and the byte
# offset, for frames whose CRC holds but which break the grammar.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	printf 'source web path=%s\nranks 2\nseq-len 256\n' \
	    "$SAMPLES/web/web-0.jsonl" > p.plan
	"$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" > s.fr
	"$OVL_MIX" p.plan web=s.fr > m.fr
	"$OVL_CONSTRUCT" p.plan < m.fr > c.fr
}

# stage NAME FILE: run the stage that reads FILE's kind of stream
stage() {
	case $1 in
	mix) "$OVL_MIX" p.plan web="$2" ;;
	construct) "$OVL_CONSTRUCT" p.plan < "$2" ;;
	ckpt) "$OVL_CKPT" --dir "ck.$RANDOM$RANDOM" < "$2" ;;
	esac
}

@test "an unknown frame kind is an error in a stream of this version, and skipped (counted) in a newer one" {
	local st f off1 off2 n
	for st in mix:s.fr construct:m.fr ckpt:c.fr; do
		f=${st#*:}
		"$OVL_TEST_TOOL" frames "$f" > frames.txt
		off1=$(sed -n 2p frames.txt | cut -d' ' -f2)
		off2=$(sed -n 3p frames.txt | cut -d' ' -f2)
		n=$(wc -l < frames.txt)		# frames, END included
		# a copy of frame 1 inserted after it, as kind 9; END counts it
		{ head -c "$off2" "$f"; tail -c +$((off1 + 1)) "$f" |
		    head -c $((off2 - off1)); tail -c +$((off2 + 1)) "$f"; } > unknown.fr
		"$OVL_TEST_TOOL" poke unknown.fr 2 kind 9
		"$OVL_TEST_TOOL" poke unknown.fr "$n" 0 "$n"
		run -3 --separate-stderr stage "${st%%:*}" unknown.fr
		[[ "$stderr" == *"unknown frame kind 9 (stream version 1.2) at byte offset $off2" ]]
		# in a stream of minor version 3 it is an addition this reader
		# may skip: the output is the output without it
		stage "${st%%:*}" "$f" > want.out
		cp unknown.fr newer.fr
		"$OVL_TEST_TOOL" minor newer.fr 3
		stage "${st%%:*}" newer.fr > got.out
		cmp got.out want.out
	done
}

@test "every stage wants exactly one META, first; an END before it is an error too" {
	local st f meta_end
	for st in mix:s.fr construct:m.fr ckpt:c.fr; do
		f=${st#*:}
		meta_end=$("$OVL_TEST_TOOL" frames "$f" | sed -n 2p | cut -d' ' -f2)
		{ head -c 16 "$f"; tail -c +$((meta_end + 1)) "$f"; } > nometa.fr
		"$OVL_TEST_TOOL" frames nometa.fr > /dev/null
		run -3 --separate-stderr stage "${st%%:*}" nometa.fr
		[[ "$stderr" == *"the stream does not begin with META ("*" first) at byte offset 16" ]]
		{ head -c "$meta_end" "$f"; tail -c +17 "$f"; } > twometa.fr
		run -3 --separate-stderr stage "${st%%:*}" twometa.fr
		[[ "$stderr" == *"a second META at byte offset $meta_end" ]]
	done
}

@test "the META keys a stage needs: vocab and eod below it for ovl-mix and ovl-construct, vocab for ovl-ckpt" {
	local st f at
	for st in mix:s.fr:eod construct:m.fr:eod construct:m.fr:vocab ckpt:c.fr:vocab; do
		IFS=: read -r name f key <<< "$st"
		cp "$f" bad.fr
		# rename the key ("eod " -> "xod ") in the META text (payload at 28)
		at=$(grep -abo "$key " bad.fr | head -1 | cut -d: -f1)
		"$OVL_TEST_TOOL" poke bad.fr 0 $((at - 28)) \
		    "$(printf 'x%s' "${key:1:3}" | od -An -tu4 | tr -d ' ')"
		run -3 --separate-stderr stage "$name" bad.fr
		[[ "$stderr" == *"META has no $key at byte offset 16" ]]
	done
	# ovl-ckpt does not need an eod
	cp c.fr noeod.fr
	at=$(grep -abo "eod " noeod.fr | head -1 | cut -d: -f1)
	"$OVL_TEST_TOOL" poke noeod.fr 0 $((at - 28)) "$(printf 'xod ' | od -An -tu4 | tr -d ' ')"
	run -0 stage ckpt noeod.fr
}

@test "a document's cursor must lie inside its source: chunk below the chunk count (the payload decodes), the next record after it" {
	# DOC payload: u32 chunk at 12, u32 nchunks at 16, u64 next_rec at 40
	cp s.fr chunk.fr
	"$OVL_TEST_TOOL" poke chunk.fr 1 12 7
	off=$("$OVL_TEST_TOOL" frames chunk.fr | sed -n 2p | cut -d' ' -f2)
	run -3 --separate-stderr stage mix chunk.fr
	[[ "$stderr" == *"'chunk.fr': malformed DOC at byte offset $off" ]]
	cp s.fr rec.fr
	"$OVL_TEST_TOOL" poke rec.fr 1 40 5
	run -3 --separate-stderr stage mix rec.fr
	[[ "$stderr" == *"'rec.fr': DOC of record 0 at byte 0 with the cursor after it at record 5, byte "*" at byte offset $off" ]]
	# the same checks guard ovl-construct's input
	cp m.fr mchunk.fr
	"$OVL_TEST_TOOL" poke mchunk.fr 1 12 7
	run -3 --separate-stderr stage construct mchunk.fr
	[[ "$stderr" == *"'standard input': malformed DOC at byte offset "* ]]
}

@test "each stage refuses the kinds of another stage's stream" {
	run -3 --separate-stderr stage mix c.fr
	[[ "$stderr" == *"unexpected SEQ frame in a source stream at byte offset "* ]]
	run -3 --separate-stderr stage construct c.fr
	[[ "$stderr" == *"unexpected SEQ frame in a stream of documents at byte offset "* ]]
	run -3 --separate-stderr stage ckpt m.fr
	[[ "$stderr" == *"unexpected DOC frame in a stream of sequences at byte offset "* ]]
}
