#!/usr/bin/env bats
# ovl-mix over real ovl-source processes: determinism, the share bound,
# schedules, exhaustion policies, partition-count invariance, META.

load test_helper

MIXTOOL="$FIXTURES/plan/mixtool.py"

setup() {
	cd "$BATS_TEST_TMPDIR"
}

# skewed NAME N MAXLEN SEED [MU]: a jsonl source of N documents of 1..MAXLEN
# characters, lognormal lengths: most short, a few long.
skewed() {
	python3 - "$@" <<'PY'
import json, random, sys
name, n, mx, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
mu = float(sys.argv[5]) if len(sys.argv) > 5 else 2.5
r = random.Random(seed)
with open(name + ".jsonl", "w") as f:
    for i in range(n):
        L = int(min(mx, r.lognormvariate(mu, 1.3))) + 1
        f.write(json.dumps({"text": "%s%d " % (name, i) + "x" * L}) + "\n")
PY
}

# fifo_source FIFO ARGS...: an ovl-source writing into a new FIFO.
fifo_source() {
	local f=$1
	shift
	mkfifo "$f"
	"$OVL_SOURCE" "$@" > "$f" 3>&- &
}

@test "the mixed stream is deterministic and carries a merged META" {
	"$OVL_SOURCE" --id 0 web "$SAMPLES/web/web-0.jsonl" > web.f
	"$OVL_SOURCE" --id 1 --doc-per file book "$SAMPLES"/books/book-0[0-4].txt > book.f
	"$OVL_MIX" "$SAMPLES/plans/small.plan" web=web.f book=book.f > a.mix
	"$OVL_MIX" "$SAMPLES/plans/small.plan" web=web.f book=book.f > b.mix
	cmp a.mix b.mix
	# every rewritten frame has a good CRC (checked by an independent reader)
	run -0 python3 "$MIXTOOL" verify a.mix
	run -0 --separate-stderr "$OVL_MIX" --json "$SAMPLES/plans/small.plan" web=web.f book=book.f
	printf '%s\n' "$output" > a.json
	[[ "${lines[0]}" == '{"kind":"meta","text":"tokenizer bytes\nvocab 257\neod 256\nsource 0 web\nsource 1 book\n'* ]]
	[[ "${lines[0]}" == *'checkpoint-every 2\nranks 2\nmicro-batches 1\nseq-len 256\n"}' ]]
	[[ "${lines[-1]}" == '{"kind":"end","docs":115,"tokens":'* ]]
	# every document of both sources, each once, in source order
	python3 - <<'PY'
import json
d = [json.loads(l) for l in open("a.json")]
docs = [x for x in d if x["kind"] == "doc"]
assert [x["mix_pos"] for x in docs] == list(range(len(docs)))
for sid, name, n in ((0, "web", 110), (1, "book", 5)):
    mine = [x for x in docs if x["source"] == name]
    assert all(x["id"] == sid for x in mine)
    assert [x["pos"][2] for x in mine] == list(range(n)) or name == "book"
    assert len(mine) == n, (name, len(mine))
PY
	# frames: source ids rewritten, mixed flag set
	python3 "$MIXTOOL" frames a.mix > frames
	[ "$(grep -c '^2 ' frames)" -eq 115 ]
	[ "$(grep -c '^5 ' frames)" -gt 2 ]
}

@test "at every prefix each source is within one longest document of its target" {
	skewed short 4000 40 1 2
	skewed long 150 1000 2 5
	skewed mid 600 400 3 3.5
	cat > p.plan <<'PLAN'
source short path=short.jsonl
source long path=long.jsonl
source mid path=mid.jsonl
weights short=0.5 long=0.3 mid=0.2
weights at=30K short=0.1 long=0.6 mid=0.3 ramp=linear
weights at=60K short=0.6 long=0.1 mid=0.3
stop tokens=100K
PLAN
	"$OVL_MIX" --check p.plan > n.plan
	fifo_source s.fifo --id 0 short short.jsonl
	fifo_source l.fifo --id 1 long long.jsonl
	fifo_source m.fifo --id 2 mid mid.jsonl
	"$OVL_MIX" --json p.plan short=s.fifo long=l.fifo mid=m.fifo > mix.json
	wait
	run -0 python3 "$MIXTOOL" share n.plan mix.json
	echo "worst deviation: $output longest documents"
	# the schedule is followed: the ramp's mean, then each constant part
	python3 - <<'PY'
import json
d = [json.loads(l) for l in open("mix.json")]
d = [x for x in d if x["kind"] == "doc"]
def share(name, lo, hi):
    t = sum(x["ntokens"] for x in d if lo <= x["mix_tokens"] < hi and x["source"] == name)
    a = sum(x["ntokens"] for x in d if lo <= x["mix_tokens"] < hi)
    return t / a
for name, lo, hi, want in (("long", 0, 30000, 0.45), ("short", 0, 30000, 0.3),
                           ("long", 30000, 60000, 0.6), ("mid", 30000, 60000, 0.3),
                           ("long", 60000, 100000, 0.1), ("short", 60000, 100000, 0.6)):
    got = share(name, lo, hi)
    assert abs(got - want) < 0.05, (name, lo, hi, got, want)
last = d[-1]
assert last["mix_tokens"] < 100000 <= last["mix_tokens"] + last["ntokens"]
PY
}

@test "--by docs balances document counts" {
	skewed short 300 40 4
	skewed long 100 3000 5
	printf 'source short path=short.jsonl\nsource long path=long.jsonl\nweights short=3 long=1\n' > p.plan
	"$OVL_SOURCE" short short.jsonl > s.f
	"$OVL_SOURCE" long long.jsonl > l.f
	run -0 --separate-stderr "$OVL_MIX" --by docs --json p.plan short=s.f long=l.f
	printf '%s\n' "$output" > mix.json
	# stops when long runs out (on-exhaust=stop): 100 long, 300 short
	[ "$(grep -c '"source":"long"' mix.json)" -eq 100 ]
	[ "$(grep -c '"source":"short"' mix.json)" -eq 300 ]
	python3 - <<'PY'
import json
d = [json.loads(l) for l in open("mix.json")]
n = {"short": 0, "long": 0}
for k, x in enumerate(x for x in d if x["kind"] == "doc"):
    n[x["source"]] += 1
    assert abs(n["short"] - 0.75 * (k + 1)) <= 1, (k, n)
PY
}

@test "on-exhaust: stop ends cleanly, drop renormalizes, repeat runs on to stop tokens=" {
	skewed a 60 50 6
	skewed b 300 50 7
	"$OVL_SOURCE" a a.jsonl > a.f
	"$OVL_SOURCE" b b.jsonl > b.f
	# stop: the stream ends when a runs out, well before b
	printf 'source a path=a.jsonl on-exhaust=stop\nsource b path=b.jsonl\n' > stop.plan
	run -0 --separate-stderr "$OVL_MIX" --json stop.plan a=a.f b=b.f
	printf '%s\n' "$output" > stop.json
	[ "$(grep -c '"source":"a"' stop.json)" -eq 60 ]
	nb=$(grep -c '"source":"b"' stop.json)
	[ "$nb" -ge 50 ] && [ "$nb" -le 75 ]
	[[ "${lines[-1]}" == '{"kind":"end",'* ]]
	# drop: a is dropped, b goes on to its end
	printf 'source a path=a.jsonl on-exhaust=drop\nsource b path=b.jsonl on-exhaust=drop\n' > drop.plan
	run -0 --separate-stderr "$OVL_MIX" --json drop.plan a=a.f b=b.f
	printf '%s\n' "$output" > drop.json
	[ "$(grep -c '"source":"a"' drop.json)" -eq 60 ]
	[ "$(grep -c '"source":"b"' drop.json)" -eq 300 ]
	# three sources, one dropped: the other two keep their 2:1 ratio after it
	skewed c 400 50 8
	"$OVL_SOURCE" c c.jsonl > c.f
	printf 'source a path=a.jsonl on-exhaust=drop\nsource b path=b.jsonl on-exhaust=drop\nsource c path=c.jsonl\nweights a=1 b=2 c=1\n' > drop3.plan
	run -0 --separate-stderr "$OVL_MIX" --json drop3.plan a=a.f b=b.f c=c.f
	printf '%s\n' "$output" > drop3.json
	python3 - <<'PY'
import json
d = [json.loads(l) for l in open("drop3.json")]
d = [x for x in d if x["kind"] == "doc"]
last_a = max(i for i, x in enumerate(d) if x["source"] == "a")
last_b = max(i for i, x in enumerate(d) if x["source"] == "b")
assert last_a < last_b
after = d[last_a + 1:last_b + 1]
tb = sum(x["ntokens"] for x in after if x["source"] == "b")
tc = sum(x["ntokens"] for x in after if x["source"] == "c")
assert sum(1 for x in d if x["source"] == "a") == 60
assert abs(tb / (tb + tc) - 2 / 3) < 0.05, (tb, tc)
PY
	# repeat: a runs with --repeat, the plan's stop tokens= ends the stream
	fifo_source a.fifo --repeat a a.jsonl
	printf 'source a path=a.jsonl on-exhaust=repeat\nsource b path=b.jsonl on-exhaust=repeat\nstop tokens=20K\n' > rep.plan
	fifo_source b.fifo --repeat b b.jsonl
	run -0 --separate-stderr "$OVL_MIX" --json rep.plan a=a.fifo b=b.fifo
	printf '%s\n' "$output" > rep.json
	# a (60 documents) went round more than once, epochs counted up
	grep -q '"source":"a","id":0,"mix_pos":[0-9]*,"mix_tokens":[0-9]*,"pos":\[2,' rep.json
	wait
	# repeat without --repeat upstream is an error
	run -1 "$OVL_MIX" --json rep.plan a=a.f b=b.f
	[[ "$output" == *"source 'a' ended, but the plan says on-exhaust=repeat"* ]]
}

@test "the mixed bytes do not depend on the partition count (1, 2, 4)" {
	cat > p.plan <<PLAN
source web path=$SAMPLES/web/web-*.jsonl* format=jsonl shuffle-seed=5 epochs=2
source books path=$SAMPLES/books/*.txt doc-per=file
weights web=2 books=1
seq-len 512
ranks 2
checkpoint every=2
PLAN
	mapfile -d '' web < <("$OVL_MIX" --source-args web p.plan)
	mapfile -d '' books < <("$OVL_MIX" --source-args books p.plan)
	for n in 1 2 4; do
		ins=()
		for ((p = 0; p < n; p++)); do
			fifo_source "w$n.$p" --partition "$p/$n" "${web[@]}"
			fifo_source "b$n.$p" --partition "$p/$n" "${books[@]}"
			ins+=("web=w$n.$p" "books=b$n.$p")
		done
		# inputs of the two sources interleaved: each source's stay in order
		"$OVL_MIX" p.plan "${ins[@]}" > "mix$n"
	done
	wait
	[ -s mix1 ]
	# every frame but the STATE texts (which record the partition count)
	for n in 1 2 4; do
		python3 "$MIXTOOL" frames "mix$n" | grep -v '^6 ' > "f$n"
		python3 "$MIXTOOL" frames "mix$n" | grep -c '^6 ' > "s$n"
	done
	[ "$(wc -l < f1)" -gt 300 ]
	cmp f1 f2
	cmp f1 f4
	cmp s1 s4
	# barriers are in it, and partitions in the wrong order are refused
	[ "$(python3 "$MIXTOOL" frames mix1 | grep -c '^5 ')" -gt 2 ]
	fifo_source x0 --partition 0/2 "${web[@]}"
	fifo_source x1 --partition 1/2 "${web[@]}"
	fifo_source y0 "${books[@]}"
	run -2 "$OVL_MIX" p.plan web=x1 web=x0 books=y0
	[[ "$output" == *"is partition "[01]"/2, but is given as partition "[01]"/2 (inputs go in partition order)"* ]]
	wait
}

@test "inputs with a different vocabulary or end-of-document token are refused" {
	"$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" > a.f
	"$OVL_SOURCE" --eod-token 10 --doc-per file book "$SAMPLES/books/book-00.txt" > b.f
	run -2 "$OVL_MIX" "$SAMPLES/plans/small.plan" web=a.f book=b.f
	[[ "$output" == *"'book=b.f': tokenizer bytes (vocab 257, eod 10) differs from 'web=a.f': bytes (vocab 257, eod 256)"* ]]
	# a META without vocab (its "vocab" key renamed, payload offset 8 + 16)
	# is blamed on its own input, whichever comes first
	cp a.f novocab.f
	"$OVL_TEST_TOOL" poke novocab.f 0 24 $(printf 'xoca' | od -An -tu4 | tr -d ' ')
	run -3 "$OVL_MIX" "$SAMPLES/plans/small.plan" web=novocab.f book=b.f
	[[ "$output" == *"input web=novocab.f: 'novocab.f': META has no vocab at byte offset 16"* ]]
	# an input carrying another source
	"$OVL_SOURCE" --doc-per file other "$SAMPLES/books/book-00.txt" > c.f
	run -2 "$OVL_MIX" "$SAMPLES/plans/small.plan" web=a.f book=c.f
	[[ "$output" == *"'book=c.f' carries source 'other', not 'book'"* ]]
	# a truncated input is a framing error naming it
	head -c 3000 a.f > t.f
	"$OVL_SOURCE" --doc-per file book "$SAMPLES"/books/book-0[0-4].txt > d.f
	run -3 "$OVL_MIX" "$SAMPLES/plans/small.plan" web=t.f book=d.f
	[[ "$output" == *"input web=t.f: 't.f': truncated"* ]]
	run -1 "$OVL_MIX" --json "$SAMPLES/plans/small.plan" web=a.f book=/nonexistent
}

@test "--stats writes per-input JSON; -v reports on stderr; terminals refused" {
	# web's frames all there before the mixer starts (a file never makes
	# it wait), book's throttled through a FIFO
	"$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" > w.f
	fifo_source b.fifo --throttle 20docs --doc-per file book "$SAMPLES"/books/book-0[0-4].txt
	run -0 "$OVL_MIX" -v --stats st.json "$SAMPLES/plans/small.plan" web=w.f book=b.fifo
	[[ "$output" == *"input book=b.fifo: 5 docs,"* ]]
	python3 - <<'PY'
import json
s = json.load(open("st.json"))
assert s["final"] is True and s["pos"] == 115
src = {x["name"]: x for x in s["sources"]}
assert src["book"]["docs"] == 5 and src["web"]["docs"] == 110
i = src["book"]["inputs"][0]
assert i["path"] == "b.fifo" and i["docs"] == 5
# the throttled source is the one the mixer waited for
assert src["book"]["blocked_s"] > src["web"]["blocked_s"], s
assert abs(sum(x["share"] for x in s["sources"]) - 1) < 1e-6
PY
	run -2 script -qec "$OVL_MIX $SAMPLES/plans/small.plan web=/dev/null book=/dev/null" /dev/null
}
