#!/usr/bin/env bats
# Per-rank FIFO readers that end their training: a reader that closes its
# stream right after a STEP frame ends the sink at the next checkpoint with
# exit 0 and "stopped by the readers at step N"; one that leaves anywhere
# else is still a failure naming the rank.

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
	# a trainer that reads its rank's frames up to the STEP frame of step
	# S and then closes its stream
	cat > upto.py <<'EOF'
import struct, sys
path, stop = sys.argv[1], int(sys.argv[2])
f = open(path, "rb", buffering=0)
def readn(n):
    b = b""
    while len(b) < n:
        c = f.read(n - len(b))
        if not c:
            sys.exit("end of file before step %d" % stop)
        b += c
    return b
readn(16)
while True:
    length, kind = struct.unpack("<IB", readn(12)[:5])
    p = readn(length)
    if kind == 8 and struct.unpack_from("<Q", p)[0] == stop:
        break
f.close()
EOF
}

@test "readers that close right after a STEP frame stop the sink at a checkpoint: exit 0, 'stopped by the readers at step N', resumable" {
	python3 upto.py f/rank0 30 3>&- &
	r0=$!
	python3 upto.py f/rank1 30 3>&- &
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
