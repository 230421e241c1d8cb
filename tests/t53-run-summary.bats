#!/usr/bin/env bats
# What a run did, kept with its checkpoints: ovl-run records every start,
# failure and end in CKPTDIR/stats with the mixer's and the constructor's
# figures, prints ovl-ckpt summary at the end and writes it as JSON with
# --summary. A run killed and restarted, then stopped and resumed, sums up
# to the uninterrupted run's steps, sequences and tokens, with its
# failures and starts counted.

load test_helper

# summary_plan: the plan, p.plan in the current directory
summary_plan() {
	cat > p.plan <<EOF
source web  path=$SAMPLES/web/web-0.jsonl path=$SAMPLES/web/web-1.jsonl format=jsonl partitions=2 on-exhaust=drop throttle=50K
source book path=$SAMPLES/books/book-0[0-5].txt doc-per=file on-exhaust=drop throttle=25K
weights web=2 book=1
seq-len 256
ranks 2
micro-batches 2
checkpoint every=2 dir=ckpt
output format=jsonl path=out/s
EOF
}

# The uninterrupted run, once for the file's tests, in $BATS_FILE_TMPDIR:
# its summary in sum.json, its standard error in stderr, its output in
# out/s.jsonl and its checkpoints in ckpt
setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	summary_plan
	"$OVL_RUN" -d run --summary sum.json p.plan 2> stderr 3>&- || { cat stderr; return 1; }
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	py=$(ovl_python_numpy) || py=python3
	summary_plan
}

# field FILE KEY: a top-level value of the summary JSON
field() {
	"$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

@test "summary: an uninterrupted run prints it and writes it as JSON; the figures agree with the outputs" {
	# the run of setup_file
	cp -r "$BATS_FILE_TMPDIR/ckpt" "$BATS_FILE_TMPDIR/out" "$BATS_FILE_TMPDIR/sum.json" .
	stderr=$(cat "$BATS_FILE_TMPDIR/stderr")
	[[ "$stderr" == *"run in ckpt: complete"* ]]
	[[ "$stderr" == *"  source "*" share "*" planned"* ]]
	[[ "$stderr" == *"max/lower bound"* ]]
	[ "$(field sum.json complete)" = True ]
	[ "$(field sum.json starts)" -eq 1 ]
	[ "$(field sum.json failures)" = "[]" ]
	# sequences and steps are those of the output
	[ "$(field sum.json sequences)" -eq "$(wc -l < out/s.jsonl)" ]
	[ "$(field sum.json steps)" -eq $(( $(field sum.json last_step) + 1 )) ]
	# source tokens add up to the run's, shares to 100
	"$py" - sum.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert sum(x["tokens"] for x in s["sources"]) == s["tokens"], s
assert abs(sum(x["share_pct"] for x in s["sources"]) - 100) < 0.2, s
assert abs(sum(x["planned_pct"] for x in s["sources"]) - 100) < 0.2, s
assert s["max_over_bound"] >= 1 and s["max_over_mean"] >= 1, s
PY
	ls ckpt/stats/run.log ckpt/stats/mix.kv ckpt/stats/construct.1.jsonl
	# -q: no summary on stderr, the JSON still written
	rm -rf ckpt out
	run -0 --separate-stderr "$OVL_RUN" -q -d run --summary sum2.json p.plan 3>&-
	[ -z "$stderr" ]
	[ "$(field sum2.json sequences)" -eq "$(field sum.json sequences)" ]
}

@test "summary: kept with the checkpoints across a kill, a restart and a resume, counted once" {
	# the uninterrupted run of setup_file
	cp "$BATS_FILE_TMPDIR/sum.json" ref.json
	cp "$BATS_FILE_TMPDIR/out/s.jsonl" ref.jsonl
	# a run whose constructor is killed once a checkpoint is committed
	"$OVL_RUN" -q -d run --restart 1 --summary sum.json p.plan 3>&- 2> err &
	pid=$!
	kill_stage_once "$pid" ckpt ovl-construct
	[ -n "$victim" ] || skip "the run ended before the kill (a very fast machine)"
	st=0
	wait "$pid" || st=$?
	cat err >&2
	[ "$st" -eq 0 ]
	cmp ref.jsonl out/s.jsonl
	# the constructor was restarted alone: one start, one stage healed
	[ "$(field sum.json starts)" -eq 1 ]
	[ "$(field sum.json heals)" -eq 1 ]
	[[ "$(field sum.json failures)" == *"construct killed by signal 9"*"(restarted alone)"* ]]
	ls ckpt/stats/construct.2.jsonl
	for k in steps sequences padding tokens; do
		[ "$(field sum.json $k)" = "$(field ref.json $k)" ]
	done
	# ovl-ckpt summary reads it again later, the same
	"$OVL_CKPT" summary --json ckpt > again.json
	[ "$(field again.json sequences)" = "$(field sum.json sequences)" ]
	[ "$(field again.json failures)" = "$(field sum.json failures)" ]
	# a fresh run into a new directory starts its statistics anew
	run -0 "$OVL_RUN" -q -d run2 -c ckpt2 -o out2/s --summary fresh.json p.plan 3>&-
	[ "$(field fresh.json starts)" -eq 1 ]
}

@test "summary: ovl-ckpt summary of a directory without statistics says what it has" {
	# the checkpoints of the run of setup_file
	cp -r "$BATS_FILE_TMPDIR/ckpt" ckpt
	rm -rf ckpt/stats
	run -0 "$OVL_CKPT" summary ckpt
	[[ "$output" == *"run in ckpt: complete"* ]]
	[[ "$output" == *"checkpoints, the last at step"* ]]
	[[ "$output" != *"source "* ]]
	run -2 "$OVL_CKPT" summary
	run -1 "$OVL_CKPT" summary nonexistent
	[[ "$output" == *"no checkpoint and no statistics in 'nonexistent'"* ]]
}

@test "live figures: windowed rates, progress and the last step's balance; --metrics in the Prometheus text format" {
	"$py" -c 'import prometheus_client' 2>/dev/null ||
		skip "python3-prometheus-client not installed (scripts/bootstrap installs it): the metrics are not parsed"
	sed -i 's/^output /stop tokens=150K\noutput /' p.plan
	run -0 --separate-stderr "$OVL_RUN" -d run --status-interval 0.2 --metrics m.prom p.plan 3>&-
	# status lines: elapsed seconds, step, tokens and a windowed rate,
	# progress toward the stop, per source rate and shares, the balance
	line=$(grep -m 1 'max/bound' <<< "$stderr")
	[[ "$line" =~ ^ovl-run:\ [0-9]+s\ \|\ step\ [0-9]+\ \|\ [0-9]+\ tokens,\ [0-9]+\ tok/s\ \([0-9]+%\ of\ 150000\ tokens ]]
	[[ "$line" == *"web "*" tok/s "*"%/"*"%, book "* ]]
	[[ "$line" =~ \|\ step\ [0-9]+\ max/bound\ [0-9.]+\ \|\ ckpt ]]
	[ -s m.prom ]
	# the file parses as Prometheus text, and says what the run did
	"$py" - m.prom <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
m = {}
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in fam.samples:
        m[(s.name, tuple(sorted(s.labels.items())))] = s.value
tok = m[("overlord_tokens_total", ())]
assert tok >= 150000, tok
web = m[("overlord_source_tokens_total", (("source", "web"),))]
book = m[("overlord_source_tokens_total", (("source", "book"),))]
assert web + book == tok, (web, book, tok)
share = m[("overlord_source_share_ratio", (("source", "web"),))]
assert abs(share - web / tok) < 0.002, (share, web / tok)
assert m[("overlord_restarts_total", ())] == 0
for k in ("overlord_tokens_per_second", "overlord_step", "overlord_checkpoint", "overlord_elapsed_seconds"):
    assert (k, ()) in m, k
PY
	# a run shorter than its status interval still ends with the line of
	# its final figures: the whole stop, the last step's balance
	run -0 --separate-stderr "$OVL_RUN" -d run2 -c ckpt2 -o out2/s --status-interval 3600 p.plan 3>&-
	[ "$(grep -c 'max/bound' <<< "$stderr")" -eq 1 ]
	[[ "$(grep 'max/bound' <<< "$stderr")" == *"(100% of 150000 tokens"* ]]
}
