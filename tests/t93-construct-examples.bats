#!/usr/bin/env bats
# The EXAMPLES of ovl-construct(1), run against samples/.

load test_helper

setup() {
	cd "$OVL_SRCDIR"
	T="$BATS_TEST_TMPDIR"
	PATH="$OVL_BUILDDIR:$PATH"
}

@test "example: pack a sample source with per-step figures" {
	ovl-source web samples/web/web-0.jsonl |
	    ovl-construct --ranks 4 --micro-batches 2 --seq-len 512 \
	    --stats "$T/steps.jsonl" > "$T/seqs.frames"
	[ -s "$T/seqs.frames" ]
	run -0 python3 -c 'import json,sys; [json.loads(l)["max_cost"] for l in open(sys.argv[1])]' "$T/steps.jsonl"
}

@test "example: JSON lines, fixed shapes, LPT" {
	ovl-source web samples/web/web-0.jsonl |
	    ovl-construct --ranks 2 --seq-len 1024 --uniform --balance lpt --json > "$T/out.json"
	run -0 python3 -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["kind"] == "seq":
        assert o["ntokens"] == 1024
        n += 1
assert n > 0
' "$T/out.json"
}

@test "example: a 7B-like cost and a window of 4 steps" {
	ovl-source web samples/web/web-0.jsonl |
	    ovl-construct --ranks 8 --seq-len 256 --cost model:32:4096 \
	    --window 4 -v > "$T/seqs.frames" 2> "$T/err"
	grep -q "step 0:" "$T/err"
}
