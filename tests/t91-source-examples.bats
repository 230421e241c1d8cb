#!/usr/bin/env bats
# The EXAMPLES of ovl-source(1), ovl(7) and ovl-frame(5), taken from the pages themselves
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

@test "ovl-frame(5) EXAMPLES run against samples/: numpy reads the first document's ids" {
	ovl_python_numpy >/dev/null || skip "no python3 with numpy"
	run_examples ovl-frame.5 2
	# the first document of web-0.jsonl: "Brea..." in bytes
	[[ "$(cat "$EX/out.1")" == "[ 66 114 101 "* ]]
	# the TCP example: the constructor's sequences
	[ -s "$EX/w.2/seqs.frames" ]
}
