#!/usr/bin/env bats
# Per-rank FIFO readers that end their training: a reader that closes its
# stream right after a STEP frame ends the sink at the next checkpoint with
# exit 0 and "stopped by the readers at step N"; one that leaves anywhere
# else is still a failure naming the rank. A reader that pauses holds the
# sink within --run-ahead steps of it.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	printf 'source web path=%s\nranks 2\nseq-len 256\ncheckpoint every=4\n' \
	    "$SAMPLES/web/web-0.jsonl" > p.plan
	"$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-1.jsonl" > s.fr
	"$OVL_MIX" p.plan web=s.fr > m.fr
	"$OVL_CONSTRUCT" p.plan < m.fr > c.fr
	mkdir f
	mkfifo f/rank0 f/rank1
}

@test "readers that close right after a STEP frame stop the sink at a checkpoint: exit 0, 'stopped by the readers at step N', resumable" {
	python3 "$OVL_SRCDIR/tests/helper/pause-reader.py" f/rank0 30 3>&- &
	r0=$!
	python3 "$OVL_SRCDIR/tests/helper/pause-reader.py" f/rank1 30 3>&- &
	r1=$!
	run -0 --separate-stderr "$OVL_CKPT" --dir ck -p f/rank%d p.plan < c.fr
	wait "$r0"
	wait "$r1"
	[[ "$stderr" == "ovl-ckpt: stopped by the readers at step 30 (checkpoint "*"; resume with the lines of 'ovl-ckpt restore $BATS_TEST_TMPDIR/ck')" ]]
	# not the end of the run: the log can be resumed
	run -0 "$OVL_CKPT" show --list ck
	[[ "${lines[-1]}" != *" end" ]]
	run -0 "$OVL_CKPT" restore ck
	[[ "$output" == *"ckpt --resume "* ]]
}

@test "a reader that leaves in the middle of a frame is still a failure naming its rank" {
	head -c 3000 f/rank0 > /dev/null 3>&- &
	cat f/rank1 > /dev/null 3>&- &
	run -1 --separate-stderr "$OVL_CKPT" --dir ck -p f/rank%d p.plan < c.fr
	[[ "$stderr" == *"rank0: the reader of '$BATS_TEST_TMPDIR/f/rank0' went away"* ]]
	wait
}

# blocked_stop PLAN STREAM CALL: ovl-ckpt writes STREAM to per-rank FIFOs,
# rank 0's held open (read and write: the open does not wait) and never
# read, the others read to their end; once the sink waits in CALL (write:
# the pipe is full; poll: it waits for the reader to take its last bytes),
# a SIGTERM stops it: exit 143, naming the output; resumable
blocked_stop() {
	local r pid st=0
	for r in f/rank*; do
		[ "$r" = f/rank0 ] || cat "$r" > /dev/null 3>&- &
	done
	exec 4<> f/rank0
	"$OVL_CKPT" --dir ck -p f/rank%d "$1" < "$2" 2> err 3>&- 4<&- &
	pid=$!
	wait_until 60 waits_in "$pid" "$3"
	kill -TERM "$pid"
	wait "$pid" || st=$?
	exec 4<&-
	cat err
	[ "$st" -eq 143 ]
	grep -q "^ovl-ckpt: stopped while rank0 waited for its reader to read '.*/f/rank0'; resume with 'ovl-ckpt restore'$" err
	run -0 "$OVL_CKPT" restore ck
	[[ "$output" == *"ckpt --resume "* ]]
}

@test "a SIGTERM stops a sink that waits for a reader to take its last bytes: exit 143, naming the output, resumable" {
	blocked_stop p.plan c.fr poll
}

@test "a SIGTERM stops a sink blocked in a write to a reader that does not read: exit 143, naming the output, resumable" {
	# more than a pipe holds, for one rank
	cat "$SAMPLES"/web/web-[01].jsonl "$SAMPLES"/web/web-[01].jsonl > big.jsonl
	printf 'source web path=big.jsonl\nranks 1\nseq-len 256\ncheckpoint every=4\n' > q.plan
	"$OVL_SOURCE" web big.jsonl | "$OVL_MIX" q.plan web=- | "$OVL_CONSTRUCT" q.plan > big.fr
	rm f/rank1
	blocked_stop q.plan big.fr write
}

# last_ckpt DIR: "N S", the last checkpoint of DIR and the step it opens
last_ckpt() {
	"$OVL_CKPT" show --print0 "$1" | tr '\0' '\n' |
	    sed -n '/^last$/{n;h};/^step$/{n;H};${x;s/\n/ /;p}'
}

@test "output run-ahead=N: a reader that pauses holds the sink N steps ahead of it; it reads on, the bytes of an unbounded run" {
	# the unbounded run, for its bytes
	cat f/rank0 > ref0 3>&- &
	cat f/rank1 > ref1 3>&- &
	run -0 "$OVL_CKPT" --dir ref -p f/rank%d p.plan < c.fr
	wait
	echo 'output format=frames per-rank=f/rank%d run-ahead=5' >> p.plan
	python3 "$OVL_SRCDIR/tests/helper/pause-reader.py" f/rank0 10 at go got0 3>&- &
	r0=$!
	cat f/rank1 > got1 3>&- &
	"$OVL_CKPT" -v --dir ck p.plan < c.fr 2> err 3>&- &
	pid=$!
	# the reader took step 10; checkpoint 4 opens step 16: steps 11..15
	# unread, the sink waits before step 16 (in a poll, not the end's)
	wait_until 60 test -e at
	wait_ckpt ck 4 "$pid"
	wait_until 60 waits_in "$pid" poll
	grep -q "^ovl-ckpt: rank0: 5 steps ahead of the reader of '.*/f/rank0': waiting (--run-ahead)$" err
	[ "$(last_ckpt ck)" = "4 16" ]
	touch go
	wait "$pid"
	wait "$r0"
	wait
	cmp ref0 got0
	cmp ref1 got1
	[ "$(last_ckpt ck)" = "$(last_ckpt ref)" ]
}

@test "--run-ahead: a SIGTERM while the sink waits for a paused reader commits the next checkpoint, exit 143; a bad count is a usage error" {
	python3 "$OVL_SRCDIR/tests/helper/pause-reader.py" f/rank0 10 at go got0 3>&- &
	r0=$!
	cat f/rank1 > /dev/null 3>&- &
	"$OVL_CKPT" --run-ahead 5 --dir ck -p f/rank%d p.plan < c.fr 2> err 3>&- &
	pid=$!
	wait_until 60 test -e at
	wait_ckpt ck 4 "$pid"
	wait_until 60 waits_in "$pid" poll
	kill -TERM "$pid"
	st=0
	wait "$pid" || st=$?
	cat err
	[ "$st" -eq 143 ]
	# the bound gives way to the stop: steps 16..19 went into the pipe
	[ "$(last_ckpt ck)" = "5 20" ]
	grep -q "^ovl-ckpt: stopped at checkpoint 5; resume with" err
	touch go
	wait "$r0"
	wait
	run -2 "$OVL_CKPT" --run-ahead 4097 --dir ck2 -p f/rank%d p.plan
	[[ "$output" == *"bad --run-ahead '4097' (steps, at most 4096; 0: no bound)"* ]]
	echo 'output format=frames per-rank=f/rank%d run-ahead=x' >> p.plan
	run -2 "$OVL_CKPT" --dir ck2 p.plan
	[[ "$output" == *"run-ahead"* ]]
}
