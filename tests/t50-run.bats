#!/usr/bin/env bats
# ovl-run: the supervisor wires a plan's pipeline, cleans up after itself,
# names the root cause of a failure, restarts from checkpoints, and never
# evaluates plan text as shell code.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
}

# reference: the same plan run by hand, stage by stage through files (in
# the current directory)
reference() {	# reference PLAN OUTPREFIX
	local plan=$1 i=0 name args inputs=()
	while IFS= read -r -d '' name && IFS= read -r -d '' _ &&
		IFS= read -r -d '' _ && IFS= read -r -d '' _; do
		mapfile -d '' args < <("$OVL_MIX" --source-args "$name" "$plan")
		"$OVL_SOURCE" "${args[@]}" > "src.$i.frames" || return 1
		inputs+=("$name=src.$i.frames")
		i=$((i + 1))
	done < <("$OVL_MIX" --list-sources "$plan")
	"$OVL_MIX" -q "$plan" "${inputs[@]}" > mix.frames || return 1
	"$OVL_CONSTRUCT" "$plan" < mix.frames > con.frames || return 1
	"$OVL_CKPT" -q --dir ref-ckpt --format jsonl -o "$2" "$plan" < con.frames
}

# The references of the file's tests, run by hand once: small_plan's in
# $BATS_FILE_TMPDIR/small.jsonl and slow_web_plan's in slow.jsonl (a
# throttle changes no byte of the output)
setup_file() {
	local d
	for d in small slow; do
		mkdir -p "$BATS_FILE_TMPDIR/$d"
		cd "$BATS_FILE_TMPDIR/$d" || return 1
		if [ "$d" = small ]; then small_plan p.plan; else slow_web_plan p.plan; fi
		# (a throttle changes the time a run takes, never its bytes)
		sed -i 's/ throttle=[0-9]*K//' p.plan
		reference p.plan "$BATS_FILE_TMPDIR/$d" || return 1
	done
}

no_leftovers() {	# no process still has the run directory in its arguments
	! pgrep -f -- "$1" > /dev/null
}

@test "ovl-run --help, --version, usage errors" {
	run -0 "$OVL_RUN" --help
	[[ "${lines[0]}" == "usage: ovl-run "* ]]
	run -0 "$OVL_RUN" --version
	[[ "$output" =~ ^ovl-run\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
	run -2 "$OVL_RUN"
	[[ "$output" == usage:* ]]
	run -2 "$OVL_RUN" --restart x plan
	run -2 "$OVL_RUN" --frobnicate plan
}

@test "ovl-run: a bad plan is exit 2 with file:line" {
	printf 'source web path=%s/web/web-0.jsonl\nfrobnicate 1\n' "$SAMPLES" > bad.plan
	run -2 "$OVL_RUN" bad.plan
	[[ "$output" == *"bad.plan:2:"* ]]
}

@test "ovl-run runs a plan to the same bytes as the stages run by hand" {
	small_plan p.plan
	run -0 "$OVL_RUN" -q -d run p.plan
	[ -s out/small.jsonl ]
	cmp out/small.jsonl "$BATS_FILE_TMPDIR/small.jsonl"
	# the run directory holds no FIFO any more, and no process is left
	[ -z "$(find run -type p)" ]
	no_leftovers "$BATS_TEST_TMPDIR/run"
}

@test "ovl-run removes its temporary run directory" {
	small_plan p.plan
	mkdir tmp
	TMPDIR=$BATS_TEST_TMPDIR/tmp run -0 "$OVL_RUN" -q p.plan
	[ -z "$(ls tmp)" ]
}

@test "ovl-run names the root cause, not the victims" {
	small_plan p.plan
	printf '{"text": "fine"}\n{"text": broken\n' > broken.jsonl
	cat >> p.plan <<EOF
source bad path=$BATS_TEST_TMPDIR/broken.jsonl format=jsonl on-exhaust=drop
weights web=1 book=1 bad=1
EOF
	sed -i '/^weights web=1 book=1$/d' p.plan
	run -1 "$OVL_RUN" --restart 0 -d run p.plan
	[[ "$output" == *"source:bad:0/1 failed: exit status 1 (root cause)"* ]]
	[[ "$output" == *"broken.jsonl"* ]]
	no_leftovers "$BATS_TEST_TMPDIR/run"
}

@test "ovl-run treats plan strings that look like shell code as data" {
	d='we ird $(touch pwned) `touch pwned2` "q" *'
	mkdir -p "$d"
	cp "$SAMPLES/web/web-0.jsonl" "$d/a \$HOME;x.jsonl"
	cat > p.plan <<EOF
source web path="$BATS_TEST_TMPDIR/we ird \$(touch pwned) \`touch pwned2\` \\"q\\" */*.jsonl" format=jsonl on-exhaust=drop
seq-len 256
ranks 2
checkpoint every=2 dir=ckpt
output format=jsonl path="out/\$(touch pwned3)"
EOF
	run -0 "$OVL_RUN" -q -d run p.plan
	[ ! -e pwned ] && [ ! -e pwned2 ] && [ ! -e pwned3 ]
	[ -s 'out/$(touch pwned3).jsonl' ]
}

@test "ovl-run cleans up every process and FIFO on SIGTERM" {
	small_plan p.plan
	# a slow source keeps the run going until the signal
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	"$OVL_RUN" -q -d run p.plan 3>&- 2> err &
	pid=$!
	# running: the mixer has written its statistics once
	wait_until 30 test -s run/mix.stats
	kill -TERM "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 143 ]
	[ -z "$(find run -type p)" ]
	no_leftovers "$BATS_TEST_TMPDIR/run"
}

@test "ovl-run restarts a killed stage alone from the last checkpoint" {
	small_plan p.plan
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	"$OVL_RUN" -d run --restart 5 p.plan 3>&- 2> err &
	pid=$!
	# once checkpoint 2 is committed, kill the mixer
	wait_ckpt ckpt 2 "$pid"
	kill -KILL "$(pgrep -P "$pid" -f -- "ovl-mix .*$BATS_TEST_TMPDIR/run/")"
	st=0
	wait "$pid" || st=$?
	cat err >&2
	[ "$st" -eq 0 ]
	# the mixer alone is restarted (with its sources), the rest runs on
	grep -q 'mix killed by signal 9 (KILL): restarted alone at checkpoint' err
	! grep -q 'restarting from the last checkpoint' err
	cmp out/small.jsonl "$BATS_FILE_TMPDIR/small.jsonl"
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
}

# slow_web_plan FILE: small_plan with a throttled, longer web source (the
# mixer waits on it), weighted 3:1, and a checkpoint every step
slow_web_plan() {
	small_plan "$1"
	sed -i -e "s|^source web .*|source web  path=$SAMPLES/web/web-0.jsonl path=$SAMPLES/web/web-1.jsonl path=$SAMPLES/web/web-2.jsonl.zst format=jsonl on-exhaust=drop throttle=30K|" \
	    -e 's|^weights .*|weights web=3 book=1|' -e 's|^checkpoint every=2|checkpoint every=1|' "$1"
}

@test "ovl-run --autoscale adds partitions to a slow source, output unchanged" {
	slow_web_plan p.plan
	run -0 "$OVL_RUN" -d run --autoscale --scale-interval 1 --status-interval 0.5 \
	    --max-partitions 4 p.plan
	[[ "$output" == *"autoscale: web 1 -> 2 partitions"* ]]
	cmp out/small.jsonl "$BATS_FILE_TMPDIR/slow.jsonl"
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
}

@test "ovl-run needs neither jq nor awk: autoscaling and status lines with a PATH without them" {
	slow_web_plan p.plan
	path_without nobin jq awk gawk mawk nawk original-awk
	PATH=$BATS_TEST_TMPDIR/nobin run -0 "$OVL_RUN" -v -d run --autoscale \
	    --scale-interval 1 --status-interval 0.5 --max-partitions 4 p.plan
	[[ "$output" == *"autoscale: web 1 -> 2 partitions (the mixer waited "*"% of the last "*" s on it)"* ]]
	[[ "$output" == *"step "*" tokens, "*" tok/s"*" | web "*" tok/s "*"%/"*"%, book "* ]]
	[[ "$output" != *"command not found"* ]]
	cmp out/small.jsonl "$BATS_FILE_TMPDIR/slow.jsonl"
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
}

@test "ovl-run(1) EXAMPLES, taken from the page, as one session: pack, resume, autoscale" {
	[ "$(man_examples ovl-run.1 "$BATS_TEST_TMPDIR")" -eq 3 ]
	cat ex.1.sh ex.2.sh ex.3.sh > ex.sh
	ln -s "$SAMPLES" samples
	mkdir bin
	for t in source mix construct ckpt run; do
		ln -s "$OVL_BUILDDIR/ovl-$t" "bin/ovl-$t"
	done
	PATH="$BATS_TEST_TMPDIR/bin:$PATH" run -0 bash -e ex.sh
	[[ "$output" == *"is the end of the run: nothing to resume"* ]]
	run -0 "$OVL_CKPT" verify ck out/packed.bin
	# autoscaling never changes a byte
	cmp out/packed.bin out2/packed.bin
	cmp out/packed.idx out2/packed.idx
}

@test "a second run into a checkpoint directory that holds a run is refused at once, pointing to --resume" {
	small_plan p.plan
	run -0 "$OVL_RUN" -q p.plan
	cp out/small.jsonl first.jsonl
	run -2 --separate-stderr "$OVL_RUN" -q p.plan
	[[ "$stderr" == "ovl-run: 'ckpt' already holds "*" checkpoints (the last is "*"): --resume continues that run; another -c directory starts a new one" ]]
	[[ "$stderr" != *"root cause"* ]]
	# nothing was touched
	cmp out/small.jsonl first.jsonl
	run -0 "$OVL_RUN" -q --resume p.plan
	run -0 "$OVL_RUN" -q -c ckpt2 -o out2/small p.plan
	cmp out/small.jsonl out2/small.jsonl
}

@test "ovl-run called through a symbolic link finds the tools beside the real script" {
	small_plan p.plan
	mkdir -p elsewhere
	ln -s "$OVL_RUN" elsewhere/ovl-run
	PATH=$BATS_TEST_TMPDIR/elsewhere:$PATH run -0 ovl-run -q p.plan
	[ -s out/small.jsonl ]
}

@test "ovl-ckpt show --print0: checkpoints 0 for a fresh directory, then last, step, tokens, ended" {
	"$OVL_CKPT" show --print0 nothing-here | tr '\0' ' ' > words
	[ "$(cat words)" = "checkpoints 0 " ]
	small_plan p.plan
	run -0 "$OVL_RUN" -q p.plan
	"$OVL_CKPT" show --print0 ckpt | tr '\0' '\n' > words
	n=$("$OVL_CKPT" show --list ckpt | tail -n 1 | cut -d' ' -f1)
	[ "$(sed -n 1p words)" = checkpoints ]
	[ "$(sed -n 3p words)" = last ] && [ "$(sed -n 4p words)" = "$n" ]
	[ "$(sed -n 5p words)" = step ] && [ "$(sed -n 7p words)" = tokens ]
	[ "$(sed -n 9p words)" = ended ] && [ "$(sed -n 10p words)" = 1 ]
}

@test "kill -9 of ovl-run: its stages die with it, and --resume at once continues byte-identically" {
	small_plan p.plan
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	"$OVL_RUN" -q -d run p.plan 3>&- 2> err &
	pid=$!
	wait_ckpt ckpt 2
	kill -KILL "$pid"
	wait "$pid" || true
	# no stage outlives its supervisor (OVL_SUPERVISOR, PR_SET_PDEATHSIG)
	wait_gone "$BATS_TEST_TMPDIR/run/"
	[ -f run/ovl-run.pid ]
	# the dead supervisor's run directory is reclaimed, the lock is free
	run -0 "$OVL_RUN" -q --resume -d run p.plan
	cmp out/small.jsonl "$BATS_FILE_TMPDIR/small.jsonl"
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
	[ ! -e run/ovl-run.pid ]
}

@test "a temporary run directory of a killed ovl-run is reclaimed by the next start; a live one, a young one without its lock and another user's are not" {
	small_plan p.plan
	sed -i 's|^source web .*|& throttle=20K|' p.plan
	mkdir tmp
	export TMPDIR=$BATS_TEST_TMPDIR/tmp
	"$OVL_RUN" -q p.plan 3>&- 2> err &
	pid=$!
	wait_ckpt ckpt 1
	d=$(ls -d tmp/ovl-run.*)
	# a start under way (no lock file yet), one older than a day
	mkdir -m 700 tmp/ovl-run.young tmp/ovl-run.old
	touch -d '2 days ago' tmp/ovl-run.old
	# a second supervisor on the same run directory is refused; its
	# start reclaims nothing of the live run
	run -1 "$OVL_RUN" -q -c ck2 -o out2/x -d "$d" p.plan
	[[ "$output" == *"run directory '$BATS_TEST_TMPDIR/$d' is in use by ovl-run pid $pid"* ]]
	[ -f "$d/ovl-run.pid" ] && [ -d tmp/ovl-run.young ] && [ ! -e tmp/ovl-run.old ]
	kill -KILL "$pid"
	wait "$pid" || true
	wait_gone "$BATS_TEST_TMPDIR/tmp/"
	[ -d "$d" ]
	# another user's directory of a dead run is not ours to reclaim
	others=
	if [ "$(id -u)" -eq 0 ]; then
		cp -a "$d" tmp/ovl-run.other
		chown -R 65534 tmp/ovl-run.other
		others=ovl-run.other
	fi
	rm -rf ckpt out
	run -0 "$OVL_RUN" -q p.plan
	[ "$(ls tmp | tr '\n' ' ')" = "${others:+$others }ovl-run.young " ]
}

@test "a restore that fails for another reason than 'no checkpoint yet' is reported as itself, not as a fresh start" {
	small_plan p.plan
	run -0 "$OVL_RUN" -q --restart 0 p.plan
	# a partial run: cut the log back to checkpoint 2
	run -0 "$OVL_CKPT" restore ckpt --at 2
	# another process holds the checkpoint directory
	# (-o: the lock is flock's alone, so it goes with flock)
	flock -o ckpt/lock sleep 600 3>&- &
	holder=$!
	wait_until 10 not flock -n ckpt/lock true || true
	run -1 "$OVL_RUN" -q --resume --lock-wait 1 p.plan
	pkill -P "$holder" sleep
	wait "$holder" || true
	[[ "$output" == *"is in use by another ovl-ckpt (waited for it to end)"* ]]
	[[ "$output" == *"cannot restore from checkpoint 2 in "* ]]
	[[ "$output" != *"from the beginning"* ]]
	[[ "$output" != *"no checkpoint"* ]]
}

@test "a configuration error is not restarted; the same failure from the same checkpoint is not retried" {
	small_plan p.plan
	# a bad output directory: ovl-ckpt cannot create its outputs (exit 1),
	# the same from the same point on every restart
	printf 'x' > notadir
	sed -i "s|^output format=jsonl path=out/small$|output format=jsonl path=notadir/small|" p.plan
	run -1 "$OVL_RUN" --restart 5 p.plan
	[ "$(grep -c 'ckpt failed: exit status 1 (root cause)' <<< "$output")" -eq 2 ]
	[[ "$output" == *"not restarting: ckpt failed the same way from the same checkpoint (none) twice"* ]]
	# bad data in a source: exit 1, the same again after one restart, then stop
	small_plan q.plan
	printf '{"text": "fine"}\n{"text": broken\n' > broken.jsonl
	echo "source bad path=$BATS_TEST_TMPDIR/broken.jsonl format=jsonl on-exhaust=drop" >> q.plan
	sed -i 's/^weights web=1 book=1$/weights web=1 book=1 bad=1/' q.plan
	rm -rf ckpt
	run -1 "$OVL_RUN" --restart 5 q.plan
	[ "$(grep -c 'source:bad:0/1 failed: exit status 1 (root cause)' <<< "$output")" -eq 2 ]
	[[ "$output" == *"not restarting: source:bad:0/1 failed the same way from the same checkpoint"* ]]
}
