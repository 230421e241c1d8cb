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

@test "construct killed, its successor killed too while it waits to open its input: the third one runs on the generation the mixer opens" {
	small_plan p.plan
	run -0 "$OVL_RUN" -q -d run p.plan
	mv out/small.jsonl ref.jsonl
	rm -rf ckpt out run
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	"$OVL_RUN" -v -d run --stall-timeout 0 p.plan 3>&- 2> err &
	pid=$!
	wait_ckpt ckpt 3 "$pid"
	mix=$(nth_pid err mix 1)
	c1=$(nth_pid err construct 1)
	[ -n "$mix" ]
	[ -n "$c1" ]
	# the mixer stopped: it cannot open the next generation of its output
	kill -STOP "$mix"
	kill -KILL "$c1"
	wait_until 60 started err construct 2
	c2=$(nth_pid err construct 2)
	wait_until 60 in_open "$c2"
	kill -TERM "$c2"
	wait_until 60 started err construct 3
	kill -CONT "$mix"
	# (a restarted stage on a generation nobody opens waits forever)
	wait_until 120 not kill -0 "$pid" || { kill "$pid"; cat err; false; }
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 0 ] || { cat err; false; }
	# healed twice, never restarted whole, the same bytes
	[ "$(grep -c 'construct .*restarted alone at checkpoint' err)" -eq 2 ]
	! grep -q 'restarting from the last checkpoint' err
	[ "$(grep -c '^ovl-run: mix is pid ' err)" -eq 1 ]
	[ "$(grep -c '^ovl-run: ckpt is pid ' err)" -eq 1 ]
	cmp out/small.jsonl ref.jsonl
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
}

@test "the sink killed, its successor killed while it waits to open its input: the third one runs on the generation ovl-construct opens" {
	small_plan p.plan
	run -0 "$OVL_RUN" -q -d run p.plan
	mv out/small.jsonl ref.jsonl
	rm -rf ckpt out run
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	"$OVL_RUN" -v -d run --stall-timeout 0 p.plan 3>&- 2> err &
	pid=$!
	wait_ckpt ckpt 3 "$pid"
	con=$(nth_pid err construct 1)
	k1=$(nth_pid err ckpt 1)
	[ -n "$con" ]
	[ -n "$k1" ]
	kill -STOP "$con"
	kill -KILL "$k1"
	wait_until 60 started err ckpt 2
	k2=$(nth_pid err ckpt 2)
	wait_until 60 in_open "$k2"
	kill -TERM "$k2"
	wait_until 60 started err ckpt 3
	kill -CONT "$con"
	# (a restarted stage on a generation nobody opens waits forever)
	wait_until 120 not kill -0 "$pid" || { kill "$pid"; cat err; false; }
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 0 ] || { cat err; false; }
	[ "$(grep -c 'ckpt .*restarted alone at checkpoint' err)" -eq 2 ]
	! grep -q 'restarting from the last checkpoint' err
	[ "$(grep -c '^ovl-run: construct is pid ' err)" -eq 1 ]
	cmp out/small.jsonl ref.jsonl
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
}
