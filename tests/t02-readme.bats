#!/usr/bin/env bats
# The README's tour runs as written, from a checkout's top directory.

load test_helper

@test "README: the tour runs as written and does what its comments say" {
	cd "$BATS_TEST_TMPDIR"
	ln -s "$SAMPLES" samples
	# the tour's block, with its build directory this build's
	sed -n '/^## A tour/,/^| stage/p' "$OVL_SRCDIR/README.md" |
	    sed -n '/^```sh$/,/^```$/p' | sed '1d;$d' |
	    sed "s|^b=build\$|b=$OVL_BUILDDIR|" > tour.sh
	grep -q '^\$b/ovl-run --resume' tour.sh
	run -0 --separate-stderr bash -e tour.sh
	# the plan normalized, the last checkpoint shown, the run complete
	[[ "$output" == *"# plan samples/plans/mix.plan: 3 sources, normalized"* ]]
	[[ "$output" == *"(end of run)"* ]]
	[[ "$stderr" == *"is complete: nothing to resume"* ]]
	# the hand-made pipeline: a document, then a sequence
	[[ "$output" == *'{"source":"web"'* ]]
	[[ "$output" == *'{"kind":"meta"'* ]]
	run -0 "$OVL_CKPT" verify tour/ckpt tour/packed.bin
}
