#!/usr/bin/env bats
# The project itself: man pages lint-clean, the test runner's contract.

load test_helper

@test "every man page is mandoc -Tlint clean (warnings and up)" {
	run -0 env OVL_SRCDIR="$OVL_SRCDIR" "$OVL_SRCDIR/scripts/lint"
}

@test "run-tests ends with one plain 'N passed, N failed' line, after the failed and the slowest tests" {
	local t=$BATS_TEST_TMPDIR
	# (printf: bats would rewrite @test lines of a heredoc in this file)
	printf '%s "passes" { true; }\n%s "fails" { false; }\n' @test @test > "$t/tiny.bats"
	printf '%s "waits" { sleep 0.3; }\n' @test > "$t/wait.bats"
	run -1 env -i PATH="$PATH" HOME="$HOME" BATS="$OVL_BATS" OVL_BUILDDIR="$OVL_BUILDDIR" \
	    OVL_SRCDIR="$OVL_SRCDIR" OVL_TEST_TIMES="$t/times" \
	    "$OVL_SRCDIR/scripts/run-tests" "$t/tiny.bats" "$t/wait.bats" 3>&-
	[ "${lines[-1]}" = "2 passed, 1 failed" ]
	[ "${lines[-2]}" = "# failed: tiny.bats: fails" ]
	[[ "$output" == *"# the 15 slowest tests"*"wait.bats: waits"* ]]
	# every test's time, slowest first
	[ "$(cut -f2,3 "$t/times" | grep -vc outside)" -eq 3 ]
	[ "$(grep -v outside "$t/times" | head -n 1 | cut -f2,3)" = "wait.bats	waits" ]
	sort -s -t '	' -k1,1nr -c "$t/times"
}

@test "run-tests fails loudly when bats is missing" {
	run -2 env BATS=/nonexistent "$OVL_SRCDIR/scripts/run-tests"
	[[ "$output" == *"bats not found"* ]]
}

@test "bootstrap rejects an unknown command with status 2" {
	run -2 "$OVL_SRCDIR/scripts/bootstrap" frobnicate
	[[ "$output" == usage:* ]]
}

@test "the library exports only ovl_ names, and no file in src/ passes 1,200 lines (HACKING.md)" {
	local bad
	# weak symbols (W, V) are the C++ library's template copies in spm.o
	bad=$(nm -g --defined-only "$OVL_BUILDDIR/libovl.a" |
	    awk 'NF == 3 && $2 !~ /^[WV]$/ && $3 !~ /^(ovl_|__odr_asan)/ { print $3 }')
	[ -z "$bad" ]
	bad=$(find "$OVL_SRCDIR/src" -name '*.[ch]' -o -name '*.cc' | xargs wc -l |
	    awk '$2 != "total" && $1 >= 1200')
	[ -z "$bad" ] || { echo "$bad"; false; }
}
