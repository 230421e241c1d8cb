#!/usr/bin/env bats
# Stages on many hosts (ovl-run --launcher ssh|slurm, bin/ovl-launch.in).
# The hosts are network namespaces of this machine, each with its own sshd
# (tests/helper/hosts.bash); the mixer host is the root namespace. A plan
# whose sources run on two of them writes the bytes of the same plan run
# locally; whole hosts lost during a run (every process killed, or the link
# down), one of them the host of a source's shadow, change no byte either;
# and a one-node Slurm cluster started here runs the plan through srun
# job steps.

load test_helper
load helper/hosts

setup_file() {
	export HOSTS_SKIP=
	hosts_up "$BATS_FILE_TMPDIR/hosts" 3 || { [ -n "$HOSTS_SKIP" ] || HOSTS_SKIP=failed; }
	export HOSTS_DIR HOSTS_TAG HOSTS_N HOSTS_NET HOSTS_SKIP
}

teardown_file() {
	hosts_down
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	[ "$HOSTS_SKIP" != failed ] || { echo "the namespace hosts could not be made"; return 1; }
	[ -z "$HOSTS_SKIP" ] || skip "$HOSTS_SKIP"
	SSHCFG=$HOSTS_DIR/ssh_config
	unset OVL_SECRET OVL_SECRET_FILE OVL_RUN_ID
}

teardown() {
	# a run the test left behind (a failed assertion): its stages go with it
	[ -z "${RUN_PID:-}" ] || kill -TERM "$RUN_PID" 2>/dev/null || true
	[ -z "${DOG:-}" ] || { pkill -P "$DOG" sleep 2>/dev/null; kill "$DOG" 2>/dev/null; } || true
	return 0
}

# plan FILE THROTTLE-WEB THROTTLE-BOOK [LINES...]: the three-source plan of
# the chaos tests (web partitioned, book with a shadow)
plan() {
	local f=$1 tw=$2 tb=$3
	shift 3
	cat > "$f" <<-EOF
	source web  path=$SAMPLES/web/web-0.jsonl path=$SAMPLES/web/web-1.jsonl format=jsonl partitions=2 on-exhaust=drop${tw:+ throttle=$tw}
	source book path=$SAMPLES/books/book-0[0-5].txt doc-per=file shadows=1 on-exhaust=drop${tb:+ throttle=$tb}
	source code path=$SAMPLES/code/code.tar.zst format=tar member-ext=.c,.h on-exhaust=drop
	weights web=2 book=1 code=1
	seq-len 256
	ranks 2
	micro-batches 2
	checkpoint every=1
	output format=jsonl path=out/x
	EOF
	printf '%s\n' "$@" >> "$f"
}

# reference PLAN: the plan run locally, into ref.jsonl
reference() {
	"$OVL_RUN" -q -c ref-ck -o ref/x "$1" 3>&-
	mv ref/x.jsonl ref.jsonl
}

# wait_log FILE TEXT [SECONDS]: until FILE holds TEXT (60 s at most)
wait_log() {
	local k
	for ((k = 0; k < ${3:-60} * 20; k++)); do
		grep -qF -- "$2" "$1" 2>/dev/null && return 0
		kill -0 "$RUN_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "waited in vain for '$2' in $1"
	return 1
}

# start_run LOG ARGS...: ovl-run in the background (RUN_PID), with a
# watchdog that turns a hang into a failure
start_run() {
	local log=$1
	shift
	"$OVL_RUN" "$@" 2> "$log" 3>&- &
	RUN_PID=$!
	( sleep 300; kill -TERM "$RUN_PID" ) 3>&- 2>/dev/null &
	DOG=$!
}

@test "sources on two namespace hosts, mixer here: the bytes of the local run" {
	plan p.plan '' '' "hosts loaders=h1,h2 mixer=$HOSTS_NET.1"
	sed -i 's/^source code .*/& hosts=h2/' p.plan
	"$OVL_MIX" --get source.code.hosts p.plan | tr -d '\0' > got
	[ "$(cat got)" = h2 ]
	reference p.plan
	"$OVL_RUN" -v --launcher ssh --ssh-config "$SSHCFG" -c ck -o out/x p.plan 2> err 3>&- ||
	    { cat err; false; }
	cmp ref.jsonl out/x.jsonl
	run -0 "$OVL_CKPT" verify ck out/x.jsonl
	grep -q "launcher ssh: loader hosts h1 h2, mixer at $HOSTS_NET.1" err
	grep -q "^ovl-run: start source:web:0/2 on h1: .* --output tcp:$HOSTS_NET.1:[0-9]* " err
	grep -q "^ovl-run: start source:web:1/2 on h2: " err
	grep -q "^ovl-run: start source:code:0/1 on h2: " err
	# the shadow of book is on another host than book
	bh=$(sed -n 's/^ovl-run: start source:book:0\/1 on \(h[0-9]\).*/\1/p' err)
	sh=$(sed -n 's/^ovl-run: shadow for source:book:0\/1 on \(h[0-9]\).*/\1/p' err)
	[ -n "$bh" ] && [ -n "$sh" ] && [ "$bh" != "$sh" ]
	# every source link was authenticated by the mixer
	[ "$(grep -c "authenticated" err)" -ge 4 ] || grep -q "ovl-mix" err
	# nothing is left on the hosts but their sshd
	for h in h1 h2; do
		[ "$(host_nproc "$h")" -eq 1 ]
	done
}

@test "--hosts wins over the plan; no hosts, a bad launcher, a missing allocation: usage errors" {
	plan p.plan '' '' "hosts loaders=h9 mixer=$HOSTS_NET.1"
	reference p.plan
	"$OVL_RUN" -v --launcher ssh --hosts h3 --ssh-config "$SSHCFG" -c ck -o out/x p.plan \
	    2> err 3>&- || { cat err; false; }
	cmp ref.jsonl out/x.jsonl
	grep -q "loader hosts h3, mixer" err
	plan q.plan '' ''
	run -2 --separate-stderr "$OVL_RUN" --launcher ssh q.plan
	[[ "$stderr" == *"--launcher ssh needs loader hosts: --hosts, the plan's 'hosts loaders=' or a Slurm allocation"* ]]
	run -2 --separate-stderr "$OVL_RUN" --launcher rsh q.plan
	[[ "$stderr" == *"--launcher: 'rsh' is not local, ssh or slurm"* ]]
	run -2 --separate-stderr env -u SLURM_JOB_ID "$OVL_RUN" --launcher slurm --hosts a q.plan
	[[ "$stderr" == *"runs inside an allocation"* ]]
	printf 'source web path=%s hosts=a,,b\n' "$SAMPLES/web/web-0.jsonl" > bad.plan
	run -2 --separate-stderr "$OVL_MIX" --check bad.plan
	[[ "$stderr" == *"bad.plan:1: bad hosts='a,,b': expected host names separated by commas" ]]
}

@test "chaos: whole hosts lost mid-run, once the host of a shadow: byte-identical, verify ok" {
	plan p.plan 4K 2K
	reference p.plan
	start_run err -v --restart 20 --status-interval 5 --launcher ssh --hosts h1,h2,h3 \
	    --ssh-config "$SSHCFG" --mixer-host "$HOSTS_NET.1" -c ck -o out/x p.plan
	lost=0
	# 1: the host of web's first partition: every process killed
	wait_log err "start source:web:0/2 on "
	wait_log err "ckpt 5"
	h=$(sed -n 's/^ovl-run: start source:web:0\/2 on \(h[0-9]\).*/\1/p' err | tail -n 1)
	host_kill "$h"
	wait_log err "host $h lost"
	host_sshd "$h"
	# 2: the host of book's shadow, its link down
	wait_log err "restarting from"
	wait_log err "shadow for source:book:0/1 on "
	sleep 2
	h=$(sed -n 's/^ovl-run: shadow for source:book:0\/1 on \(h[0-9]\).*/\1/p' err | tail -n 1)
	n=$(grep -c "host $h lost" err || true)
	host_link "$h" down
	for ((k = 0; k < 600; k++)); do
		[ "$(grep -c "host $h lost" err || true)" -gt "$n" ] && break
		sleep 0.05
	done
	[ "$(grep -c "host $h lost" err)" -gt "$n" ]
	host_link "$h" up
	# 3: the host of book itself, killed: its shadow takes over
	h=$(grep -E "start source:book:0/1 on |shadow took over" err | tail -n 1)
	h=$(sed -n 's/^ovl-run: start source:book:0\/1 on \(h[0-9]\).*/\1/p' err | tail -n 1)
	n=$(grep -c "shadow took over" err || true)
	host_kill "$h"
	wait_log err "host $h lost"
	host_sshd "$h"
	wait "$RUN_PID"
	RUN_PID=
	cat err >&2
	cmp ref.jsonl out/x.jsonl
	run -0 "$OVL_CKPT" verify ck out/x.jsonl
	[ "$(grep -c "host h[0-9] lost" err)" -ge 3 ]
}
