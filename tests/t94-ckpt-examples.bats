#!/usr/bin/env bats
# The EXAMPLES of ovl-ckpt(1), run as written against samples/.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	ln -s "$SAMPLES" samples
	mkdir bin
	for t in source mix construct ckpt; do
		ln -s "$OVL_BUILDDIR/ovl-$t" "bin/ovl-$t"
	done
	PATH="$BATS_TEST_TMPDIR/bin:$PATH"
}

# The literal blocks of the EXAMPLES section, joined, as a script.
examples() {
	sed -n '/^\.Sh EXAMPLES/,/^\.Sh SEE ALSO/p' "$OVL_SRCDIR/man/ovl-ckpt.1" |
	    sed -n '/^\.Bd -literal/,/^\.Ed/p' | grep -v '^\.[BE][dd]' |
	    sed 's/\\e/\\/g'
}

@test "ovl-ckpt(1) EXAMPLES run against samples/ and say what they promise" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	examples | sed "s|^python3 |$py |" > ex.sh
	grep -q 'ovl-ckpt restore ck' ex.sh
	run -0 bash -e ex.sh
	[[ "$output" == *"out/packed.tokens.npy: ok: matches checkpoint"* ]]
	[[ "$output" == *"out/packed.seqs.npy: ok: matches checkpoint"* ]]
	[[ "$output" == *"step 0 rank 0 seqs 1 tokens 256"* ]]
	[[ "$output" == *"end of the run: nothing to resume"* ]]
	[ -s ck/ckpt.log ]
}
