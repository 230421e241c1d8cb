#!/usr/bin/env bats
# The EXAMPLES of ovl-mix(1) and ovl-plan(5), run against samples/.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	ln -s "$SAMPLES" samples
}

@test "ovl-mix(1) EXAMPLES, taken from the page: check, mix two sources, every source behind FIFOs" {
	run_examples ovl-mix.1 3
	[ -z "$(cat "$EX"/err.*)" ]
	# 1: the plan normalized
	[ "$(head -n 1 "$EX/out.1")" = "# plan samples/plans/mix.plan: 3 sources, normalized" ]
	grep -q "^source code path=samples/code/code.tar.zst .*format=tar member-ext=.c,.h" "$EX/out.1"
	# 2: the first document of the mix
	[ "$(cat "$EX/out.2")" = '{"kind":"doc","source":"web","id":0,"mix_pos":0,"mix_tokens":0,"pos":[0,0,0],"cu' ]
	# 3: the mixed stream ends at the plan's stop tokens=1M
	tokens=$(("$("$OVL_TEST_TOOL" dump "$EX/w.3/mixed" |
	    sed -n 's/^DOC .* ntok=\([0-9]*\) .*/\1/p' | paste -sd+)"))
	[ "$tokens" -ge 1000000 ] && [ "$tokens" -lt 1100000 ]
}

@test "ovl-plan(5): the example plan is the sample plan; its weights normalized" {
	# the page's first example is the plan itself
	[ "$(man_examples ovl-plan.5 "$BATS_TEST_TMPDIR")" -ge 1 ]
	mkdir -p plans && ln -s "$SAMPLES"/web "$SAMPLES"/code "$SAMPLES"/books .
	cp ex.1.sh plans/man.plan
	run -0 "$OVL_MIX" --check plans/man.plan
	printf '%s\n' "$output" | sed 1d | grep -v '^output' > man.norm
	run -0 "$OVL_MIX" --check samples/plans/mix.plan
	printf '%s\n' "$output" | sed 1d | grep -v '^output' | sed 's|samples/||g' > sample.norm
	diff man.norm sample.norm
	run -0 bash -c '"$1" --check samples/plans/mix.plan | grep "^weights"' _ "$OVL_MIX"
	[ "${lines[0]}" = "weights at=0 web=0.6 code=0.2 books=0.2" ]
}
