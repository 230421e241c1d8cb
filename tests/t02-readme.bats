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

@test "README: the trainer's side runs as written after the tour: two ranks read live" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	"$py" -c 'import torch' 2> /dev/null || skip "no python3-torch"
	cd "$BATS_TEST_TMPDIR"
	ln -s "$SAMPLES" samples
	ln -s "$OVL_SRCDIR/python" python
	for part in "## A tour" "## The trainer's side"; do
		sed -n "/^$part/,/^## /p" "$OVL_SRCDIR/README.md" |
		    sed -n '/^```sh$/,/^```$/p' | sed '1d;$d'
	done | sed "s|^b=build\$|b=$OVL_BUILDDIR|; s|python3 -c|$py -c|" > readme.sh
	grep -q 'RankDataset' readme.sh
	run -0 --separate-stderr bash -e readme.sh 3>&-
	# each rank saw every step, in order from 0, with tokens, the same steps
	n=$(wc -l < tour/rank0.log)
	[ "$n" -ge 20 ]
	for r in 0 1; do
		[ "$(cut -d' ' -f3 "tour/rank$r.log" | tr '\n' ' ')" = "$(seq 0 $((n - 1)) | tr '\n' ' ')" ]
		! grep -q 'tokens 0$' "tour/rank$r.log" || false
	done
}
