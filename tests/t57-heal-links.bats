#!/usr/bin/env bats
# A stage that ovl-run restarts alone and that dies again before it has
# opened its links: the next one takes the generations its peers wait to
# open, never newer ones that nobody would open (a deadlock).

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
}

# nth_pid ERR ROLE N: the pid of the Nth process ovl-run -v started for ROLE
nth_pid() {
	sed -n "s/^ovl-run: $2 is pid \([0-9]*\).*/\1/p" "$1" | sed -n "$3p"
}

# started ERR ROLE N: ovl-run -v has started N processes for ROLE
started() {
	[ -n "$(nth_pid "$@")" ]
}

# in_open PID: PID waits in open(2) (a FIFO without its other end)
in_open() {
	local nr _
	read -r nr _ 2>/dev/null < "/proc/$1/syscall" || return 1
	case $(uname -m):$nr in
	x86_64:257 | x86_64:2 | aarch64:56) return 0 ;;
	esac
	return 1
}

# twice ROLE PEER: a run of the small plan; once checkpoint 3 is in, PEER
# stopped (it cannot open a new link), ROLE's stage killed, its successor
# killed too while it waits to open its input, PEER continued: the run
# ends with 0, ROLE healed twice and PEER never restarted, the
# uninterrupted run's bytes
twice() {
	local role=$1 peer=$2 pid p v n st=0
	small_plan p.plan
	run -0 "$OVL_RUN" -q -d run p.plan
	mv out/small.jsonl ref.jsonl
	rm -rf ckpt out run
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	"$OVL_RUN" -v -d run --stall-timeout 0 p.plan 3>&- 2> err &
	pid=$!
	wait_ckpt ckpt 3 "$pid"
	p=$(nth_pid err "$peer" 1)
	v=$(nth_pid err "$role" 1)
	[ -n "$p" ]
	[ -n "$v" ]
	kill -STOP "$p"
	kill -KILL "$v"
	wait_until 60 started err "$role" 2
	v=$(nth_pid err "$role" 2)
	wait_until 60 in_open "$v"
	kill -TERM "$v"
	wait_until 60 started err "$role" 3
	kill -CONT "$p"
	# (a restarted stage on a generation nobody opens waits forever)
	wait_until 120 not kill -0 "$pid" || { kill "$pid"; cat err; false; }
	wait "$pid" || st=$?
	[ "$st" -eq 0 ] || { cat err; false; }
	# healed twice (more when a restarted stage fails again: named)
	n=$(grep -c "$role .*restarted alone at checkpoint" err)
	[ "$n" -ge 2 ] || { cat err; false; }
	[ "$n" -eq 2 ] || grep "restarted alone\|^ovl-[a-z]*: .*'" err | sed 's/^/# /' >&3
	! grep -q 'restarting from the last checkpoint' err
	[ "$(grep -c "^ovl-run: $peer is pid " err)" -eq 1 ] || { grep -v "step \|ticker" err; false; }
	cmp out/small.jsonl ref.jsonl
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
}

@test "construct killed, its successor killed too while it waits to open its input: the third one runs on the generation the mixer opens" {
	twice construct mix
}

@test "the sink killed, its successor killed while it waits to open its input: the third one runs on the generation ovl-construct opens" {
	twice ckpt construct
}
