#!/usr/bin/env bats
# The property that matters: a real pipeline (ovl-source x3 | ovl-mix |
# ovl-construct | ovl-ckpt) killed at any moment, at any stage, and
# restarted from `ovl-ckpt restore` writes byte-identical outputs.

load test_helper
load ckpt/pipeline

PLAN="$OVL_SRCDIR/tests/ckpt/kill.plan"

setup() {
	cd "$BATS_TEST_TMPDIR"
	OUT=(--per-rank out/rank%d --format npy -o out/npy --manifest out/man.jsonl)
}

# shared_reference: the uninterrupted run of $PLAN, made once per file,
# as ref/ (REF_LOG set)
shared_reference() {
	[ -d "$BATS_FILE_TMPDIR/ref" ] || (cd "$BATS_FILE_TMPDIR" && reference) || return 1
	ln -s "$BATS_FILE_TMPDIR/ref" ref
	REF_LOG=$(stat -c %s ref/ck/ckpt.log)
}

reference() {
	mkdir -p ref
	(
		cd ref
		local t0=$(date +%s%N)
		pl_start "$PLAN" ck "" "${OUT[@]}"
		pl_wait
		pl_all_ok || { cat ./*.err; exit 1; }
		echo $(( ($(date +%s%N) - t0) / 1000000 )) > ms
	)
	REF_MS=$(cat ref/ms)
	REF_LOG=$(stat -c %s ref/ck/ckpt.log)
}

# One trial: start, kill ROLE with SIG once the log has AT bytes (progress,
# not time: the stages run ahead of each other by their pipe buffers), kill
# the rest, restore, run to the end, compare. The log's size is read again
# only when the log may have changed (a stamp file not strictly newer).
trial() {
	local role=$1 sig=$2 at=$3 rc i ms=$3 size=0
	rm -rf ck out fifo ./*.err resume.lines log.stamp
	pl_start "$PLAN" ck "" "${OUT[@]}"
	for ((i = 0; i < 10000; i++)); do
		if [ ! log.stamp -nt ck/ckpt.log ]; then
			: > log.stamp
			size=$(stat -c %s ck/ckpt.log 2>/dev/null || echo 0)
		fi
		[ "$size" -ge "$at" ] && break
		kill -0 "${PL_PID[ckpt]}" 2>/dev/null || break
		nap 0.002
	done
	kill "-$sig" "${PL_PID[$role]}" 2>/dev/null && LANDED=$((LANDED + 1)) &&
	    echo "# $role killed at log byte ${at}" >&3
	# the others see it go, then go too
	wait "${PL_PID[$role]}" 2>/dev/null || true
	pl_killall
	rc=0
	pl_restore ck resume.lines || rc=$?
	[ "$rc" -le 2 ] || return 1
	if [ "$rc" -le 1 ]; then
		[ "$rc" -eq 1 ] && rm -rf ck
		pl_start "$PLAN" ck resume.lines "${OUT[@]}"
		pl_wait
		pl_all_ok || { cat ./*.err; return 1; }
	fi
	same_as_reference || { echo "$role $sig at ${ms}ms: outputs differ"; return 1; }
	"$OVL_CKPT" verify ck out/rank0 out/rank1 out/npy.tokens.npy out/man.jsonl > /dev/null
}

@test "the uninterrupted pipeline commits checkpoints with every stage's STATE" {
	reference
	run -0 "$OVL_CKPT" show ref/ck --at 4
	[[ "$output" == *"source.web.cursor "* ]]
	[[ "$output" == *"source.web.partitions 2"* ]]
	[[ "$output" == *$'[construct]\n'* ]]
	run -0 "$OVL_CKPT" show --list ref/ck
	[[ "${lines[-1]}" == *" end" ]]
}

@test "SIGKILL of each stage at seeded random moments: restore, restart, byte-identical" {
	shared_reference
	RANDOM=20261122
	LANDED=0
	for role in source:web:0/2 source:book:0/1 mix construct ckpt; do
		for k in 1 2 3; do
			# a moment in the first 60% of the run (the log's growth)
			trial "$role" KILL $(( (RANDOM * 32768 + RANDOM) % (REF_LOG * 6 / 10) ))
		done
	done
	# At least 5 kills must have hit a live process: on a fast machine
	# sources and the mixer finish early behind the pipe buffers, so more
	# seeded trials (each byte-compared too) follow until 5 have landed.
	extra=0
	while [ "$LANDED" -lt 5 ] && [ "$extra" -lt 30 ]; do
		for role in construct ckpt; do
			trial "$role" KILL $(( (RANDOM * 32768 + RANDOM) % (REF_LOG * 6 / 10) ))
		done
		extra=$((extra + 2))
	done
	echo "# kills that landed: $LANDED of $((15 + extra))" >&3
	[ "$LANDED" -ge 5 ]
}

log_past_header() { log_past 16; }
log_past() { [ "$(stat -c %s ck/ckpt.log 2>/dev/null || echo 0)" -gt "$1" ]; }
# (a run may end first on a fast machine: nothing left to kill then)
log_past_or_ckpt_gone() { log_past "$1" || ! kill -0 "${PL_PID[ckpt]}" 2>/dev/null; }

@test "SIGTERM to ovl-ckpt: a clean checkpoint, exit 143, and an exact resume" {
	# the same plan with a slower source (the same bytes, more slowly), so
	# the stream cannot end between the first checkpoint and the signal; the
	# reference from it too (the manifest names the files as the plan does)
	sed -e "s|\.\./\.\./samples|$SAMPLES|" -e '/^source web /s|throttle=[^ ]*|throttle=100K|' \
	    "$PLAN" > slow.plan
	grep -q '^source web .*throttle=100K' slow.plan
	PLAN=$PWD/slow.plan reference
	rm -rf ck out fifo
	pl_start slow.plan ck "" "${OUT[@]}"
	# as soon as the first checkpoint is in the log
	wait_until 120 log_past_header
	pl_kill ckpt TERM
	pl_wait
	[ "${PL_RC[ckpt]}" -eq 143 ] ||
		{ echo "ovl-ckpt: exit ${PL_RC[ckpt]}"; cat ckpt.err; false; }
	grep -q 'stopped at checkpoint' ckpt.err
	run -0 pl_restore ck resume.lines
	pl_start slow.plan ck resume.lines "${OUT[@]}"
	pl_wait
	[ "${PL_RC[ckpt]}" -eq 0 ]
	same_as_reference
}

@test "killed twice in a row, restored twice: still byte-identical" {
	reference
	rm -rf ck out fifo
	pl_start "$PLAN" ck "" "${OUT[@]}"
	# killed once the first checkpoint is in, then again once the
	# restarted run has committed more
	wait_until 120 log_past_header
	pl_kill mix KILL
	wait "${PL_PID[mix]}" 2>/dev/null || true
	pl_killall
	rc=0; pl_restore ck r1 || rc=$?
	[ "$rc" -eq 1 ] && rm -rf ck
	size=$(stat -c %s ck/ckpt.log 2>/dev/null || echo 0)
	pl_start "$PLAN" ck r1 "${OUT[@]}"
	wait_until 120 log_past_or_ckpt_gone "$size"
	pl_kill construct KILL
	wait "${PL_PID[construct]}" 2>/dev/null || true
	pl_killall
	rc=0; pl_restore ck r2 || rc=$?
	[ "$rc" -le 2 ]
	[ "$rc" -eq 1 ] && rm -rf ck
	if [ "$rc" -le 1 ]; then
		pl_start "$PLAN" ck r2 "${OUT[@]}"
		pl_wait
	fi
	same_as_reference
}
