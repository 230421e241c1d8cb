#!/usr/bin/env bats
# Local inputs that change under a run (src/lib/input.c, lib/chunk.h): a
# file is read as it was when its chunks were listed, or the run fails
# naming the file, the byte offset and what changed (exit 1); never short
# or spliced output with exit 0. Each run writes to a FIFO the test reads:
# it blocks there (a 1 MiB pipe) well before its input's end, and the test
# changes the file then.

load test_helper
load ckpt/pipeline

setup() {
	T=$BATS_TEST_TMPDIR
	# 20000 documents, 960 KB: their JSON lines are far more than the pipe
	awk 'BEGIN { for (i = 1; i <= 20000; i++)
	    printf "{\"text\":\"version 1 document %05d, some words\"}\n", i }' \
	    > "$T/a.jsonl"
	sed 's/version 1/version 2/' "$T/a.jsonl" > "$T/b.jsonl"
	mkfifo "$T/gate"
}

# changed_run CHANGE ARGS...: start ovl-source ARGS on a.jsonl, read its
# first line, run CHANGE, read the rest; status and stderr of the source
# in $T/rc and $T/err, the lines after the first in $T/out
changed_run() {
	local change=$1 pid
	shift
	"$OVL_SOURCE" --json --text "$@" x "$T/a.jsonl" --output "$T/gate" \
	    2> "$T/err" 3>&- &
	pid=$!
	exec 4< "$T/gate"
	read -r first <&4
	[[ $first == *'"text":"version 1 document 00001, some words"'* ]]
	eval "$change"
	cat <&4 > "$T/out"
	exec 4<&-
	wait "$pid" && echo 0 > "$T/rc" || echo $? > "$T/rc"
}

@test "input-changed: a text file cut while it is read is an error naming it, the offset and the sizes, not short output" {
	changed_run 'truncate -s 1000 "$T/a.jsonl"'
	[ "$(cat "$T/rc")" = 1 ]
	grep -q "^ovl-source: '$T/a.jsonl': .*the file shrank from 960000 to 1000 bytes under the run (at byte offset [0-9]*)" "$T/err"
}

@test "input-changed: a file rewritten in place (same size) is an error, not the new text spliced in" {
	changed_run 'dd if="$T/b.jsonl" of="$T/a.jsonl" conv=notrunc status=none'
	[ "$(cat "$T/rc")" = 1 ]
	grep -q "'$T/a.jsonl': .*the file was modified (its mtime changed) under the run" "$T/err"
	! grep -q "version 2" "$T/out"
}

@test "input-changed: a file replaced between its chunks is an error at the next chunk's open, not another file's documents" {
	changed_run 'mv "$T/b.jsonl" "$T/a.jsonl"' --chunk-size 64K
	[ "$(cat "$T/rc")" = 1 ]
	grep -q "'$T/a.jsonl': the file was replaced (another file, inode [0-9]*, now [0-9]*) under the run (at byte offset [0-9]*)" "$T/err"
	! grep -q "version 2" "$T/out"
}

log_past_header() { [ "$(stat -c %s ck/ckpt.log 2>/dev/null || echo 0)" -gt 16 ]; }

@test "input-changed: a resume over a file changed since the run began stops in ovl-ckpt, naming the file (exit 1)" {
	cd "$T"
	cp "$SAMPLES/web/web-0.jsonl" web.jsonl
	# throttled: the run cannot end before the first checkpoint is in
	printf '%s\n' "source web path=$T/web.jsonl format=jsonl on-exhaust=repeat throttle=100K" \
	    'seq-len 256' 'ranks 2' 'checkpoint every=16' 'stop tokens=1M' > p.plan
	pl_start p.plan ck "" --per-rank out/rank%d
	wait_until 120 log_past_header
	pl_kill ckpt TERM
	pl_wait
	[ "${PL_RC[ckpt]}" -eq 143 ]
	grep -q "^source.web.file.0 $(stat -c %s web.jsonl) m\..* $T/web.jsonl\$" ck/inputs
	# the same size, another byte (in a document's id)
	printf X | dd of=web.jsonl bs=1 seek=8 conv=notrunc status=none
	run -0 pl_restore ck resume.lines
	pl_start p.plan ck resume.lines --per-rank out/rank%d
	pl_wait
	[ "${PL_RC[ckpt]}" -eq 1 ]
	grep -q "ovl-ckpt: input '$T/web.jsonl' changed since the run began (size and version $(stat -c %s web.jsonl) m\..*, now $(stat -c %s web.jsonl) m\..*): a resume would join two versions of it" ckpt.err
}

@test "input-changed: a resume with a tokenizer file whose merges swapped ranks stops in ovl-ckpt (exit 1); the same bytes again resume byte-identical" {
	cd "$T"
	cp "$SAMPLES/tokenizers/sample.tiktoken" tok.tiktoken
	cp tok.tiktoken tok.orig
	local src="source web path=$SAMPLES/web/web-0.jsonl format=jsonl tokenizer=tiktoken:$T/tok.tiktoken:cl100k on-exhaust=repeat"
	printf '%s\n' 'seq-len 256' 'ranks 2' 'checkpoint every=4' 'stop tokens=200K' > common
	{ echo "$src"; cat common; } > fast.plan
	# the same plan, throttled: it cannot end (some 6 s) before the signal
	{ echo "$src throttle=100K"; cat common; } > slow.plan
	mkdir ref
	(cd ref && pl_start ../fast.plan ck "" --per-rank out/rank%d && pl_wait && pl_all_ok)
	pl_start slow.plan ck "" --per-rank out/rank%d
	wait_until 120 log_past_header
	pl_kill ckpt TERM
	pl_wait
	[ "${PL_RC[ckpt]}" -eq 143 ]
	grep -q "^source.web.tokenizer-file 24918 xxh64\.[0-9a-f]\{16\} $T/tok.tiktoken\$" ck/inputs
	# the merges of ranks 256 and 257 trade places: the same size
	sed -i -e 's/^c3Q= 256$/c3Q= 257/' -e 's/^ZWE= 257$/ZWE= 256/' tok.tiktoken
	! cmp -s tok.tiktoken tok.orig
	run -0 pl_restore ck resume.lines
	pl_start fast.plan ck resume.lines --per-rank out/rank%d
	pl_wait
	[ "${PL_RC[ckpt]}" -eq 1 ]
	grep -q "ovl-ckpt: tokenizer file '$T/tok.tiktoken' changed since the run began (size and content hash 24918 xxh64\.[0-9a-f]*, now 24918 xxh64\.[0-9a-f]*; '$T/ck/inputs'): a resume would mix two tokenizations" ckpt.err
	# the same content again (a new mtime): the resume goes on, exact
	cp tok.orig tok.tiktoken
	run -0 pl_restore ck resume.lines
	pl_start fast.plan ck resume.lines --per-rank out/rank%d
	pl_wait
	pl_all_ok
	same_as_reference
}
