#!/usr/bin/env bats
# The EXAMPLES of ovl-mix(1) and ovl-plan(5), run against samples/.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	ln -s "$SAMPLES" samples
}

@test "ovl-mix(1): check a plan and see what it will do" {
	run -0 "$OVL_MIX" --check samples/plans/mix.plan
	[ "${lines[0]}" = "# plan samples/plans/mix.plan: 3 sources, normalized" ]
	[[ "$output" == *"source code path=samples/code/code.tar.zst format=tar member-ext=.c,.h"* ]]
}

@test "ovl-mix(1): mix two sources of the small sample plan" {
	"$OVL_SOURCE" --id 0 web samples/web/web-0.jsonl > web.frames
	"$OVL_SOURCE" --id 1 --doc-per file book samples/books/book-0[0-4].txt \
	    > book.frames
	"$OVL_MIX" --json samples/plans/small.plan web=web.frames book=book.frames |
	    grep -m 1 '"kind":"doc"' | cut -c 1-80 > out
	[ "$(cat out)" = '{"kind":"doc","source":"web","id":0,"mix_pos":0,"mix_tokens":0,"pos":[0,0,0],"cu' ]
}

@test "ovl-mix(1): source partitions behind FIFOs, arguments from the plan" {
	mkfifo p0 p1 w0 w1 c0
	mapfile -d '' args < <("$OVL_MIX" --source-args books samples/plans/mix.plan)
	"$OVL_SOURCE" --partition 0/2 "${args[@]}" > p0 3>&- &
	"$OVL_SOURCE" --partition 1/2 "${args[@]}" > p1 3>&- &
	mapfile -d '' args < <("$OVL_MIX" --source-args web samples/plans/mix.plan)
	"$OVL_SOURCE" --partition 0/2 "${args[@]}" > w0 3>&- &
	"$OVL_SOURCE" --partition 1/2 "${args[@]}" > w1 3>&- &
	mapfile -d '' args < <("$OVL_MIX" --source-args code samples/plans/mix.plan)
	"$OVL_SOURCE" "${args[@]}" > c0 3>&- &
	"$OVL_MIX" samples/plans/mix.plan web=w0 web=w1 code=c0 books=p0 books=p1 > mixed
	wait
	# the mixed stream ends at the plan's stop tokens=1M
	tokens=$(("$("$OVL_TEST_TOOL" dump mixed |
	    sed -n 's/^DOC .* ntok=\([0-9]*\) .*/\1/p' | paste -sd+)"))
	[ "$tokens" -ge 1000000 ] && [ "$tokens" -lt 1100000 ]
}

@test "ovl-plan(5): the example plan is the sample plan; its weights normalized" {
	run -0 bash -c 'sed -n "/^\.Sh EXAMPLES/,/^\.Ed/p" "$1" | sed -n "/^\.Bd/,/^\.Ed/p" | sed "1d;\$d" | sed "s/\\\\e\$/\\\\/"' _ "$OVL_SRCDIR/man/ovl-plan.5"
	mkdir -p plans && ln -s "$SAMPLES"/web "$SAMPLES"/code "$SAMPLES"/books .
	printf '%s\n' "$output" > plans/man.plan
	run -0 "$OVL_MIX" --check plans/man.plan
	printf '%s\n' "$output" | sed 1d | grep -v '^output' > man.norm
	run -0 "$OVL_MIX" --check samples/plans/mix.plan
	printf '%s\n' "$output" | sed 1d | grep -v '^output' | sed 's|samples/||g' > sample.norm
	diff man.norm sample.norm
	run -0 bash -c '"$1" --check samples/plans/mix.plan | grep "^weights"' _ "$OVL_MIX"
	[ "${lines[0]}" = "weights at=0 web=0.6 code=0.2 books=0.2" ]
}
