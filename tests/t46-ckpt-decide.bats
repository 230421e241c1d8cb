#!/usr/bin/env bats
# ovl-ckpt decides where the state is: --resume auto and restore --fresh-ok
# under the directory's lock, outputs owned by one checkpoint directory
# (--overwrite-output, output overwrite=), --wait-readers from the plan, and
# ovl-run --verify-all (checkpoint verify-all=).

load test_helper

GEN="$OVL_BUILDDIR/tests/unit/t-ckptgen"

# 12 steps, 2 ranks, a checkpoint every 2 steps: barriers 1..5 at bytes
# 1880, 4428, 7072, 9364, 11496 and END at 13868
GENARGS=(5 12 2 2 300)

# the stream, generated once for the file's tests
setup_file() {
	"$GEN" "${GENARGS[@]}" > "$BATS_FILE_TMPDIR/full.frames"
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	cp "$BATS_FILE_TMPDIR/full.frames" full.frames
}

@test "two runs with different checkpoint directories and one output: the first run's dataset stays intact, the second is refused (exit 2, naming the first directory)" {
	small_plan p.plan
	run -0 "$OVL_RUN" -q -c ck1 p.plan
	cp out/small.jsonl first.jsonl
	run -2 --separate-stderr "$OVL_RUN" -q -c ck2 p.plan
	[[ "$stderr" == *"ovl-ckpt: '$BATS_TEST_TMPDIR/out/small.jsonl' belongs to the run of checkpoint directory '$BATS_TEST_TMPDIR/ck1'"* ]]
	[[ "$stderr" == *"not restarting"* ]]
	cmp out/small.jsonl first.jsonl
	run -0 "$OVL_CKPT" verify ck1 out/small.jsonl
	# started together: one of them writes, the other is refused, never
	# retried, and the winner's dataset verifies
	"$OVL_RUN" -q -c ck3 -o out/both p.plan 2> r3.err 3>&- &
	pid=$!
	"$OVL_RUN" -q -c ck4 -o out/both p.plan 2> r4.err && rc4=0 || rc4=$?
	wait "$pid" && rc3=0 || rc3=$?
	[ "$rc3$rc4" = 02 ] || [ "$rc3$rc4" = 20 ]
	if [ "$rc3" -eq 0 ]; then win=ck3 lose=r4.err; else win=ck4 lose=r3.err; fi
	grep -Eq "belongs to the run of checkpoint directory '$BATS_TEST_TMPDIR/$win'|is being written by another ovl-ckpt" "$lose"
	run -0 "$OVL_CKPT" verify "$win" out/both.jsonl
}

@test "ovl-ckpt --overwrite-output and output overwrite=yes take another directory's output; its own resumed output is always taken" {
	"$OVL_CKPT" -q --dir ck1 --format jsonl -o out/j < full.frames
	run -2 --separate-stderr "$OVL_CKPT" --dir ck2 --format jsonl -o out/j < full.frames
	[ "$stderr" = "ovl-ckpt: '$BATS_TEST_TMPDIR/out/j.jsonl' belongs to the run of checkpoint directory '$BATS_TEST_TMPDIR/ck1': resume that run, write another output, or overwrite it (--overwrite-output, the plan's output overwrite=yes)" ]
	run -0 "$OVL_CKPT" verify ck1 out/j.jsonl
	run -0 --separate-stderr "$OVL_CKPT" --dir ck2 --format jsonl -o out/j --overwrite-output < full.frames
	[[ "$stderr" == *"taking over the output of '$BATS_TEST_TMPDIR/ck1'"* ]]
	run -0 "$OVL_CKPT" verify ck2 out/j.jsonl
	# the plan's key, for the sink and for ovl-run
	small_plan o.plan
	sed -i 's|^output .*|output format=jsonl path=out/j overwrite=yes|' o.plan
	run -0 "$OVL_CKPT" -q --dir ck3 o.plan < full.frames
	run -0 "$OVL_CKPT" verify ck3 out/j.jsonl
	small_plan bad.plan
	sed -i 's|^output .*|output format=jsonl path=out/j overwrite=maybe|' bad.plan
	run -2 "$OVL_CKPT" --dir ck4 bad.plan < full.frames
	# an owner directory that is gone (no log) no longer owns the file
	rm -rf ck3
	run -0 "$OVL_CKPT" -q --dir ck5 --format jsonl -o out/j < full.frames
	# a resumed run takes its own output again
	head -c 9364 full.frames | "$OVL_CKPT" -q --dir ck6 --format jsonl -o out/k || true
	run -0 "$OVL_CKPT" restore -q ck6
	"$GEN" "${GENARGS[@]}" 3 | "$OVL_CKPT" -q --dir ck6 --format jsonl -o out/k --resume 3
	cmp out/k.jsonl out/j.jsonl
}

@test "ovl-ckpt --resume auto: fresh without a checkpoint, else after the last one, said on standard error; restore --fresh-ok answers 'fresh'" {
	"$OVL_CKPT" restore -q --fresh-ok --print0 missing > fresh.out
	printf 'fresh\0\0' | cmp - fresh.out
	[ ! -e missing ]
	run -0 --separate-stderr "$OVL_CKPT" restore --fresh-ok ck
	[ "$output" = fresh ]
	[[ "$stderr" == *"no checkpoint in 'ck': the run starts fresh"* ]]
	# without --fresh-ok, no checkpoint is still exit 1
	run -1 "$OVL_CKPT" restore ck
	# the first 3 checkpoints, then the sink dies
	head -c 9364 full.frames > part.frames
	run -3 --separate-stderr "$OVL_CKPT" --dir ck --format jsonl -o out/j --resume auto < part.frames
	[[ "$stderr" == *"'$BATS_TEST_TMPDIR/ck' holds no checkpoint: starting fresh"* ]]
	run -0 "$OVL_CKPT" restore --fresh-ok ck
	[ "${lines[-1]}" = "ckpt --resume 3" ]
	run -0 --separate-stderr "$OVL_CKPT" --dir ck --format jsonl -o out/j --resume auto < <("$GEN" "${GENARGS[@]}" 3)
	[[ "$stderr" == *"resuming after checkpoint 3 of '$BATS_TEST_TMPDIR/ck'"* ]]
	"$OVL_CKPT" -q --dir ref --format jsonl -o ref/j < full.frames
	cmp out/j.jsonl ref/j.jsonl
	run -0 "$OVL_CKPT" verify ck out/j.jsonl
	# auto on a finished run: nothing to resume (a configuration error)
	run -2 "$OVL_CKPT" --dir ck --format jsonl -o out/j --resume auto < full.frames
	run -2 "$OVL_CKPT" --dir ck --resume auto --step-from-readers r.out
}

@test "ovl-ckpt: the plan's output wait-readers= bounds the wait for a FIFO's reader; --wait-readers wins; 0 is accepted" {
	mkfifo fifo0 fifo1
	small_plan w.plan
	sed -i 's|^output .*|output format=frames per-rank=fifo%d wait-readers=1|' w.plan
	run -1 --separate-stderr "$OVL_CKPT" --dir ck w.plan < full.frames
	[[ "$stderr" == *"no reader opened '$BATS_TEST_TMPDIR/fifo0' within 1 s (--wait-readers)"* ]]
	run -1 --separate-stderr "$OVL_CKPT" --dir ck2 --wait-readers 2 w.plan < full.frames
	[[ "$stderr" == *"within 2 s (--wait-readers)"* ]]
	small_plan bad.plan
	sed -i 's|^output .*|output format=frames per-rank=x%d wait-readers=86401|' bad.plan
	run -2 "$OVL_CKPT" --dir ck3 bad.plan < full.frames
	# 0: readers that come late and take every byte, the run ends ok
	cat fifo0 > r0.frames 3>&- &
	cat fifo1 > r1.frames 3>&- &
	run -0 "$OVL_CKPT" -q --dir ck4 --wait-readers 0 --per-rank fifo%d < full.frames
	wait
	"$OVL_CKPT" -q --dir ref --per-rank ref%d < full.frames
	cmp r0.frames ref0
	cmp r1.frames ref1
}

@test "ovl-run --verify-all and checkpoint verify-all=yes: a resume checks every kept byte (a flipped byte of the first segment is exit 3)" {
	small_plan p.plan
	run -0 "$OVL_RUN" -q p.plan
	# back to checkpoint 4, as if the run had been killed there
	run -0 "$OVL_CKPT" restore --at 4 ckpt
	cp out/small.jsonl keep.jsonl
	printf 'X' | dd of=out/small.jsonl bs=1 seek=3 conv=notrunc 2>/dev/null
	run -3 --separate-stderr "$OVL_RUN" -q --resume --verify-all p.plan
	[[ "$stderr" == *"do not match checkpoint 1"* ]]
	small_plan v.plan
	sed -i 's/^checkpoint every=2 dir=ckpt$/checkpoint every=2 dir=ckpt verify-all=yes/' v.plan
	grep -q 'verify-all=yes' v.plan
	run -3 "$OVL_RUN" -q --resume v.plan
	# the good bytes back: the run resumes and completes
	cp keep.jsonl out/small.jsonl
	run -0 "$OVL_RUN" -q --resume --verify-all p.plan
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
	# the summary says how much was proven: the hand-made restore checked
	# the last segment only, the resume every kept byte
	run -0 "$OVL_CKPT" summary ckpt
	[[ "$output" == *"proof    partial: 1 of 2 restores checked only the last segment"* ]]
	run -0 "$OVL_CKPT" summary --json ckpt
	[[ "$output" == *'"proof":{"whole":false,"restores":2,"verify_all":1}'* ]]
	# a fresh run starts the record anew; every restore with --verify-all
	# proves the whole output
	run -0 "$OVL_RUN" -q -c ck2 -o out/two p.plan
	run -0 "$OVL_CKPT" summary --json ck2
	[[ "$output" == *'"proof":{"whole":true,"restores":0,"verify_all":0}'* ]]
	run -0 "$OVL_CKPT" restore --verify-all --at 4 ck2
	run -0 "$OVL_RUN" -q --resume -c ck2 -o out/two v.plan
	run -0 "$OVL_CKPT" summary ck2
	[[ "$output" == *"proof    whole: every kept byte checked against the hash chain at each of 2 restores (--verify-all)"* ]]
	cmp out/two.jsonl out/small.jsonl
}
