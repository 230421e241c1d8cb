#!/usr/bin/env bats
# The plan file (ovl-plan(5)) through ovl-mix --check, --list-sources and
# --source-args; each bad plan in tests/fixtures/plan names its message.

load test_helper

@test "every bad plan fails with status 2 and its file:line message" {
	cd "$FIXTURES/plan"
	n=0
	for f in *.plan; do
		want=$(sed -n '1s/^# expect: //p' "$f")
		[ -n "$want" ]
		run -2 "$OVL_MIX" --check "$f"
		if [ "$output" != "ovl-mix: $want" ]; then
			echo "$f: got:  $output"
			echo "$f: want: ovl-mix: $want"
			return 1
		fi
		n=$((n + 1))
	done
	[ "$n" -ge 14 ]
}

@test "a missing plan file is an error with status 2" {
	run -2 "$OVL_MIX" --check "$BATS_TEST_TMPDIR/none.plan"
	[[ "$output" == "ovl-mix: cannot open '$BATS_TEST_TMPDIR/none.plan': No such file or directory" ]]
}

@test "--check prints the plan normalized: resolved files, weights at every point" {
	run -0 "$OVL_MIX" --check "$SAMPLES/plans/mix.plan"
	printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/n.plan"
	SAMPLES=$(cd "$SAMPLES" && pwd)
	grep -qx "weights at=0 web=0.6 code=0.2 books=0.2" "$BATS_TEST_TMPDIR/n.plan"
	grep -qx "weights at=200000 ramp=linear web=0.3 code=0.5 books=0.2" "$BATS_TEST_TMPDIR/n.plan"
	grep -q "^source web path=$SAMPLES/web/web-0.jsonl path=$SAMPLES/web/web-1.jsonl path=$SAMPLES/web/web-2.jsonl.zst " "$BATS_TEST_TMPDIR/n.plan"
	[ "$(grep -o 'path=[^ ]*book-0[0-7].txt' "$BATS_TEST_TMPDIR/n.plan" | wc -l)" -eq 8 ]
	grep -qx "seq-len at=400000 4096" "$BATS_TEST_TMPDIR/n.plan"
	grep -qx "checkpoint every=8 dir=${SAMPLES%/samples}/run/ckpt" "$BATS_TEST_TMPDIR/n.plan"
	grep -qx "stop tokens=1000000" "$BATS_TEST_TMPDIR/n.plan"
}

@test "the normalized plan reads back as the same plan" {
	cd "$BATS_TEST_TMPDIR"
	mkdir -p "d a/t" && : > "d a/t/x 1.txt" && : > 'd a/t/y[2].txt'
	cat > p.plan <<'PLAN'
seed 9
source s path="d a/t/*.txt" doc-per=file match="\\d+ \"x\"" \
    on-exhaust=drop   # the rest of the line is a comment
source u path=d\ a/t/x\ 1.txt epochs=3
weights s=3 u=1
weights at=1K s=1 u=1 ramp=linear
cost model layers=2 hidden=64
uniform yes
PLAN
	run -0 "$OVL_MIX" --check p.plan
	printf '%s\n' "$output" > n1.plan
	grep -qF 'path="d a/t/x 1.txt" path="d a/t/y\\[2\\].txt"' n1.plan
	grep -qF 'match="\\d+ \"x\""' n1.plan
	grep -qx 'weights at=0 s=0.75 u=0.25' n1.plan
	run -0 "$OVL_MIX" --check n1.plan
	printf '%s\n' "$output" | sed 1d > n2.plan
	sed 1d n1.plan | cmp - n2.plan
	# and each line is a safe shell word list: eval gives the same words
	line=$(grep '^source s ' n1.plan)
	eval "set -- $line"
	[ "$3" = "path=d a/t/x 1.txt" ]
}

@test "--list-sources: NUL-terminated name, partitions, shadows, on-exhaust" {
	run -0 bash -c '"$1" --list-sources "$2" | tr "\0" "|"' _ "$OVL_MIX" "$SAMPLES/plans/mix.plan"
	[ "$output" = "web|2|0|repeat|code|1|0|repeat|books|2|0|drop|" ]
}

@test "--source-args gives the exact ovl-source argument vector, NUL-terminated" {
	"$OVL_MIX" --source-args books "$SAMPLES/plans/mix.plan" > "$BATS_TEST_TMPDIR/args"
	mapfile -d '' args < "$BATS_TEST_TMPDIR/args"
	SAMPLES=$(cd "$SAMPLES" && pwd)
	[ "${args[0]}" = --id ] && [ "${args[1]}" = 2 ]
	[ "${args[2]}" = --tokenizer ] && [ "${args[3]}" = bytes ]
	[ "${args[4]}" = --doc-per ] && [ "${args[5]}" = file ]
	[ "${args[6]}" = --shuffle-seed ]
	[ "${args[8]}" = books ]
	[ "${args[9]}" = "$SAMPLES/books/book-00.txt" ]
	[ "${#args[@]}" -eq 17 ]
	# the vector runs as is
	run -0 "$OVL_SOURCE" --partition 1/2 --json "${args[@]}"
	[ "${#lines[@]}" -eq 4 ]
	run -2 "$OVL_MIX" --source-args nosuch "$SAMPLES/plans/mix.plan"
	[[ "$output" == *"no source named 'nosuch'"* ]]
}

@test "a quoted path with spaces and = and a relative plan directory" {
	mkdir -p "$BATS_TEST_TMPDIR/p/my data"
	cp "$SAMPLES/web/web-0.jsonl" "$BATS_TEST_TMPDIR/p/my data/a=1.jsonl"
	printf 'source w path="my data/a=1.jsonl" format=jsonl\n' > "$BATS_TEST_TMPDIR/p/w.plan"
	cd "$BATS_TEST_TMPDIR"
	"$OVL_MIX" --source-args w p/w.plan > args
	mapfile -d '' args < args
	[ "${args[-1]}" = "p/my data/a=1.jsonl" ]
	run -0 "$OVL_SOURCE" --json "${args[@]}"
	[ "${#lines[@]}" -eq "$(wc -l < "$SAMPLES/web/web-0.jsonl")" ]
}

@test "usage: help on stdout, usage errors exit 2 (the synopsis: t01)" {
	run -0 "$OVL_MIX" --help
	[ "${lines[0]}" = "usage: ovl-mix [options] PLAN INPUT..." ]
	[ "${lines[1]}" = "       ovl-mix --check PLAN" ]
	run -0 "$OVL_MIX" --version
	[[ "$output" =~ ^ovl-mix\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
	run -2 "$OVL_MIX"
	[[ "$output" == *"usage: ovl-mix [options] PLAN INPUT..."* ]]
	run -2 "$OVL_MIX" "$SAMPLES/plans/small.plan"
	run -2 "$OVL_MIX" --by bytes "$SAMPLES/plans/small.plan" web=x
	run -2 "$OVL_MIX" --check "$SAMPLES/plans/small.plan" extra
	run -2 "$OVL_MIX" --json "$SAMPLES/plans/small.plan" web=/dev/null
	[[ "$output" == *"no input for source 'book'"* ]]
	run -2 "$OVL_MIX" --json "$SAMPLES/plans/small.plan" web=/dev/null nope=/dev/null
	[[ "$output" == *"the plan has no source 'nope'"* ]]
}

@test "weights near the largest double are shares, not 'all zero'; brace groups are bounded" {
	cd "$BATS_TEST_TMPDIR"
	printf 'source a path=%s\nsource b path=%s\nweights a=1.7e308 b=1.7e308\n' \
	    "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-1.jsonl" > w.plan
	run -0 "$OVL_MIX" --check w.plan
	[[ "$output" == *"weights at=0 a=0.5 b=0.5"* ]]
	printf 'source a path=%s\nweights a=0\n' "$SAMPLES/web/web-0.jsonl" > z.plan
	run -2 "$OVL_MIX" --check z.plan
	[[ "$output" == *"z.plan:2: weights: all weights are zero"* ]]
	# 24 groups of two would be 16 million paths for glob(3): refused at once
	b=$(printf '{a,b}%.0s' $(seq 24))
	printf 'source a path=%s/%s.jsonl\n' "$BATS_TEST_TMPDIR" "$b" > b.plan
	run -2 --separate-stderr timeout 20 "$OVL_MIX" --check b.plan
	[[ "$stderr" == *"b.plan:1: source 'a': '$BATS_TEST_TMPDIR/$b.jsonl' has more than 4096 brace alternatives" ]]
	# a few groups still expand as before
	printf 'source a path=%s/web/web-{0,1}.jsonl\n' "$SAMPLES" > c.plan
	run -0 "$OVL_MIX" --check c.plan
	[[ "$output" == *"path=$SAMPLES/web/web-0.jsonl path=$SAMPLES/web/web-1.jsonl "* ]]
}

# plan_refused LINE2 MESSAGE: a plan of one source and LINE2 (or, with
# LINE2 beginning " ", the source line extended by it) fails --check with
# MESSAGE at its line
plan_refused() {
	local src="source w path=$SAMPLES/web/web-0.jsonl" at=2
	if [[ $1 == " "* ]]; then
		printf '%s%s\n' "$src" "$1" > bad.plan
		at=1
	else
		printf '%s\n%s\n' "$src" "$1" > bad.plan
	fi
	run -2 "$OVL_MIX" --check bad.plan
	[ "$output" = "ovl-mix: bad.plan:$at: $2" ]
}

@test "every bound a stage holds is in the plan: ovl-mix --check refuses what ovl-construct or ovl-source would" {
	cd "$BATS_TEST_TMPDIR"
	plan_refused "seq-len 20000000" "bad seq-len '20000000': at most 16777216"
	plan_refused "ranks 5000" "bad ranks '5000': at most 4096"
	plan_refused "window 65" "bad window '65': at most 64"
	plan_refused "micro-batches 0" "bad micro-batches '0': must be at least 1"
	plan_refused "image-tokens 5G" "bad image-tokens '5G': at most 4294967295"
	plan_refused " max-doc-bytes=1G" "bad max-doc-bytes '1G': at most 134217728"
	plan_refused " partitions=4097" "bad partitions '4097': at most 4096"
	# at the bounds, every stage takes the plan
	printf 'source w path=%s\nseq-len 16777216\nranks 4096\nwindow 64\n' \
	    "$SAMPLES/web/web-0.jsonl" > edge.plan
	run -0 "$OVL_MIX" --check edge.plan
	"$OVL_SOURCE" w "$SAMPLES/web/web-0.jsonl" > s.fr
	"$OVL_MIX" edge.plan w=s.fr > m.fr
	run -0 "$OVL_CONSTRUCT" edge.plan < m.fr
}

@test "one list of names: the plan's choices are the tools' option values" {
	cd "$BATS_TEST_TMPDIR"
	local v
	for v in bfd first-fit concat; do
		printf 'source w path=%s\npack %s\n' "$SAMPLES/web/web-0.jsonl" "$v" > p.plan
		run -0 "$OVL_MIX" --check p.plan
		run -0 "$OVL_CONSTRUCT" --pack "$v" --help
	done
	plan_refused "pack best" "bad pack 'best': expected one of bfd, first-fit, concat"
	plan_refused "balance greedy" "bad balance 'greedy': expected one of none, lpt, kk"
	for v in megatron npy jsonl frames; do
		printf 'source w path=%s\noutput format=%s path=o/x\n' "$SAMPLES/web/web-0.jsonl" "$v" > p.plan
		run -0 "$OVL_MIX" --check p.plan
		# the format is taken; the empty stream is what stops it
		run -3 "$OVL_CKPT" --dir "ck.$v" --format "$v" -o "o/$v" < /dev/null
		[[ "$output" == *"empty stream"* ]]
	done
	for v in jsonl text tar wds parquet megatron npy; do
		run -0 "$OVL_SOURCE" --format "$v" --help
	done
	run -2 "$OVL_SOURCE" --format arrow x y
	run -2 "$OVL_SOURCE" --doc-per para x y
	run -2 "$OVL_SOURCE" --on-error ignore x y
	# the same lists in --help, defaults included, and in the messages
	plan_refused " images=all" "bad images 'all': expected one of inline, ref, none"
	run -2 "$OVL_SOURCE" --images all x y
	[[ "$output" == "ovl-source: unknown --images 'all' (inline, ref, none)"$'\n'* ]]
	plan_refused "mix-by bytes" "bad mix-by 'bytes': expected one of tokens, docs"
	run -2 "$OVL_MIX" --by bytes p.plan
	[[ "$output" == "ovl-mix: unknown --by 'bytes' (tokens, docs)"$'\n'* ]]
	run -0 "$OVL_SOURCE" --help
	[[ "$output" == *$'\n'"  --format F            jsonl, text, tar, wds, parquet, megatron or npy"$'\n'* ]]
	[[ "$output" == *$'\n'"  --field-type T        jsonl: text or ids (default text); ids: "* ]]
	[[ "$output" == *$'\n'"  --images MODE         inline, ref or none (default inline): "* ]]
	[[ "$output" == *$'\n'"  --on-error MODE       fail or skip (default fail) bad records"* ]]
	[[ "$output" == *$'\n'"                        plain, error, allow or strip (default plain)"$'\n'* ]]
	run -0 "$OVL_MIX" --help
	[[ "$output" == *$'\n'"  --by UNIT             tokens or docs (default tokens): "* ]]
	run -0 "$OVL_CKPT" --help
	[[ "$output" == *$'\n'"  -f, --format FMT        megatron, npy, jsonl, frames or wds "* ]]
}

@test "--check refuses sources of another tokenizer, vocabulary or end of document at the source's line, before any stage starts" {
	printf '{"text": "x"}\n' > "$BATS_TEST_TMPDIR/d.jsonl"
	cd "$BATS_TEST_TMPDIR"
	printf 'source a path=d.jsonl\nsource b path=d.jsonl\nsource c path=d.jsonl eod-token=10\n' > e.plan
	run -2 "$OVL_MIX" --check e.plan
	[[ "$output" == *"e.plan:3: source c: tokenizer bytes (vocab 257, eod 10) differs from source a's at line 1: bytes (vocab 257, eod 256)"* ]]
	printf 'source a path=d.jsonl\nsource b path=d.jsonl tokenizer=tiktoken:%s:cl100k\n' "$SAMPLES/tokenizers/sample.tiktoken" > t.plan
	run -2 "$OVL_MIX" --check t.plan
	[[ "$output" == *"t.plan:2: source b: tokenizer tiktoken:"*"differs from source a's at line 1: bytes"* ]]
	# the same tokenizer named twice, by the plan and by a source: one
	printf 'eod-token 10\nsource a path=d.jsonl\nsource b path=d.jsonl eod-token=10\n' > s.plan
	run -0 "$OVL_MIX" --check s.plan
}

@test "--check reports every error of a plan in one run, each at its line" {
	cd "$BATS_TEST_TMPDIR"
	printf '{"text": "x"}\n' > d.jsonl
	printf 'source a path=d.jsonl bogus=1\nsource b path=d.jsonl\nranks 0\nseq-len x\n' > e.plan
	run -2 "$OVL_MIX" --check e.plan
	[ "${#lines[@]}" -eq 3 ]
	[ "${lines[0]}" = "ovl-mix: e.plan:1: source 'a': unknown option 'bogus='" ]
	[[ "${lines[1]}" == "ovl-mix: e.plan:3: bad ranks '0'"* ]]
	[[ "${lines[2]}" == "ovl-mix: e.plan:4: bad seq-len 'x'"* ]]
	# then, on a plan whose lines read, every source's files and tokenizer
	printf 'source a path=none1\nsource b path=none2 tokenizer=hf:none.json\nsource c path=d.jsonl\n' > f.plan
	run -2 "$OVL_MIX" --check f.plan
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[0]}" == "ovl-mix: f.plan:1: source 'a': no file matches "*none1* ]]
	[[ "${lines[1]}" == "ovl-mix: f.plan:2: source 'b': no file matches "*none2* ]]
	[[ "${lines[2]}" == "ovl-mix: f.plan:2: source b: "*none.json* ]]
	# ovl-run stops there, before any stage, saying the same
	run -2 "$OVL_RUN" f.plan
	[[ "$output" == *"f.plan:1: source 'a'"*"f.plan:2: source b: "* ]]
}
