#!/usr/bin/env bats
# ovl-run: the supervisor wires a plan's pipeline, cleans up after itself,
# names the root cause of a failure, restarts from checkpoints, and never
# evaluates plan text as shell code.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
}

# small_plan FILE [EXTRA-LINES]: two finite sources, checkpoints every 2 steps
small_plan() {
	cat > "$1" <<EOF
source web  path=$SAMPLES/web/web-0.jsonl format=jsonl on-exhaust=drop
source book path=$SAMPLES/books/book-0[0-4].txt doc-per=file on-exhaust=drop
weights web=1 book=1
seq-len 256
ranks 2
checkpoint every=2 dir=ckpt
output format=jsonl path=out/small
${2:-}
EOF
}

# reference: the same plan run by hand, stage by stage through files
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

@test "ovl-run synopsis matches the man page" {
	want=$("$OVL_RUN" --help | head -n 1 | sed 's/^usage: //')
	got=$(mandoc -Tutf8 "$OVL_SRCDIR/man/ovl-run.1" | col -bx |
		sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | sed '1d;$d' | tr -s ' \n' '  ' |
		sed 's/^ *//; s/ *$//')
	[ "$want" = "$got" ]
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
	reference p.plan ref
	cmp out/small.jsonl ref.jsonl
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
	for _ in $(seq 50); do
		[ -n "$(find run -type p 2>/dev/null)" ] && break
		sleep 0.1
	done
	sleep 0.5
	kill -TERM "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 143 ]
	[ -z "$(find run -type p)" ]
	no_leftovers "$BATS_TEST_TMPDIR/run"
}

@test "ovl-run restarts from the last checkpoint after a stage is killed" {
	small_plan p.plan
	sed -i 's|^source web .*|& throttle=40K|' p.plan
	reference p.plan ref
	"$OVL_RUN" -d run --restart 5 p.plan 3>&- 2> err &
	pid=$!
	# wait for a checkpoint, then kill the mixer
	for _ in $(seq 200); do
		"$OVL_CKPT" show ckpt 2>/dev/null | grep -q '^checkpoint [2-9]' && break
		sleep 0.05
	done
	pkill -KILL -f -- "ovl-mix .*$BATS_TEST_TMPDIR/run/" || true
	st=0
	wait "$pid" || st=$?
	cat err >&2
	[ "$st" -eq 0 ]
	grep -q 'mix failed: killed by signal 9 (KILL) (root cause)' err
	grep -q 'restarting from the last checkpoint' err
	cmp out/small.jsonl ref.jsonl
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
}

@test "ovl-run --autoscale adds partitions to a slow source, output unchanged" {
	cat > p.plan <<EOF2
source web  path=$SAMPLES/web/web-0.jsonl path=$SAMPLES/web/web-1.jsonl path=$SAMPLES/web/web-2.jsonl.zst format=jsonl on-exhaust=drop throttle=60K
source book path=$SAMPLES/books/book-0[0-4].txt doc-per=file on-exhaust=drop
weights web=3 book=1
seq-len 256
ranks 2
checkpoint every=1 dir=ckpt
output format=jsonl path=out/small
EOF2
	reference p.plan ref
	run -0 "$OVL_RUN" -d run --autoscale --scale-interval 1 --status-interval 0.5 \
	    --max-partitions 4 p.plan
	[[ "$output" == *"autoscale: web 1 -> 2 partitions"* ]]
	cmp out/small.jsonl ref.jsonl
	run -0 "$OVL_CKPT" verify ckpt out/small.jsonl
}
