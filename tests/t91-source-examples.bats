#!/usr/bin/env bats
# The EXAMPLES of ovl-source(1) and ovl(7), taken from the pages themselves
# (every .Bd -literal block), run against samples/: each must succeed and
# print or write something.

load test_helper

setup() {
	T=$BATS_TEST_TMPDIR
	ln -s "$SAMPLES" "$T/samples"
	PATH="$OVL_BUILDDIR:$PATH"
}

@test "ovl-source(1) EXAMPLES run against samples/" {
	run_examples ovl-source.1 7
	# nothing on stderr
	[ -z "$(cat "$EX"/err.*)" ]
	# the resume example continues after the fifth document
	grep -q '"pos":\[0,0,5\]' "$EX/out.6"
	[ "$(wc -l < "$EX/out.6")" -eq 295 ]
	# parquet: the first row, then the third row group's first row
	[ "$(grep -c '"pos":\[0,0,0\]' "$EX/out.5")" -eq 1 ]
	[ "$(grep -c '"pos":\[0,2,0\]' "$EX/out.5")" -eq 1 ]
}

@test "ovl(7) EXAMPLES run against samples/" {
	[ -x "$OVL_CONSTRUCT" ] && [ -x "$OVL_MIX" ] || skip "ovl-construct or ovl-mix not built"
	run_examples ovl.7 4
	[ -z "$(cat "$EX"/err.*)" ]
}
