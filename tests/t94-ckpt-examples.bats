#!/usr/bin/env bats
# The EXAMPLES of ovl-ckpt(1), taken from the page (man_examples) and run
# as written, as one session, against samples/.

load test_helper

@test "ovl-ckpt(1) EXAMPLES run against samples/ and say what they promise" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	# the page's blocks are one session: run them as one script
	cd "$BATS_TEST_TMPDIR"
	n=$(man_examples ovl-ckpt.1 "$BATS_TEST_TMPDIR")
	[ "$n" -ge 2 ]
	for i in $(seq "$n"); do cat "ex.$i.sh"; done | sed "s|^python3 |$py |" > ex.sh
	grep -q 'ovl-ckpt restore ck' ex.sh
	ln -s "$SAMPLES" samples
	mkdir bin
	for t in source mix construct ckpt run; do
		ln -s "$OVL_BUILDDIR/ovl-$t" "bin/ovl-$t"
	done
	PATH="$BATS_TEST_TMPDIR/bin:$PATH" run -0 bash -e ex.sh
	[[ "$output" == *"out/packed.tokens.npy: ok: matches checkpoint"* ]]
	[[ "$output" == *"out/packed.seqs.npy: ok: matches checkpoint"* ]]
	[[ "$output" == *"step 0 rank 0 seqs 1 tokens 256"* ]]
	[[ "$output" == *"end of the run: nothing to resume"* ]]
	[ -s ck/ckpt.log ]
	# the supervised run's summary
	[[ "$output" == *"run in ck2: complete"* ]]
	[[ "$output" == *"sequences (seq-len"* ]]
}
