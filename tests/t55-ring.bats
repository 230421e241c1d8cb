#!/usr/bin/env bats
# The ring transport (ovl-run --transport ring, plan key transport,
# OVL_TRANSPORT=ring; src/lib/ring.h): the same bytes as FIFOs, exact
# resume after a kill of any stage or of the supervisor, a writer whose
# reader died ends (no hang), a reader whose writer died says where, and the
# stream's errors keep their byte offsets.

load test_helper

# the uninterrupted run of small_plan over FIFOs, once for the file's
# tests: $BATS_FILE_TMPDIR/ref.jsonl (a throttle changes no byte)
setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	small_plan p.plan
	"$OVL_RUN" -q -d run --transport fifo p.plan 3>&- || return 1
	mv out/small.jsonl ref.jsonl
	rm -rf ckpt out run
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	# every ovl-run of this test notes its pid (its ring directory is
	# /dev/shm/ovl-run-rings.PID; other tests' runs make theirs beside)
	printf '#!/bin/sh\necho $$ >> "%s/ovl-run.pids"\nexec "%s" "$@"\n' \
	    "$BATS_TEST_TMPDIR" "$OVL_RUN" > ovl-run-noted
	chmod +x ovl-run-noted
	OVL_RUN=$BATS_TEST_TMPDIR/ovl-run-noted
}

# no_rings DIR: no ring file left in DIR, and no ring directory of an
# ovl-run of this test that is gone
no_rings() {
	local f
	for f in "$1"/ovl-ring.* /dev/shm/ovl-run-rings.*; do
		[ -e "$f" ] || continue
		case $f in
		/dev/shm/*)
			grep -qxF -- "${f##*.}" "$BATS_TEST_TMPDIR/ovl-run.pids" 2>/dev/null ||
			    continue
			kill -0 "${f##*.}" 2>/dev/null && continue ;;
		esac
		echo "left behind: $f"
		return 1
	done
}

@test "ovl-run: rings by default, or as --transport, the plan key and OVL_TRANSPORT say: the same bytes as fifo on the samples' plans, no ring left" {
	for pl in small mix vlm; do
		for t in fifo ring; do
			rm -rf "c-$t" "o-$t" "run-$t"
			run -0 "$OVL_RUN" -q -d "run-$t" --transport "$t" -c "c-$t" \
			    -o "o-$t/out" "$SAMPLES/plans/$pl.plan"
		done
		diff -r o-fifo o-ring
		[ -n "$(ls o-ring)" ]
		no_rings run-ring
	done
	# the plan key: rings (a bad ring size fails the run), the same bytes
	small_plan p.plan
	cp "$BATS_FILE_TMPDIR/ref.jsonl" ref.jsonl
	# no key, no option: rings, ovl-run's default (a bad ring size fails
	# the run); OVL_TRANSPORT=fifo: the FIFOs alone
	OVL_RING_SIZE=1 run -2 "$OVL_RUN" -q -d run --restart 0 p.plan
	[[ "$output" == *"bad OVL_RING_SIZE '1'"* ]]
	rm -rf ckpt out
	OVL_RING_SIZE=1 OVL_TRANSPORT=fifo run -0 "$OVL_RUN" -q -d run p.plan
	cmp out/small.jsonl ref.jsonl
	echo "transport ring" >> p.plan
	run -0 "$OVL_MIX" --check p.plan
	[[ "$output" == *$'\ntransport ring'* ]]
	rm -rf ckpt out
	OVL_RING_SIZE=1 run -2 "$OVL_RUN" -q -d run --restart 0 p.plan
	[[ "$output" == *"bad OVL_RING_SIZE '1'"* ]]
	rm -rf ckpt out
	run -0 "$OVL_RUN" -q -d run p.plan
	cmp out/small.jsonl ref.jsonl
	# the option over the plan
	rm -rf ckpt out
	OVL_RING_SIZE=1 run -0 "$OVL_RUN" -q -d run --transport fifo p.plan
	cmp out/small.jsonl ref.jsonl
	sed -i 's/^transport ring$/transport pipe/' p.plan
	run -2 "$OVL_MIX" --check p.plan
	[[ "$output" == *"p.plan:8: bad transport 'pipe'"* ]]
	run -2 "$OVL_RUN" -q --transport shm p.plan
	[[ "$output" == *"--transport: 'shm' is not fifo or ring"* ]]
}

@test "a ring's writer sends a hello on its named FIFO; files and shell pipes get the stream; bad settings are exit 2" {
	args=(--format jsonl web "$SAMPLES/web/web-0.jsonl")
	mkfifo q
	cat q > piped &
	OVL_TRANSPORT=ring OVL_RING_DIR=$PWD "$OVL_SOURCE" "${args[@]}" > q
	wait $!
	[ "$(head -c 8 piped | od -An -tx1 | tr -d ' ')" = 894f564c52494e47 ]	# \x89OVLRING
	# the reader never came: the writer left its ring (ovl-run removes those)
	n=$(ls ovl-ring.* | wc -l)
	[ "$n" -eq 1 ]
	rm -f ovl-ring.*
	OVL_TRANSPORT=ring "$OVL_SOURCE" "${args[@]}" > file
	OVL_TRANSPORT=fifo "$OVL_SOURCE" "${args[@]}" | cat > fifo
	cmp file fifo
	[ "$(head -c 4 file | od -An -tx1 | tr -d ' ')" = 894f564c ]
	# a shell pipe's reader may be any program (head here): the stream
	# itself, and head's leaving ends the writer as ever (no ring, no hang)
	OVL_TRANSPORT=ring OVL_RING_DIR=$PWD "$OVL_SOURCE" "${args[@]}" | cat > anon
	cmp anon fifo
	st=$(OVL_TRANSPORT=ring OVL_RING_DIR=$PWD bash -c '"$0" --repeat "$@" | head -c 100000 > /dev/null; echo "${PIPESTATUS[0]}"' \
	    "$OVL_SOURCE" "${args[@]}")
	[ "$st" -eq 141 ]
	no_rings .
	# ovl-ckpt's streams (per-rank, frames) are for trainers: never a ring
	mkfifo r0
	cat r0 > rank0 &
	"$OVL_GENDOCS" --docs 50 --seed 3 | "$OVL_CONSTRUCT" --ranks 1 --seq-len 256 |
	    OVL_TRANSPORT=ring OVL_RING_DIR=$PWD "$OVL_CKPT" -q --dir ck --per-rank r%d > /dev/null
	wait $!
	[ "$(head -c 4 rank0 | od -An -tx1 | tr -d ' ')" = 894f564c ]
	no_rings .
	run -2 env OVL_TRANSPORT=shm "$OVL_SOURCE" "${args[@]}" --output /dev/null
	[[ "$output" == *"bad OVL_TRANSPORT 'shm'"* ]]
	cat q > /dev/null &
	run -2 env OVL_TRANSPORT=ring OVL_RING_SIZE=1000 "$OVL_SOURCE" "${args[@]}" --output q
	[[ "$output" == *"bad OVL_RING_SIZE '1000'"* ]]
	wait
}

@test "stages by hand through rings smaller than their frames: the same bytes as pipes" {
	"$OVL_GENDOCS" --docs 400 --seed 5 --sources 2 --median 2000 > g.frames
	for sl in 1024 65536; do
		for t in fifo ring; do
			rm -rf "ck-$t"
			rm -f link && mkfifo link
			OVL_RING_SIZE=64Ki "$OVL_CKPT" -q --dir "ck-$t" --json < link > "out-$t" &
			OVL_TRANSPORT=$t OVL_RING_SIZE=64Ki OVL_RING_DIR=$PWD \
			    "$OVL_CONSTRUCT" --ranks 2 --seq-len "$sl" < g.frames > link
			wait $!
		done
		cmp out-fifo out-ring
		[ "$(wc -l < out-ring)" -gt 10 ]
	done
	no_rings .
}

@test "rings: each stage killed at a seeded random checkpoint, ovl-run restarts, byte-identical" {
	small_plan p.plan
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	cp "$BATS_FILE_TMPDIR/ref.jsonl" ref.jsonl
	RANDOM=20261125
	for tool in ovl-source ovl-mix ovl-construct ovl-ckpt; do
		rm -rf ckpt out run
		at=$((1 + RANDOM % 3))
		# the smallest rings: a source stays within 64 KiB of what the
		# sink took, so it is still there at the checkpoint however
		# slow the machine (with the default rings it could end first)
		OVL_RING_SIZE=64Ki "$OVL_RUN" -d run --transport ring --restart 5 p.plan 3>&- 2> err &
		pid=$!
		wait_ckpt ckpt "$at" "$pid" || { cat err; false; }
		victim=$(pgrep -P "$pid" -f -- "$tool" | head -n 1)
		[ -n "$victim" ]
		kill -KILL "$victim"
		st=0
		wait "$pid" || st=$?
		echo "# $tool killed after checkpoint $at" >&3
		[ "$st" -eq 0 ] || { cat err; false; }
		# restarted alone (a source: as by a shadow), or all of it
		grep -Eq 'restarted alone|restarting from the last checkpoint' err
		cmp out/small.jsonl ref.jsonl
		run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
		no_rings run
	done
}

@test "rings: kill -9 of ovl-run, --resume continues byte-identically, nothing left" {
	small_plan p.plan
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	cp "$BATS_FILE_TMPDIR/ref.jsonl" ref.jsonl
	# a run directory off tmpfs: the rings go to /dev/shm/ovl-run-rings.PID
	"$OVL_RUN" -q -d run --transport ring p.plan 3>&- 2> err &
	pid=$!
	wait_ckpt ckpt 2 "$pid"
	kill -KILL "$pid"
	wait "$pid" || true
	wait_gone "$BATS_TEST_TMPDIR/run/" || true
	run -0 "$OVL_RUN" -q --resume -d run --transport ring p.plan
	cmp out/small.jsonl ref.jsonl
	[ ! -e "/dev/shm/ovl-run-rings.$pid" ]
	no_rings run
}

@test "rings: a reader killed makes its writer end by SIGPIPE, also one waiting for room" {
	"$OVL_GENDOCS" --docs 20000 --seed 9 --sources 2 --median 3000 > g.frames
	mkfifo f
	OVL_TRANSPORT=ring OVL_RING_SIZE=64Ki OVL_RING_DIR=$PWD \
	    timeout -s KILL 60 "$OVL_CONSTRUCT" --ranks 2 --seq-len 1024 < g.frames > f 3>&- &
	wpid=$!
	"$OVL_CKPT" -q --dir ck --json < f > out 3>&- &
	rpid=$!
	# the reader has begun (a stream of this size has no checkpoints)
	wait_until 60 test -s out
	kill -KILL "$rpid"
	st=0
	wait "$wpid" || st=$?
	[ "$st" -eq 141 ]	# SIGPIPE, as over a pipe (137: it hung)
	wait "$rpid" || true
}

@test "rings: a writer killed: the reader exits 3 at a whole frame, naming the stream" {
	"$OVL_GENDOCS" --docs 3000 --seed 9 --sources 2 --median 3000 > g.frames
	"$OVL_CONSTRUCT" --ranks 2 --seq-len 1024 < g.frames > ref.frames
	"$OVL_TEST_TOOL" frames ref.frames | awk '{ print $2 }' > offsets
	mkfifo in f
	exec 5<>in
	OVL_TRANSPORT=ring OVL_RING_DIR=$PWD "$OVL_CONSTRUCT" --ranks 2 --seq-len 1024 < in > f 3>&- 5>&- &
	wpid=$!
	"$OVL_CKPT" --dir ck --json < f > out 2> err 3>&- 5>&- &
	rpid=$!
	# half the documents: the writer waits for more input, its output flushed
	head -c $(($(stat -c %s g.frames) / 2)) g.frames >&5
	wait_until 60 test -s out
	kill -KILL "$wpid"
	exec 5>&-
	st=0
	wait "$rpid" || st=$?
	[ "$st" -eq 3 ]
	cat err
	grep -Eq "^ovl-ckpt: 'standard input': truncated stream \(end of file without END\) at byte offset [0-9]+$" err
	off=$(sed -E 's/.* at byte offset ([0-9]+)$/\1/' err)
	grep -qx "$off" offsets
	no_rings .
}

@test "rings: the stream's errors name the same byte offsets as over pipes" {
	for t in fifo ring; do
		run -3 bash -c 'OVL_TRANSPORT=$1 OVL_RING_DIR=$PWD "$OVL_SOURCE" --format jsonl web "$2" |
		    "$OVL_CKPT" -q --dir "ck-$1" --json > /dev/null' _ "$t" "$SAMPLES/web/web-0.jsonl"
		echo "$output" > "err-$t"
	done
	cat err-ring
	grep -q "unexpected DOC frame.* at byte offset [0-9]" err-ring
	cmp err-fifo err-ring
	no_rings .
}

@test "rings: a hello naming a file that is not a ring is exit 3, and the file stays" {
	for name in keep.txt ovl-ring.fake; do
		echo precious > "$name"
		chmod 600 "$name"
		p=$PWD/$name
		{ printf '\211OVLRING'; printf "%08x" "${#p}" | sed 's/\(..\)\(..\)\(..\)\(..\)/\\x\4\\x\3\\x\2\\x\1/' | xargs -0 printf; printf '%s' "$p"; } > hello
		run -3 bash -c 'cat hello | "$OVL_CONSTRUCT" > /dev/null'
		[[ "$output" == *"'standard input': '$p' is not a ring file"* ]]
		[ "$(cat "$name")" = precious ]
	done
	# from a file, a hello is no stream at all
	run -3 "$OVL_CONSTRUCT" < hello
	[[ "$output" == *"bad magic (not an overlord stream) at byte offset 0"* ]]
}

@test "a ring directory without room for another ring: that stream goes by its pipe, said on stderr, the same bytes" {
	small_plan p.plan
	cp "$BATS_FILE_TMPDIR/ref.jsonl" ref.jsonl
	# a tmpfs of 300 KiB holds one ring of 256 KiB, not the two sources'
	# (the links after ovl-mix keep backups, not rings)
	mkdir shm
	mount -t tmpfs -o size=300k tmpfs shm 2>/dev/null ||
	    skip "cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)"
	st=0
	OVL_RING_DIR=$PWD/shm OVL_RING_SIZE=256K "$OVL_RUN" -q -d run \
	    --transport ring p.plan 2> err || st=$?
	umount shm
	cat err
	[ "$st" -eq 0 ]
	grep -q "no room for a ring of [0-9]* bytes in '$PWD/shm': the stream goes by the pipe" err
	cmp ref.jsonl out/small.jsonl
}

@test "a named FIFO read by another program with OVL_TRANSPORT=ring: an error naming the stream within seconds, not a hang" {
	mkfifo q
	# head and cat take the hello as data and never open the ring
	{ exec 4< q; head -c 8 <&4 > h; cat <&4 > /dev/null; } &
	rpid=$!
	run -1 --separate-stderr env OVL_TRANSPORT=ring OVL_RING_DIR="$PWD" \
	    "$OVL_SOURCE" --repeat -q --field text d "$SAMPLES/web/web-0.jsonl" --output q
	wait "$rpid"
	[[ "$stderr" == *"'q': its reader took the ring's hello but never opened the ring: not an overlord stage"* ]]
	no_rings .
}
