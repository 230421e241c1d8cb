#!/usr/bin/env bats
# The chaos test of the supervisor: a seeded killer sends SIGKILL to random
# stages of a three-source pipeline (one source partitioned, one with a warm
# shadow) at random moments; ovl-run restarts from checkpoints or hands the
# shadow the dead source's FIFO, and the output is byte-identical to an
# uninterrupted run, which ovl-ckpt verify confirms. Three seeds, at least
# ten kills each: 30 or more kills across the suite.

load test_helper

# chaos_plan: the plan, p.plan in the current directory
chaos_plan() {
	cat > p.plan <<EOF
source web  path=$SAMPLES/web/web-0.jsonl path=$SAMPLES/web/web-1.jsonl format=jsonl partitions=2 on-exhaust=drop throttle=50K
source book path=$SAMPLES/books/book-0[0-5].txt doc-per=file shadows=1 on-exhaust=drop throttle=25K
source code path=$SAMPLES/code/code.tar.zst format=tar member-ext=.c,.h on-exhaust=drop
weights web=2 book=1 code=1
seq-len 256
ranks 2
micro-batches 2
checkpoint every=1 dir=ckpt
output format=jsonl path=out/chaos
EOF
}

# the uninterrupted run, once for the file's tests: $BATS_FILE_TMPDIR/ref.jsonl
setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	chaos_plan
	"$OVL_RUN" -q -d ref-run p.plan 3>&- || return 1
	mv out/chaos.jsonl ref.jsonl
	rm -rf ckpt out
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	chaos_plan
}

# chaos SEED KILLS: run the plan under a seeded killer until KILLS kills
# have landed on live stages. A run that ends first is checked (output
# byte-identical, verify) and the next run goes on with the kills left, so
# the count never depends on how fast the machine is. Sets $landed.
chaos() {
	local seed=$1 want=$2 pid dog victims v comm runs=0
	RANDOM=$seed
	landed=0
	while [ "$landed" -lt "$want" ] && [ "$runs" -lt 6 ]; do
		runs=$((runs + 1))
		rm -rf ckpt out run
		"$OVL_RUN" -v --restart 100 --status-interval 5 -d run p.plan \
		    3>&- 2> "err.$seed.$runs" &
		pid=$!
		# a watchdog: a hang fails the test instead of the suite
		( sleep 240; kill -TERM "$pid" ) 3>&- 2>/dev/null &
		dog=$!
		while kill -0 "$pid" 2>/dev/null && [ "$landed" -lt "$want" ]; do
			nap "0.$((RANDOM % 4 + 1))"
			# the stages ovl-run started, shadows in standby included
			# (and now and then an ovl-ckpt restore of a restart)
			victims=()
			for v in $(pgrep -P "$pid"); do
				comm=
				read -r comm 2>/dev/null < "/proc/$v/comm" || continue
				case $comm in
				ovl-source | ovl-mix | ovl-construct | ovl-ckpt)
					# not ovl-run's short questions (the plan, a
					# source's arguments, the checkpoints' state)
					question "$v" || victims+=("$v") ;;
				esac
			done
			[ ${#victims[@]} -gt 0 ] || continue
			v=${victims[RANDOM % ${#victims[@]}]}
			if kill -KILL "$v" 2>/dev/null; then
				landed=$((landed + 1))
			fi
		done
		st=0
		wait "$pid" || st=$?
		# the watchdog and its sleep: no process outlives the test
		pkill -P "$dog" sleep 2>/dev/null || true
		kill "$dog" 2>/dev/null || true
		cat "err.$seed.$runs" >&2
		[ "$st" -eq 0 ]
		check_same
	done
}

# question PID: the process is one of ovl-run's short questions (an
# argument --check, --source-args, --get, --list-sources or show)
question() {
	local w args=()
	mapfile -d '' -t args 2>/dev/null < "/proc/$1/cmdline" || return 1
	for w in "${args[@]}"; do
		case $w in
		--check | --source-args | --get | --list-sources | show) return 0 ;;
		esac
	done
	return 1
}

check_same() {	# the output equals the uninterrupted run's, and verifies
	cmp out/chaos.jsonl "$BATS_FILE_TMPDIR/ref.jsonl"
	run -0 "$OVL_CKPT" verify ckpt out/chaos.jsonl
}

@test "chaos: seed 11, ten SIGKILLs, byte-identical output" {
	chaos 11 10
	[ "$landed" -ge 10 ]
}

@test "chaos: seed 23, ten SIGKILLs, byte-identical output" {
	chaos 23 10
	[ "$landed" -ge 10 ]
}

@test "chaos: seed 37, ten SIGKILLs, byte-identical output" {
	chaos 37 10
	[ "$landed" -ge 10 ]
}

# shadow_takeover: kill the book source's live process once its standby
# is up; its shadow must take over without a restart
shadow_takeover() {
	"$OVL_RUN" -v --restart 0 -d run p.plan 3>&- 2> err &
	pid=$!
	for _ in $(seq 100); do
		pgrep -f -- "--standby $BATS_TEST_TMPDIR/run/ctl.1.0" > /dev/null && break
		nap 0.05
	done
	# the book source's live process (not its standby)
	victim=$(pgrep -P "$pid" -f -- "ovl-source --id 1 .*--partition 0/1$")
	[ -n "$victim" ]
	kill -KILL "$victim"
	st=0
	wait "$pid" || st=$?
	cat err >&2
	[ "$st" -eq 0 ]
	grep -q 'source:book:0/1: shadow took over' err
	! grep -q 'restarting' err || false
	check_same
}

@test "a shadow takes over a dead source: no restart, same output" {
	shadow_takeover
}

@test "the takeover needs neither jq nor awk: a PATH without them" {
	path_without nobin jq awk gawk mawk nawk original-awk
	PATH=$BATS_TEST_TMPDIR/nobin
	{ ! command -v jq && ! command -v awk; } || false
	shadow_takeover
	grep -q 'tok/s' err
}
