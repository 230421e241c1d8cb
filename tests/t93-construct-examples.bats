#!/usr/bin/env bats
# The EXAMPLES of ovl-construct(1), taken from the page and run as written
# against samples/ (run_examples, test_helper.bash).

load test_helper

@test "ovl-construct(1) EXAMPLES: per-step figures, fixed shapes with LPT, a model cost and a window" {
	run_examples ovl-construct.1 3
	# 1: frames and one line of figures per step
	[ -s "$EX/w.1/seqs.frames" ]
	run -0 python3 -c 'import json,sys; [json.loads(l)["max_cost"] for l in open(sys.argv[1])]' "$EX/w.1/steps.jsonl"
	[ -z "$(cat "$EX/err.1")" ]
	# 2: JSON lines, every sequence exactly 1024 tokens
	run -0 python3 -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    o = json.loads(l)
    if o["kind"] == "seq":
        assert o["ntokens"] == 1024
        n += 1
assert n > 0
' "$EX/out.2"
	# 3: -v says each step on standard error
	[ -s "$EX/w.3/seqs.frames" ]
	grep -q "step 0:" "$EX/err.3"
}
