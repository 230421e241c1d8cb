#!/usr/bin/env bats
# Held-out splits (plan key split, ovl-source --split, ovl-run --split):
# every document in exactly one split, the assignment independent of the
# chunking, shuffles and weights, each split a run of its own (outputs,
# checkpoints, steps, summary), resumed exactly after a kill.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
}

# docs FILE: the documents of ovl-source --json output FILE, one line each
docs() {
	sed 's/.*"tokens":\(\[[^]]*\]\).*/\1/' "$1"
}

@test "split: every document in exactly one split, the same with other chunks, shuffles and partitions" {
	web=("$SAMPLES"/web/web-*.jsonl*)
	"$OVL_SOURCE" --json web "${web[@]}" > all.j
	docs all.j | sort > all.d
	n=$(wc -l < all.d)
	[ "$n" -ge 50 ]
	for k in train validation test; do
		"$OVL_SOURCE" --json --split 6,3,1 --split-keep $k --split-seed 9 \
		    web "${web[@]}" > $k.j
		docs $k.j | sort > $k.d
		[ -s $k.d ]
		# other chunks, shuffled, in two partitions: the same documents
		for p in 0 1; do
			"$OVL_SOURCE" --json --split 6,3,1 --split-keep $k \
			    --split-seed 9 --chunk-size 16K --shuffle-seed 4 \
			    --partition $p/2 web "${web[@]}"
		done > $k.c.j
		docs $k.c.j | sort | cmp - $k.d
	done
	# the three together are all the documents, each once
	sort train.d validation.d test.d | cmp - all.d
	[ "$(wc -l < train.d)" -gt "$(wc -l < validation.d)" ]
	# another seed draws another split
	"$OVL_SOURCE" --json --split 6,3,1 --split-keep validation --split-seed 10 \
	    web "${web[@]}" | docs /dev/stdin | sort > v10.d
	! cmp -s v10.d validation.d
	# the META names it; bad specs are usage errors
	run -0 "$OVL_SOURCE" --split 6,3,1 --split-keep test --split-seed 9 web "${web[0]}"
	[[ "$output" == *"source.web.split test 6,3,1 9"* ]]
	run -2 "$OVL_SOURCE" --split 6 web "${web[0]}"
	[[ "$output" == *"bad --split '6': at least two weights"* ]]
	run -2 "$OVL_SOURCE" --split 1,1 --split-keep dev web "${web[0]}"
}

@test "plan split: a file's name is relative to the plan, so the split is the same from any directory and after a move" {
	mkdir -p a/data
	cp "$SAMPLES/web/web-0.jsonl" a/data/
	printf 'split 1,1\nsource web path=data/web-0.jsonl\n' > a/p.plan
	one() {	# one DIR PLAN: the validation documents of PLAN run from DIR
		(cd "$1" && OVL_SPLIT=validation "$OVL_MIX" --source-args web "$2" |
		    xargs -0 "$OVL_SOURCE" --json) | docs /dev/stdin
	}
	one a p.plan > 1.d
	[ -s 1.d ]
	one . a/p.plan | cmp - 1.d
	one / "$BATS_TEST_TMPDIR/a/p.plan" | cmp - 1.d
	mv a b
	one b p.plan | cmp - 1.d
	# not every document: a split
	[ "$(wc -l < 1.d)" -lt "$(wc -l < "$SAMPLES/web/web-0.jsonl")" ]
}

@test "plan split: each split its own run, the same documents after a change of weights" {
	for w in "web=0.7 books=0.3" "web=0.2 books=0.8"; do
		{
			printf 'seed 3\nsplit 6,3,1\nseq-len 128\nranks 2\n'
			printf 'source web path=%s on-exhaust=drop\n' "$SAMPLES/web/web-0.jsonl"
			printf 'source books path=%s doc-per=blank-line on-exhaust=drop\n' "$SAMPLES/books/book-0[0-3].txt"
			printf 'weights %s\ncheckpoint every=2 dir=ck\noutput format=jsonl path=out/s\n' "$w"
		} > p.plan
		# the plan's sources get the split, the seed and the plan's directory
		OVL_SPLIT=validation "$OVL_MIX" --source-args web p.plan | tr '\0' ' ' > args
		grep -q -- "--split 6,3,1 --split-keep validation --split-seed 3 --split-root . web " args
		rm -rf ck* out
		for s in train validation test; do
			"$OVL_RUN" -q -d run --split $s --summary "$s.json" p.plan 3>&-
		done
		# each its own outputs and checkpoints; train at the plan's paths
		ls -d ck ck.validation ck.test out/s.jsonl out/s.validation.jsonl out/s.test.jsonl
		for s in train validation test; do
			cp "$s.json" "$s.${w%%=*}${w:4:3}.json"
		done
	done
	# the plan without split: one run of everything
	grep -v '^split' p.plan > n.plan
	rm -rf ck out
	"$OVL_RUN" -q -d run --summary all.json n.plan 3>&-
	python3 - <<'PY'
import glob, json
def per(f):
    s = json.load(open(f))
    return s.get("split"), {x["name"]: (x["tokens"], x["docs"]) for x in s["sources"]}
whole = per("all.json")[1]
a = {k: per("%s.web0.7.json" % k) for k in ("train", "validation", "test")}
b = {k: per("%s.web0.2.json" % k) for k in ("train", "validation", "test")}
assert whole["web"][1] > 0 and whole["books"][1] > 0, whole
for k in a:
    assert a[k][0] == k, a[k]
    # the weights changed, every split's documents per source did not
    assert a[k] == b[k], (k, a[k], b[k])
for src in whole:
    # each document in one split: the splits' counts add up to the whole
    assert sum(a[k][1][src][1] for k in a) == whole[src][1], (src, a, whole)
    assert sum(a[k][1][src][0] for k in a) == whole[src][0], (src, a, whole)
    assert all(a[k][1][src][1] > 0 for k in ("train", "validation")), a
PY
	# without split the sources read as before
	"$OVL_MIX" --source-args web n.plan | tr '\0' ' ' > args
	! grep -q -- --split args
	# summaries name the split; a plan without one refuses another split
	run -0 "$OVL_CKPT" summary ck.validation
	[[ "$output" == *"split    validation"* ]]
	run -2 "$OVL_RUN" -q -d run --split test n.plan 3>&-
	[[ "$output" == *"OVL_SPLIT 'test' (ovl-run --split): the plan has no split"* ]]
	run -2 env OVL_SPLIT=dev "$OVL_MIX" --check p.plan
	[[ "$output" == *"OVL_SPLIT 'dev': expected train, validation or test"* ]]
	printf 'source a path=p.plan\nsplit 5\n' > bad.plan
	run -2 "$OVL_MIX" --check bad.plan
	[[ "$output" == *"bad.plan:2: bad split '5': at least two weights"* ]]
}

@test "a split's run (documents shuffled) killed or stopped and resumed writes the uninterrupted bytes" {
	{
		printf 'seed 3\nsplit 1,1\nseq-len 64\nranks 2\nshuffle-window 4\n'
		printf 'source web path=%s on-exhaust=drop throttle=%s\n' "$SAMPLES"/web/web-0.jsonl 40K
		printf 'source books path=%s doc-per=blank-line on-exhaust=drop\n' "$SAMPLES/books/book-0[0-2].txt"
		printf 'checkpoint every=2 dir=ck\noutput format=jsonl path=out/s\n'
	} > p.plan
	# the uninterrupted run, unthrottled: the same bytes
	sed 's/ throttle=[^ ]*//' p.plan > u.plan
	"$OVL_RUN" -q -d run --split validation u.plan 3>&-
	mv out/s.validation.jsonl ref.jsonl
	[ -s ref.jsonl ]
	[ ! -e out/s.jsonl ]
	# -o and -c take the split's name too
	"$OVL_RUN" -q -d run --restart 1 --split validation -o o2/s -c ck2 \
	    p.plan 3>&- 2> err &
	kill_stage_once $! ck2.validation ovl-mix
	wait
	[ -n "$victim" ]
	cmp ref.jsonl o2/s.validation.jsonl
	# the run stopped (SIGTERM) resumes to the same bytes, never with
	# another split
	rm -rf o2 ck2.validation
	# slower: the signal comes well before the end
	sed 's/ throttle=40K/ throttle=8K/' p.plan > t.plan
	"$OVL_RUN" -q -d run --split validation -o o2/s -c ck2 t.plan 3>&- 2> err &
	pid=$!
	wait_ckpt ck2.validation 1 "$pid"
	kill -TERM "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 143 ]
	sed 's/^split 1,1$/split 2,1/' p.plan > q.plan
	run -2 "$OVL_RUN" -q -d run --resume --split validation -o o2/s -c ck2 q.plan 3>&-
	[[ "$output" == *"mix.state:"*": the held-out split changed since the run began (split validation 1,1 3, the plan validation 2,1 3)"* ]]
	"$OVL_RUN" -q -d run --resume --split validation -o o2/s -c ck2 u.plan 3>&-
	cmp ref.jsonl o2/s.validation.jsonl
}
