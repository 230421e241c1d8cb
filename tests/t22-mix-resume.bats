#!/usr/bin/env bats
# ovl-mix state: resume from every barrier of a run, sources restarted at
# their cursors behind FIFOs; failed writers with and without --reopen.

load test_helper

MIXTOOL="$FIXTURES/plan/mixtool.py"

setup() {
	cd "$BATS_TEST_TMPDIR"
	cat > p.plan <<PLAN
source web path=$SAMPLES/web/web-*.jsonl* format=jsonl shuffle-seed=3 on-exhaust=drop
source books path=$SAMPLES/books/book-0[0-5].txt doc-per=file on-exhaust=drop
source code path=$SAMPLES/code/code.tar.zst member-ext=.c on-exhaust=repeat
weights web=0.5 books=0.3 code=0.2
weights at=60K web=0.2 books=0.3 code=0.5 ramp=linear
seq-len 512
seq-len at=100K 1024
ranks 2
micro-batches 2
checkpoint every=3
stop tokens=200K
PLAN
	for s in web books code; do
		"$OVL_MIX" --source-args "$s" p.plan > "$s.args"
	done
}

IN=()

@test "resuming at every barrier continues the uncut stream exactly" {
	IN=()
	start_partitions web 2 u
	start_partitions books 1 u
	start_partitions code 1 u
	"$OVL_MIX" p.plan "${IN[@]}" > uncut
	wait
	python3 "$MIXTOOL" frames uncut > uncut.frames
	nb=$(grep -c '^5 ' uncut.frames)
	[ "$nb" -ge 10 ]
	# the STATE texts, one file per checkpoint
	IN=()
	start_partitions web 1 j
	start_partitions books 1 j
	start_partitions code 1 j
	"$OVL_MIX" --json p.plan "${IN[@]}" > uncut.json
	wait
	python3 - <<'PY'
import json
for l in open("uncut.json"):
    x = json.loads(l)
    if x["kind"] == "state":
        open("state.%d" % x["n"], "w").write(x["text"])
PY
	for ((n = 1; n <= nb; n++)); do
		cur() { sed -n "s/^source\.$1\.cursor //p" "state.$n"; }
		# another partition count on resume: the cursor is the same
		IN=()
		start_partitions web $((n % 3 + 1)) "r$n" "$(cur web)"
		start_partitions books 2 "r$n" "$(cur books)"
		start_partitions code 1 "r$n" "$(cur code)"
		"$OVL_MIX" --resume "state.$n" p.plan "${IN[@]}" > "resumed.$n"
		wait
	done
	# each resumed stream, after its META, is the uncut one after barrier n
	run -0 python3 "$MIXTOOL" resumed uncut resumed "$nb"
	# the json and frame streams agree on the barriers
	[ "$(grep -c '"kind":"barrier"' uncut.json)" -eq "$nb" ]
}

@test "STATE text: fixed keys, a cursor and a partition count per source" {
	IN=()
	start_partitions web 2 j
	start_partitions books 1 j
	start_partitions code 1 j
	"$OVL_MIX" --json p.plan "${IN[@]}" > out.json
	wait
	python3 - <<'PY'
import json
st = [json.loads(l) for l in open("out.json")]
st = [x for x in st if x["kind"] == "state"]
assert st and all(x["stage"] == "mix" for x in st)
keys = [l.split(" ")[0] for l in st[0]["text"].splitlines()]
assert keys[:4] == ["version", "checkpoint", "sources", "mix-by"], keys
for s in ("web", "books", "code"):
    assert "source.%s.cursor" % s in keys and "source.%s.partitions" % s in keys
t = dict(l.split(" ", 1) for l in st[0]["text"].splitlines())
assert t["source.web.partitions"] == "2" and t["source.code.partitions"] == "1"
assert len(keys) == len(set(keys))
PY
	# a bad state file is a configuration error
	printf 'version 1\nsources 3\nbogus 1\n' > bad.state
	run -2 "$OVL_MIX" --resume bad.state p.plan web=/dev/null books=/dev/null code=/dev/null
	[[ "$output" == *"bad.state:3: unknown key 'bogus'"* ]]
	run -2 "$OVL_MIX" --resume nonexistent.state p.plan web=/dev/null books=/dev/null code=/dev/null
}

@test "a source killed mid-stream: exit 3 naming it, without --reopen" {
	mapfile -d '' args < books.args
	mkfifo k.fifo src.fifo
	"$OVL_SOURCE" "${args[@]}" > src.fifo 3>&- &
	pid=$!
	# killed mid-stream: once its first 5000 bytes have passed to the mixer
	# (it may have ended of SIGPIPE already)
	{ head -c 5000 < src.fifo; kill -9 "$pid" 2>/dev/null || :; } > k.fifo 3>&- &
	IN=()
	start_partitions web 1 a
	start_partitions code 1 a
	run -3 "$OVL_MIX" p.plan "${IN[@]}" books=k.fifo
	[[ "$output" == *"input books=k.fifo: 'k.fifo': "*"(its writer failed)"* ]]
}

@test "--reopen: a restarted source takes over its FIFO, nothing lost or duplicated" {
	IN=()
	start_partitions web 1 u
	start_partitions books 1 u
	start_partitions code 1 u
	"$OVL_MIX" p.plan "${IN[@]}" > uncut
	wait
	# a writer killed after a few documents (its first 20000 bytes passed
	# to the mixer), then, once the mixer waits for it, a new one from the
	# start
	killed_writer books 20000
	IN=()
	start_partitions web 1 a
	start_partitions code 1 a
	"$OVL_MIX" --reopen --stats st.json p.plan "${IN[@]}" books=k.fifo \
	    > reopened 2> err
	wait
	grep -q "waiting for a new writer on 'k.fifo'" err
	cmp uncut reopened
	python3 - <<'PY'
import json
s = json.load(open("st.json"))
i = [x for x in s["sources"] if x["name"] == "books"][0]["inputs"][0]
assert i["reopens"] == 1 and i["duplicates"] >= 1, i
PY
}

@test "stop steps= ends at a step boundary; no barrier at or after it" {
	sed 's/^stop tokens=200K$/stop steps=20/' p.plan > s.plan
	IN=()
	start_partitions web 1 a
	start_partitions books 1 a
	start_partitions code 1 a
	"$OVL_MIX" --json s.plan "${IN[@]}" > out.json
	wait
	python3 - <<'PY'
import json
d = [json.loads(l) for l in open("out.json")]
bars = [x for x in d if x["kind"] == "barrier"]
assert bars[-1]["step"] == 18, bars[-1]
docs = [x for x in d if x["kind"] == "doc"]
# the step cutter of step.h, independently: pieces of at most seq-len, a
# piece that does not fit the budget opens the next step
step, used, start, T, where = 0, 0, 0, 0, None
for k, x in enumerate(docs):
    left, off = x["ntokens"], 0
    while left:
        sl = 512 if start < 100000 else 1024
        plen = min(left, sl)
        if used and used + plen > 4 * sl:
            start += used; step += 1; used = 0
            sl = 512 if start < 100000 else 1024
            plen = min(left, sl)
            if step == 20 and where is None:
                where = (k, off)
        used += plen; left -= plen; off += plen
assert where is not None
k, off = where
# the last document emitted holds step 20's start inside, or ends at it
assert len(docs) == (k + 1 if off > 0 else k), (len(docs), where)
PY
}
