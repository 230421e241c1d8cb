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
	hosts_up "$BATS_FILE_TMPDIR/hosts" 4 || { [ -n "$HOSTS_SKIP" ] || HOSTS_SKIP=failed; }
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
	[ -z "${SLURM_DIR:-}" ] || slurm_down
	# what ovl-run said, for a failure
	[ ! -f err ] || grep -vE 'tok/s|is pid|start ticker|exit status 0' err | tail -n 80
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
		nap 0.05
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

@test "chaos: whole hosts lost mid-run (killed, cut off), one the host of a shadow, the supervisor stopped in a restart: byte-identical, verify ok" {
	# book first: its partition on h1, its shadow alone on h2; web and
	# code on h3 and h4
	plan p.plan 2K 1K
	sed -i '/^source web /{h;d}; /^source book /G' p.plan
	sed -i 's/^source web .*/& hosts=h3,h4/; s/^source code .*/& hosts=h3,h4/' p.plan
	reference p.plan
	start_run err -v --restart 20 --status-interval 5 --launcher ssh --hosts h1,h2,h3,h4 \
	    --ssh-config "$SSHCFG" --mixer-host "$HOSTS_NET.1" -c ck -o out/x p.plan
	wait_log err "shadow for source:book:0/1 on h2"
	grep -q "start source:book:0/1 on h1" err
	wait_ckpt ck 5 "$RUN_PID"
	# 1: the shadow's host cut off: the shadow is replaced on another host
	host_link h2 down
	wait_log err "host h2 lost (no answer within 3 s): its stages the shadow of source:book:0/1 are gone"
	wait_log err "shadow for source:book:0/1 on h4"
	host_link h2 up
	# 2: book's host killed (every process): the shadow takes over
	host_kill h1
	wait_log err "host h1 lost (no answer within 3 s): its stages source:book:0/1 are gone"
	wait_log err "source:book:0/1: shadow took over at cursor"
	host_sshd h1
	# 3: web's and code's host cut off: a restart from the checkpoint
	wait_log err "shadow for source:book:0/1 on h3"
	host_link h3 down
	wait_log err "failed: host h3 lost (root cause)"
	host_link h3 up
	wait_log err "restarting from the last checkpoint"
	# 4: the supervisor stopped in its restart; the rest, resumed without
	# the throttles, takes no longer than it needs
	kill -TERM "$RUN_PID"
	wait "$RUN_PID" || true
	RUN_PID=
	sed 's/ throttle=[^ ]*//' p.plan > fast.plan
	"$OVL_RUN" -q --resume --launcher ssh --hosts h1,h2,h3,h4 --ssh-config "$SSHCFG" \
	    --mixer-host "$HOSTS_NET.1" -c ck -o out/x fast.plan 2>> err 3>&-
	cmp ref.jsonl out/x.jsonl
	run -0 "$OVL_CKPT" verify ck out/x.jsonl
}

# slurm_up DIR: a one-node Slurm cluster (this host), with its own munged
# and key, ports and state in DIR; SLURM_CONF exported. Waits until sinfo
# shows the node idle.
slurm_up() {
	local d=$1 h k p1 p2
	mkdir -p "$d/state" "$d/spool"
	chmod 700 "$d"
	SLURM_DIR=$d
	head -c 1024 /dev/urandom > "$d/munge.key"
	chmod 400 "$d/munge.key"
	munged -f --key-file="$d/munge.key" --socket="$d/munge.sock" \
	    --pid-file="$d/munged.pid" --log-file="$d/munged.log" \
	    --seed-file="$d/munged.seed" 3>&- || return 1
	h=$(hostname -s)
	read -r p1 p2 < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("", 0))
print(*[x.getsockname()[1] for x in s])')
	cat > "$d/slurm.conf" <<-EOF
	ClusterName=ovl61
	SlurmctldHost=$h
	SlurmctldPort=$p1
	SlurmdPort=$p2
	AuthType=auth/munge
	AuthInfo=socket=$d/munge.sock
	CredType=cred/munge
	ProctrackType=proctrack/linuxproc
	TaskPlugin=task/none
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core
	SchedulerType=sched/builtin
	StateSaveLocation=$d/state
	SlurmdSpoolDir=$d/spool
	SlurmctldPidFile=$d/slurmctld.pid
	SlurmdPidFile=$d/slurmd.pid
	SlurmctldLogFile=$d/slurmctld.log
	SlurmdLogFile=$d/slurmd.log
	SlurmUser=root
	SlurmdUser=root
	ReturnToService=2
	MpiDefault=none
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	NodeName=$h CPUs=$(nproc) State=UNKNOWN
	PartitionName=ovl61 Nodes=$h Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
	EOF
	export SLURM_CONF=$d/slurm.conf
	slurmctld -i -f "$SLURM_CONF" 3>&- || return 1
	slurmd -f "$SLURM_CONF" 3>&- || return 1
	for ((k = 0; k < 600; k++)); do
		[ "$(sinfo -h -o %t 2>/dev/null)" = idle ] && return 0
		nap 0.05
	done
	echo "the Slurm node is not idle:"; sinfo; cat "$d/slurmctld.log" "$d/slurmd.log"
	return 1
}

# slurm_down: stop what slurm_up started, and wait until it has
slurm_down() {
	local f p k
	for f in slurmd slurmctld munged; do
		[ -s "$SLURM_DIR/$f.pid" ] || continue
		p=$(cat "$SLURM_DIR/$f.pid")
		kill "$p" 2>/dev/null || continue
		for ((k = 0; k < 200; k++)); do
			kill -0 "$p" 2>/dev/null || break
			nap 0.05
		done
	done
}

@test "Slurm: salloc and sbatch run ovl-run --launcher slurm (srun job steps): the bytes of the local run" {
	command -v slurmctld > /dev/null && command -v munged > /dev/null ||
	    { echo "slurm-wlm and munge are not installed (scripts/bootstrap)"; false; }
	plan p.plan '' ''
	reference p.plan
	slurm_up "$BATS_TEST_TMPDIR/slurm"
	run -0 --separate-stderr timeout 120 srun -N1 hostname
	[ "$output" = "$(hostname -s)" ]
	# an interactive allocation
	timeout 300 salloc -Q -N1 "$OVL_RUN" -v --launcher slurm --mixer-host 127.0.0.1 \
	    -c ck -o out/x p.plan 2> err 3>&- || { cat err; false; }
	cmp ref.jsonl out/x.jsonl
	run -0 "$OVL_CKPT" verify ck out/x.jsonl
	grep -q "launcher slurm: loader hosts $(hostname -s), mixer at 127.0.0.1" err
	grep -q "shadow for source:book:0/1 on $(hostname -s)" err
	# a batch job
	cat > job.sh <<-EOF
	#!/bin/sh
	#SBATCH --nodes=1 --ntasks-per-node=1
	exec "$OVL_RUN" --launcher slurm --mixer-host 127.0.0.1 -c ck2 -o out2/x p.plan
	EOF
	timeout 300 sbatch -Q --wait --chdir "$PWD" -o job.out job.sh 3>&- ||
	    { cat job.out; false; }
	cmp ref.jsonl out2/x.jsonl
	run -0 "$OVL_CKPT" verify ck2 out2/x.jsonl
}

@test "rank streams served to trainer hosts (hosts trainers=): each trainer host reads its rank over TCP, another host is refused" {
	export OVL_SECRET_FILE=$PWD/secret OVL_RUN_ID=t61-trainers
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > secret
	chmod 600 secret
	plan p.plan '' '' "hosts loaders=h1,h2 mixer=$HOSTS_NET.1 trainers=$HOSTS_NET.13,$HOSTS_NET.14"
	sed 's|^output .*|output format=frames per-rank=ref/rank%d|' p.plan > ref.plan
	"$OVL_RUN" -q -c ref-ck ref.plan 3>&-
	sed -i "s|^output .*|output format=frames per-rank=\"tcp-listen::0,port-file=$PWD/port.%d\"|" p.plan
	start_run err -v --launcher ssh --ssh-config "$SSHCFG" -c ck p.plan
	# (ovl-ckpt listens for rank 1 once rank 0 has its reader)
	wait_port() {
		for _ in $(seq 1200); do [ -s "port.$1" ] && break; nap 0.05; done
		[ -s "port.$1" ]
	}
	wait_port 0
	# h4 is the trainer host of rank 1, not of rank 0: refused
	OVL_CONNECT_TIMEOUT=1 run -1 ip netns exec "${HOSTS_TAG}h4" \
	    "$OVL_TEST_TOOL" net-cat "tcp:$HOSTS_NET.1:$(cat port.0)" bad
	wait_log err "not from $HOSTS_NET.13"
	ip netns exec "${HOSTS_TAG}h3" "$OVL_TEST_TOOL" net-cat \
	    "tcp:$HOSTS_NET.1:$(cat port.0)" got0 3>&- &
	t0=$!
	wait_port 1
	run -0 ip netns exec "${HOSTS_TAG}h4" "$OVL_TEST_TOOL" net-cat \
	    "tcp:$HOSTS_NET.1:$(cat port.1)" got1
	wait "$t0"
	wait "$RUN_PID"
	RUN_PID=
	cmp ref/rank0 got0
	cmp ref/rank1 got1
	grep -q "refused peer $HOSTS_NET.14:[0-9]*: not from $HOSTS_NET.13 (from=)" err
	run -0 "$OVL_CKPT" show --list ck
	[[ "${lines[-1]}" == *" end" ]]
}
