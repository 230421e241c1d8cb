#!/usr/bin/env bats
# Elastic data parallelism: resuming from a checkpoint with another rank
# count keeps the global token stream and every step's budget; only the
# split across ranks changes. Proved on the multiset of tokens of every
# step against the uninterrupted run.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	printf 'source web path=%s/web/web-0.jsonl path=%s/web/web-1.jsonl\nranks 2\nseq-len 256\nstep-tokens 2048\ncheckpoint every=4 dir=ck\n' \
	    "$SAMPLES" "$SAMPLES" > p2.plan
	sed 's/^ranks 2$/ranks 4/' p2.plan > p4.plan
	"$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-1.jsonl" > s.fr
	"$OVL_MIX" p2.plan web=s.fr | "$OVL_CONSTRUCT" p2.plan > c2.fr
	"$OVL_CKPT" --dir full --format jsonl -o full/x p2.plan < c2.fr
}

# step_tokens FILE: per step, its tokens sorted, one line per step
step_tokens() {
	python3 -c '
import collections, json, sys
d = collections.defaultdict(list)
ranks = collections.defaultdict(set)
for l in open(sys.argv[1]):
    o = json.loads(l)
    if "tokens" in o:
        d[o["step"]] += o["tokens"]
        ranks[o["step"]].add(o["rank"])
for s in sorted(d):
    print(s, max(ranks[s]) + 1, sum(d[s]), hash(tuple(sorted(d[s]))))' "$1"
}

@test "resumed with 4 ranks instead of 2: every step keeps its tokens, split over 4 ranks" {
	"$OVL_CKPT" --dir ck --format jsonl -o out/x p2.plan < c2.fr
	"$OVL_CKPT" restore ck --at 3 > /dev/null
	"$OVL_MIX" --resume ck/resume/mix.state p4.plan web=s.fr |
	    "$OVL_CONSTRUCT" -v --resume ck/resume/construct.state p4.plan 2> err |
	    "$OVL_CKPT" --dir ck --format jsonl -o out/x --resume 3 p4.plan
	grep -q "this run has 4: the steps keep their 2048 tokens and are split over 4 ranks" err
	step_tokens full/x.jsonl > want
	step_tokens out/x.jsonl > got
	[ "$(wc -l < want)" -gt 20 ]
	# same steps, same token multisets; ranks: 2 before step 12, 4 after
	cut -d' ' -f1,3,4 want > want.t
	cut -d' ' -f1,3,4 got > got.t
	cmp want.t got.t
	[ "$(awk '$1 < 12 { print $2 }' got | sort -u)" = 2 ]
	last=$(tail -n 1 got | cut -d' ' -f1)	# the last step may be short
	[ "$(awk -v last="$last" '$1 >= 12 && $1 < last { print $2 }' got | sort -u)" = 4 ]
}

@test "another rank count without step-tokens is refused: the steps would change" {
	sed '/^step-tokens/d' p2.plan > q2.plan
	sed '/^step-tokens/d' p4.plan > q4.plan
	"$OVL_MIX" q2.plan web=s.fr | "$OVL_CONSTRUCT" q2.plan |
	    "$OVL_CKPT" --dir ck --format jsonl -o out/x q2.plan
	"$OVL_CKPT" restore ck --at 2 > /dev/null
	run -2 "$OVL_CONSTRUCT" --resume ck/resume/construct.state q4.plan < /dev/null
	[[ "$output" == *"the state was written with ranks 2, this run has 4 (another rank count keeps every step only with step-tokens and uniform no)"* ]]
}

@test "resume handshake: restore --step S starts the streams at step S, nothing replayed or lost" {
	"$OVL_CKPT" --dir refs p2.plan < c2.fr > full.fr
	"$OVL_CKPT" --dir ck p2.plan < c2.fr > first.fr
	for s in 14 12 9; do
		rm -rf ck2 && cp -r ck ck2
		# a trainer whose checkpoint needs step $s next
		run -0 --separate-stderr "$OVL_CKPT" restore -v --adopt --step "$s" ck2
		[[ "$stderr" == *"step $s next: checkpoint "* ]]
		n=$(printf '%s\n' "$output" | sed -n 's/^ckpt --resume //p')
		"$OVL_MIX" --resume ck2/resume/mix.state p2.plan web=s.fr |
		    "$OVL_CONSTRUCT" --resume ck2/resume/construct.state p2.plan |
		    "$OVL_CKPT" --dir ck2 --resume "$n" p2.plan > rest.fr
		"$OVL_TEST_TOOL" dump full.fr | grep '^SEQ' |
		    awk -v s="$s" '{ split($2, a, "="); if (a[2] >= s) print }' > want
		"$OVL_TEST_TOOL" dump rest.fr | grep '^SEQ' > got
		[ -s want ]
		cmp want got
	done
	# before the first checkpoint there is none to restore
	run -1 "$OVL_CKPT" restore --adopt --step 3 ck2
	[[ "$output" == *"no checkpoint at or before step 3"* ]]
	# a file output holds every step: --step is refused for it
	"$OVL_CKPT" --dir ckf --format jsonl -o f/x p2.plan < c2.fr
	run -2 "$OVL_CKPT" restore --step 14 ckf
	[[ "$output" == *"--step is for stream outputs"* ]]
	run -2 "$OVL_CKPT" restore --step 14 --at 3 ck
}

@test "ovl-run --resume-step passes the handshake to the restore; a file output refuses it" {
	printf 'output format=jsonl path=out/x\n' >> p2.plan
	run -0 "$OVL_RUN" -q p2.plan
	run -2 "$OVL_RUN" -q --resume --resume-step 5 p2.plan
	[[ "$output" == *"--step is for stream outputs"* ]]
	run -2 "$OVL_RUN" -q --resume-step 5 p2.plan
	[[ "$output" == *"--resume-step takes a step number, with --resume"* ]]
}

@test "ovl-ckpt --step-from-readers: socket outputs only; a reader that says no step, or ranks that disagree, are errors (test_handshake.py resumes through it)" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	run -2 "$OVL_CKPT" --dir x --step-from-readers f -p 'out/rank%d' p2.plan
	[[ "$output" == *"'out/rank0' is not an endpoint"* ]]
	run -2 "$OVL_CKPT" --dir x --step-from-readers f -p 'unix-listen:s%d' -f jsonl -o o/x p2.plan
	[[ "$output" == *"per-rank streams only"* ]]
	run -2 "$OVL_CKPT" --dir x --step-from-readers f -p 'unix-listen:s%d' --resume 2 p2.plan
	[[ "$output" == *"not with --resume or --skip-steps"* ]]
	run -2 "$OVL_CKPT" --dir x --step-from-readers f -p 'unix-listen:s%d'
	[[ "$output" == *"needs --per-rank endpoints and a PLAN"* ]]
	export OVL_SECRET=0123456789abcdef-t43 PYTHONPATH="$OVL_SRCDIR/python"
	export OVL_CRC_LIB="$OVL_BUILDDIR/python/libovlcrc.so"
	# rank 0 passes the handshake and leaves without a word
	"$OVL_CKPT" --dir ck1 --step-from-readers f1 -p "unix-listen:$PWD/a%d.sock" \
	    --input c2.fr p2.plan 2> err1 3>&- &
	ck=$!
	"$py" -c 'import sys; from overlord import net; net.connect(sys.argv[1]).close()' \
	    "unix:$PWD/a0.sock"
	# (wait in this shell: run's subshell is not the sink's parent)
	rc=0
	wait "$ck" || rc=$?
	[ "$rc" -eq 1 ] || { cat err1; false; }
	grep -q "rank0: the reader on 'peer local on unix-listen:$PWD/a0.sock' said no step (it left)" err1
	[ ! -e f1 ]
	# two ranks that need different steps
	"$OVL_CKPT" --dir ck2 --step-from-readers f2 -p "unix-listen:$PWD/b%d.sock" \
	    --input c2.fr p2.plan 2> err2 3>&- &
	ck=$!
	"$py" -c '
import sys
from overlord import net
a = net.connect(sys.argv[1] % 0, next_step=8)
b = net.connect(sys.argv[1] % 1, next_step=9)
assert a.recv(1) == b"" and b.recv(1) == b""    # the stream never starts' "unix:$PWD/b%d.sock"
	rc=0
	wait "$ck" || rc=$?
	[ "$rc" -eq 2 ] || { cat err2; false; }
	grep -q "the ranks' readers need different steps: rank0 step 8, rank1 step 9" err2
	[ ! -e f2 ]
}
