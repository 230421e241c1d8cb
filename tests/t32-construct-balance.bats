#!/usr/bin/env bats
# ovl-construct: balance that always helps (issue 18). On long-tailed
# streams, every step of every balance method, varlen and --uniform, 1 to
# 8 micro-batches per rank, with and without a window: the written plan's
# maximum rank cost is never above none's on the same pieces; with fixed
# shapes the plan written is named and the cut plans keep exact resume.
# Every output passes construct-check, which also holds that a piece
# without its end token is the last of its sequence (Megatron sees a
# document end only at an end token).

load test_helper

setup() {
	construct_setup 300 5
	"$GEN" --docs 1500 --median 120 --sigma 1.2 --tail 6 --tail-min 600 \
	    --tail-max 6000 --seed 18 --sources 3 > "$T/long.f"
}

# never_worse STATS...: in each STATS, every step's max_cost at most
# none's; prints for each the step count and the summed speedup over none
never_worse() {
	python3 -c '
import json, sys
for f in sys.argv[1:]:
    st = [json.loads(l) for l in open(f)]
    for s in st:
        assert s["max_cost"] <= s["none"]["max_cost"] * (1 + 1e-12), (f, s)
        assert s["samples"]["max_cost"] > 0 or s["tokens"] == 0, (f, s)
    print(len(st), sum(s["none"]["max_cost"] for s in st) / sum(s["max_cost"] for s in st))
' "$@"
}

@test "never worse than none: every method, varlen and uniform, 1-8 micro-batches, windows" {
	local m mode mb w k=0 n
	for m in none lpt kk; do
		for mode in "" --uniform; do
			for mb in 1 2 8; do
				for w in 1 3; do
					k=$((k + 1))
					"$OVL_CONSTRUCT" --ranks 4 --micro-batches $mb \
					    --seq-len 1024 --balance $m $mode --window $w \
					    --stats "$T/st.$k" < "$T/long.f" > "$T/out.$k.f"
					echo "$m $mode $mb $w" >> "$T/runs"
					# and Megatron sees every document end
					echo "$T/long.f $T/out.$k.f --ranks 4 --micro-batches $mb" \
					    "--seq-len 1024 --window $w $mode" >> "$T/checks"
				done
			done
		done
	done
	# every run's stats and output, read by one checker each
	run -0 never_worse $(seq -f "$T/st.%g" "$k")
	paste -d ' ' "$T/runs" - <<< "$output"
	for n in "${lines[@]}"; do
		[ "${n%% *}" -ge 10 ]
	done
	[ "${#lines[@]}" -eq 36 ]
	run -0 python3 "$CHECK" checks "$T/checks"
	[ "$(grep -c '^ok 1500 documents' <<< "$output")" -eq 36 ]
}

@test "uniform: balanced micro-batches beat none by at least 10% with 2 or more per rank" {
	local mb
	for mb in 2 4; do
		"$OVL_CONSTRUCT" --ranks 4 --micro-batches $mb --seq-len 1024 \
		    --uniform --stats "$T/st" < "$T/long.f" > "$T/out.f"
		run -0 python3 "$CHECK" check "$T/long.f" "$T/out.f" --ranks 4 \
		    --micro-batches $mb --seq-len 1024 --uniform
		run -0 never_worse "$T/st"
		python3 -c 'import sys; assert float(sys.argv[1]) >= 1.1, sys.argv[1]' "${output#* }"
		run -0 python3 -c '
import json, sys
plans = {json.loads(l)["plan"] for l in open(sys.argv[1])}
assert plans <= {"balanced", "mid-cut", "cut", "none"}, plans
print(" ".join(sorted(plans)))
' "$T/st"
	done
}

@test "varlen: the plan key is only in fixed-shape stats; samples beside none" {
	"$OVL_CONSTRUCT" $C --stats "$T/st" < "$T/in.f" > "$T/out.f"
	run -0 python3 -c '
import json, sys
for l in open(sys.argv[1]):
    s = json.loads(l)
    assert "plan" not in s and "max_cost" in s["samples"], s
' "$T/st"
	"$OVL_CONSTRUCT" $C --uniform --balance none --stats "$T/st" < "$T/in.f" > "$T/out.f"
	run -0 python3 -c '
import json, sys
for l in open(sys.argv[1]):
    s = json.loads(l)
    assert s["plan"] == "none" and s["max_cost"] == s["none"]["max_cost"], s
' "$T/st"
}

@test "uniform: the cut plans resume byte-identical from every barrier, every method" {
	local m n B
	# documents shorter than a sequence: the cut plans then hide no
	# document end (Megatron sees ends only at end tokens) and are written
	B="--docs 400 --median 60 --sigma 0.6 --tail 0 --seed 5 --checkpoint-every 2"
	B="$B --ranks 4 --micro-batches 4 --seq-len 256"
	"$GEN" $B --exact > "$T/bar.f"
	for m in kk lpt; do
		"$OVL_CONSTRUCT" $C --micro-batches 4 --uniform --balance $m \
		    --stats "$T/st" < "$T/bar.f" > "$T/full.f"
		# the cut plans were written in this run
		run -0 python3 -c '
import json, sys
plans = [json.loads(l)["plan"] for l in open(sys.argv[1])]
assert "cut" in plans or "mid-cut" in plans, plans
' "$T/st"
		resume_each "$T/full.f" 3 $B --exact -- $C --micro-batches 4 --uniform --balance $m
	done
}
