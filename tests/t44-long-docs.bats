#!/usr/bin/env bats
# Documents longer than seq-len, as the plan's long-docs says: split (the
# default: pieces, positions from 0), split-continue (positions go on from
# the piece's offset in its document), truncate (the first seq-len - 1
# tokens and the end token), drop (left out, counted) or error. ovl-mix
# applies it at the step the document starts in, so the step cut of
# ovl-mix and ovl-construct agrees; the counts survive a restore, reach the
# summary, and a killed run resumes to the same bytes.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	py=$(ovl_python_numpy) || py=python3
	# 200 documents of 5 to 400 bytes (the bytes tokenizer: a token each,
	# and the end token 256)
	"$py" - <<'PY'
import json, random
r = random.Random(5)
with open("d.jsonl", "w") as f:
    for i in range(200):
        n = r.choice([5, 20, 40, 70, 150, 400])
        f.write(json.dumps({"text": "".join(r.choice("abcdefgh ") for _ in range(n))}) + "\n")
PY
}

plan() {	# plan POLICY [EXTRA-LINE]
	printf 'source a path=d.jsonl long-docs=%s throttle=%s\nseq-len 64\nranks 2\ncheckpoint every=4 dir=ck\noutput format=jsonl path=out/s\n%s\n' \
		"$1" "${THROTTLE:-0}" "${2:-}" > p.plan
	sed -i 's/ throttle=0//' p.plan
}

# check POLICY: the output against the input, as the policy says
check() {
	"$py" - "$1" <<'PY'
import json, sys
pol = sys.argv[1]
docs = [len(json.loads(l)["text"]) + 1 for l in open("d.jsonl")]    # + end token
seqs = [json.loads(l) for l in open("out/s.jsonl")]
pieces = []
for s in seqs:
    cu = s["cu_seqlens"]
    for a, b in zip(cu, cu[1:]):
        pieces.append((s["tokens"][a:b], s["positions"][a:b]))
assert all(len(t) <= 64 for t, _ in pieces)
total = sum(len(t) for t, _ in pieces)
long_ = [n for n in docs if n > 64]
short = [n for n in docs if n <= 64]
if pol in ("split", "split-continue"):
    assert total == sum(docs), (total, sum(docs))
elif pol == "truncate":
    assert total == sum(short) + 64 * len(long_), total
    # every document still ends with the end token
    assert sum(1 for t, _ in pieces if t[-1] == 256) == len(docs)
elif pol == "drop":
    assert total == sum(short), (total, sum(short))
    assert sum(1 for t, _ in pieces if t[-1] == 256) == len(short)
cont = [p for t, p in pieces if p[0] != 0]
if pol == "split-continue":
    assert cont and all(p == list(range(p[0], p[0] + len(p))) for p in cont)
else:
    assert not cont, cont[:1]
summ = json.load(open("s.json"))["sources"][0]
n = {"split": "long_split", "split-continue": "long_split", "truncate": "long_truncated",
     "drop": "long_dropped"}[pol]
assert summ[n] == len(long_), (summ, len(long_))
if pol == "truncate":
    assert summ["long_cut_tokens"] == sum(long_) - 64 * len(long_)
if pol == "drop":
    assert summ["long_cut_tokens"] == sum(long_)
PY
}

@test "long-docs: split, split-continue, truncate and drop each do what they say, counted in the summary" {
	for pol in split split-continue truncate drop; do
		rm -rf ck out s.json
		plan "$pol"
		run -0 --separate-stderr "$OVL_RUN" -d run --summary s.json p.plan 3>&-
		[[ "$stderr" == *"longer than seq-len:"* ]]
		check "$pol"
	done
	# the plan's default for every source, a source's own choice wins
	printf 'long-docs drop\nsource a path=d.jsonl\nsource b path=d.jsonl long-docs=truncate\n' > q.plan
	run -0 "$OVL_MIX" --check q.plan
	[[ "$output" == *"long-docs drop"* ]]
	[[ "$output" == *"long-docs=truncate"* ]]
	printf 'source a path=d.jsonl long-docs=cut\n' > bad.plan
	run -2 "$OVL_MIX" --check bad.plan
	[[ "$output" == *"bad.plan:1: bad long-docs 'cut': expected one of split, split-continue, truncate, drop, error"* ]]
}

@test "long-docs=error stops the run, naming the source, the record and the lengths" {
	plan error
	run -1 "$OVL_RUN" -q -d run --restart 0 p.plan 3>&-
	[[ "$output" =~ source\ \'a\':\ record\ [0-9]+\ of\ chunk\ 0,\ epoch\ 0\ \(just\ before\ cursor\ [0-9:]+\)\ has\ [0-9]+\ tokens,\ longer\ than\ seq-len\ 64\ \(long-docs=error\) ]]
	[[ "$output" == *"mix failed: exit status 1 (root cause)"* ]]
}

@test "long-docs: truncate and drop resume after a kill to the same bytes and the same counts" {
	for pol in truncate drop; do
		rm -rf ck out run s.json ref.json
		THROTTLE=20K plan "$pol"
		"$OVL_RUN" -q -d run --summary ref.json p.plan 3>&-
		mv out/s.jsonl ref.jsonl
		rm -rf ck out
		"$OVL_RUN" -q -d run --restart 1 --summary s.json p.plan 3>&- 2> err &
		kill_stage_once $! ck ovl-mix
		wait
		cmp ref.jsonl out/s.jsonl
		[ -n "$victim" ] || continue
		"$py" -c '
import json, sys
a, b = json.load(open("ref.json")), json.load(open("s.json"))
# the mixer was restarted alone (a heal), the other stages ran on
assert b["starts"] == 1 and b["heals"] == 1, b
for k in ("long_truncated", "long_dropped", "long_cut_tokens", "tokens"):
    assert a["sources"][0][k] == b["sources"][0][k], (k, a["sources"][0], b["sources"][0])'
	done
}
