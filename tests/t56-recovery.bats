#!/usr/bin/env bats
# Recovery that training does not see (ovl(7) Recovery): any one stage
# killed while the run goes on is restarted alone, the other stages keep
# their processes, and the outputs, or what per-rank readers get, are
# those of the uninterrupted run.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	export PYTHONPATH="$OVL_SRCDIR/python"
	export OVL_CRC_LIB="$OVL_BUILDDIR/python/libovlcrc.so"
}

# the uninterrupted run of small_plan, once for the file's tests:
# $BATS_FILE_TMPDIR/ref.jsonl
setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	small_plan p.plan
	"$OVL_RUN" -q -d run p.plan 3>&- || return 1
	mv out/small.jsonl ref.jsonl
	rm -rf ckpt out run
}

# victim_pid RUNPID ROLE: the process of a stage of the run (not a shadow)
victim_pid() {
	local pat
	case $2 in
	source) pat='ovl-source --id 0 ' ;;
	*) pat="ovl-$2 " ;;
	esac
	pgrep -P "$1" -f -- "$pat" | while read -r p; do
		grep -qz -- --standby "/proc/$p/cmdline" 2>/dev/null || echo "$p"
	done | head -n 1
}

# run_killing ROLE [SIGNAL [OVL-RUN OPTIONS...]]: ovl-run -v of p.plan
# (stderr in err), ROLE's stage sent SIGNAL (default KILL) once checkpoint
# 3 is committed; the run must end with 0
run_killing() {
	local pid victim st=0 role=$1 sig=${2:-KILL}
	shift $(($# < 2 ? $# : 2))
	"$OVL_RUN" -v -d run "$@" p.plan 3>&- 2> err &
	pid=$!
	wait_ckpt ckpt 3 "$pid"
	victim=$(victim_pid "$pid" "$role")
	[ -n "$victim" ] || { echo "no $role stage in: $(pgrep -a -P "$pid")"; cat err; false; }
	kill -"$sig" "$victim"
	wait "$pid" || st=$?
	[ "$st" -eq 0 ] || { cat err; false; }
}

# starts ERR ROLE: how many processes ovl-run started for ROLE (ovl-run -v)
starts() {
	grep -c "^ovl-run: $2 is pid " "$1" || true
}

@test "each stage killed alone: restarted alone, the others keep their processes, byte-identical" {
	small_plan p.plan
	cp "$BATS_FILE_TMPDIR/ref.jsonl" ref.jsonl
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	for role in source mix construct ckpt; do
		rm -rf ckpt out run
		run_killing "$role"
		grep -q "restarted alone at checkpoint" err
		! grep -q 'restarting from the last checkpoint' err
		cmp out/small.jsonl ref.jsonl
		run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
		# one process each for the stages that were not killed
		for other in mix construct ckpt; do
			[ "$other" = "$role" ] && want=2 || want=1
			[ "$(starts err "$other")" -eq "$want" ] ||
			    { echo "$role killed: $other started $(starts err "$other") times"; false; }
		done
		echo "# $role killed: restarted alone, the same bytes" >&3
	done
	[ -z "$(find run -name '*.frames@*' 2>/dev/null)" ]
}

@test "a stage stopped (SIGSTOP): the watchdog names it, restarts it alone, byte-identical" {
	small_plan p.plan
	cp "$BATS_FILE_TMPDIR/ref.jsonl" ref.jsonl
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	for role in source mix ckpt; do
		rm -rf ckpt out run
		run_killing "$role" STOP --stall-timeout 1 --status-interval 0.2
		grep -q "^ovl-run: stalled: no byte moved for 1 s (.*$role.* stopped.*): $role.* is stuck, restarting it alone" err
		grep -q "restarted alone at checkpoint" err
		cmp out/small.jsonl ref.jsonl
		grep -q "^stall .* $role.* stopped" ckpt/stats/run.log
		echo "# $role stopped: named, restarted alone, the same bytes" >&3
	done
}

@test "the watchdog: --stall-timeout must be whole seconds; 0 turns it off" {
	small_plan p.plan
	run -2 "$OVL_RUN" --stall-timeout 1.5 p.plan
	[[ "$output" == *"--stall-timeout: '1.5' is not a whole number of seconds"* ]]
	run -2 "$OVL_RUN" --stall-timeout p.plan
}

# readers PREFIX...: two RankDataset readers of out/rank0, out/rank1
# (FIFOs), each reading one run's stream per PREFIX in turn, a fresh
# RankDataset each (rank-digest.py: torch is loaded once a reader, not
# once a run), the digests into PREFIX.0, PREFIX.1; pids in RPIDS,
# stderr in readers.0.err, readers.1.err
readers() {
	local py r p outs
	py=$(ovl_python_numpy)
	RPIDS=()
	for r in 0 1; do
		outs=()
		for p in "$@"; do outs+=("$p.$r"); done
		"$py" "$OVL_SRCDIR/tests/helper/rank-digest.py" "out/rank$r" "${outs[@]}" \
		    3>&- 2> "readers.$r.err" &
		RPIDS+=("$!")
	done
}

# readers_ready: a run may start: both readers hold their FIFO open (torch
# loaded, the stream before read whole), so a kill at checkpoint 3 lands
# while the run goes on; fails when a reader has ended
readers_ready() {
	local r
	for r in 0 1; do
		wait_until 120 open_or_gone "${RPIDS[r]}" "out/rank$r"
		kill -0 "${RPIDS[r]}" 2>/dev/null || { cat readers.*.err; return 1; }
	done
}

# readers_done PREFIX: both readers have read PREFIX's stream whole
# (PREFIX.R.done); fails when a reader ended without it
readers_done() {
	local r
	for r in 0 1; do
		wait_until 120 done_or_gone "${RPIDS[r]}" "$1.$r.done"
		[ -e "$1.$r.done" ] || { cat readers.*.err; return 1; }
	done
}

holds_open() {	# holds_open PID PATH: PID has PATH open (the same file)
	local f
	for f in /proc/"$1"/fd/*; do
		[ "$f" -ef "$PWD/$2" ] && return 0
	done
	return 1
}

open_or_gone() {	# open_or_gone PID PATH: PID has PATH open, or is gone
	! kill -0 "$1" 2>/dev/null || holds_open "$1" "$2"
}

done_or_gone() {	# done_or_gone PID FILE: FILE exists, or PID is gone
	[ -e "$2" ] || ! kill -0 "$1" 2>/dev/null
}

@test "trainers ride through: two RankDataset readers over per-rank FIFOs see no error when any stage is killed" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	# (found, not imported: the readers import it)
	"$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' ||
	    skip "no torch"
	small_plan p.plan
	sed -i 's|^output .*|output format=frames per-rank=out/rank%d|' p.plan
	mkdir out
	mkfifo out/rank0 out/rank1
	# the same two readers read the uninterrupted run, then one run per
	# stage killed
	readers ref got.source got.mix got.construct got.ckpt
	readers_ready
	run -0 "$OVL_RUN" -q -d run p.plan
	readers_done ref
	[ "$(wc -l < ref.0)" -gt 10 ]
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	for role in source mix construct ckpt; do
		rm -rf ckpt run
		readers_ready
		run_killing "$role"
		readers_done "got.$role"
		cmp ref.0 "got.$role.0"
		cmp ref.1 "got.$role.1"
		grep -q "restarted alone at checkpoint" err
		echo "# $role killed: both readers got the uninterrupted run's tensors" >&3
	done
	for p in "${RPIDS[@]}"; do
		wait "$p" || { cat readers.*.err; false; }
	done
}
