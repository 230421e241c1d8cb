#!/usr/bin/env bats
# Documents shuffled in windows (shuffle-window=, ovl-source
# --shuffle-window): a permutation of the unshuffled documents, the same
# bytes from the same seed, resumed exactly at every barrier with any
# partition count, and a restarted writer's repeats dropped by ovl-mix.

load test_helper

DOCTOOL="$FIXTURES/shuffle/doctool.py"
MIXTOOL="$FIXTURES/plan/mixtool.py"

setup() {
	cd "$BATS_TEST_TMPDIR"
	cat > p.plan <<PLAN
seed 7
shuffle-window 6
source web path=$SAMPLES/web/web-*.jsonl* format=jsonl chunk-size=48K on-exhaust=drop
source books path=$SAMPLES/books/book-0[0-5].txt doc-per=blank-line shuffle-window=2chunks on-exhaust=drop
weights web=0.6 books=0.4
seq-len 256
ranks 2
micro-batches 2
checkpoint every=3
stop steps=30
PLAN
	for s in web books; do
		"$OVL_MIX" --source-args "$s" p.plan > "$s.args"
	done
}

IN=()

@test "shuffle-window: the same documents in another order, the same bytes from the same seed" {
	web=("$SAMPLES"/web/web-*.jsonl* --chunk-size 48K)
	"$OVL_SOURCE" web "${web[@]}" --shuffle-seed 3 > plain.f
	"$OVL_SOURCE" web "${web[@]}" --shuffle-window 6 --shuffle-seed 3 > a.f
	"$OVL_SOURCE" web "${web[@]}" --shuffle-window 6 --shuffle-seed 3 > b.f
	"$OVL_SOURCE" web "${web[@]}" --shuffle-window 6 --shuffle-seed 4 > c.f
	"$OVL_SOURCE" web "${web[@]}" --shuffle-window chunk --shuffle-seed 3 > d.f
	"$OVL_SOURCE" web "${web[@]}" --shuffle-window none --shuffle-seed 3 > n.f
	cmp a.f b.f
	cmp plain.f n.f
	python3 "$DOCTOOL" docs plain.f > plain.d
	for f in a c d; do
		python3 "$DOCTOOL" docs $f.f > $f.d
	done
	# a permutation: the same multiset of documents (in each chunk, with
	# the chunks in the same order), in another order
	for f in a c d; do
		cmp <(cut -d' ' -f8 plain.d | sort) <(cut -d' ' -f8 $f.d | sort)
		! cmp -s <(cut -d' ' -f8 plain.d) <(cut -d' ' -f8 $f.d)
	done
	for f in a d; do
		cmp <(cut -d' ' -f1,2,8 plain.d | sort) <(cut -d' ' -f1,2,8 $f.d | sort)
	done
	! cmp -s <(cut -d' ' -f8 a.d) <(cut -d' ' -f8 c.d)
	# windows of 6 records: the first 6 documents are the first 6 read
	cmp <(head -n 6 plain.d | cut -d' ' -f8 | sort) <(head -n 6 a.d | cut -d' ' -f8 | sort)
	! cmp -s <(head -n 6 plain.d | cut -d' ' -f8) <(head -n 6 a.d | cut -d' ' -f8)
	# flagged; document j of window w at position 7w+j, the cursor after
	# it the window's start
	awk '$7 != 8 || $6 != $3 + 1 { exit 1 }' a.d
	awk 'NR <= 6 && ($3 != NR - 1 || $5 != 0) { exit 1 }' a.d
	awk 'NR == 7 && $3 != 7 { exit 1 }' a.d
	awk '$7 != 0 { exit 1 }' plain.d
	# groups of 4 chunks: one window of their documents, all numbered
	# in the group's first chunk, its neighbours from other chunks
	"$OVL_SOURCE" web "${web[@]}" --shuffle-window 4chunks --shuffle-seed 3 > g.f
	python3 "$DOCTOOL" docs g.f > g.d
	cmp <(cut -d' ' -f8 plain.d | sort) <(cut -d' ' -f8 g.d | sort)
	[ "$(cut -d' ' -f2 g.d | sort -u | tr '\n' ' ')" = "0 4 " ]
	awk '$5 != 0 || $6 != $3 + 1 { exit 1 }' g.d
	# neighbours from two chunks (each document's chunk as in plain.d, a
	# repeated text in one of them): about one pair a chunk in file
	# order, most pairs in groups of 4
	chg() { awk 'NR == FNR { c[$8] = $2; next } FNR > 1 && c[$8] != p { n++ }
	    { p = c[$8] } END { print n + 0 }' plain.d "$1"; }
	[ "$(chg g.d)" -ge $((10 * $(chg plain.d))) ]
}

@test "a cursor of every document resumes the shuffled stream exactly" {
	books=("$SAMPLES"/books/book-0[01].txt --doc-per blank-line --chunk-size 2K
	    --shuffle-seed 5)
	for w in 4 chunk 2chunks; do
		"$OVL_SOURCE" books "${books[@]}" --shuffle-window $w > full.f
		python3 "$DOCTOOL" docs full.f > full.d
		n=$(wc -l < full.d)
		[ "$n" -ge 15 ]
		rm -f r.*
		# the cursor after document i: epoch:chunk:next_off:next_rec
		awk '{ print $1 ":" $2 ":" $5 ":" $6 }' full.d > cursors
		i=0
		while read -r c; do
			i=$((i + 1))
			"$OVL_SOURCE" books "${books[@]}" --shuffle-window $w \
			    --resume "$c" > r.$i
		done < cursors
		python3 "$DOCTOOL" resumed full.f r "$n"
	done
}

@test "resuming at every barrier of a shuffled run continues it exactly, with any partition count" {
	IN=()
	start_partitions web 2 u
	start_partitions books 1 u
	"$OVL_MIX" p.plan "${IN[@]}" > uncut
	wait
	# another partition count: the same bytes
	IN=()
	start_partitions web 3 t
	start_partitions books 2 t
	"$OVL_MIX" --json p.plan "${IN[@]}" > uncut.json
	wait
	IN=()
	start_partitions web 1 o
	start_partitions books 3 o
	"$OVL_MIX" p.plan "${IN[@]}" > other
	wait
	# all but the STATEs, which name the partition counts
	cmp <(python3 "$MIXTOOL" frames uncut | grep -v '^6 ') \
	    <(python3 "$MIXTOOL" frames other | grep -v '^6 ')
	python3 - <<'PY'
import json
for l in open("uncut.json"):
    x = json.loads(l)
    if x["kind"] == "state":
        open("state.%d" % x["n"], "w").write(x["text"])
PY
	nb=$(ls state.* | wc -l)
	[ "$nb" -ge 8 ]
	for ((n = 1; n <= nb; n++)); do
		cur() { sed -n "s/^source\.$1\.cursor //p" "state.$n"; }
		IN=()
		start_partitions web $((n % 3 + 1)) "r$n" "$(cur web)"
		start_partitions books $((n % 2 + 1)) "r$n" "$(cur books)"
		"$OVL_MIX" --resume "state.$n" p.plan "${IN[@]}" > "resumed.$n"
		wait
	done
	# cursors inside windows were among them
	grep -h '^source\.web\.cursor' state.* | awk -F: '$4 % 7 != 0 { n++ } END { exit n < 2 }'
	run -0 python3 "$MIXTOOL" resumed uncut resumed "$nb"
}

@test "--reopen: a shuffled source restarted from the start, its repeats dropped" {
	IN=()
	start_partitions web 1 u
	start_partitions books 1 u
	"$OVL_MIX" p.plan "${IN[@]}" > uncut
	wait
	killed_writer web 30000
	IN=()
	start_partitions books 1 a
	"$OVL_MIX" --reopen p.plan "${IN[@]}" web=k.fifo > reopened 2> err
	wait
	grep -q "waiting for a new writer on 'k.fifo'" err
	cmp uncut reopened
}

@test "shuffle-window in plans: per source, plan-wide, checked" {
	run -0 --separate-stderr "$OVL_MIX" --check p.plan
	[[ "$output" == *"shuffle-window=2chunks"* ]]
	[[ "$output" == *$'\nshuffle-window 6'* ]]
	run -0 tr '\0' ' ' < web.args
	[[ "$output" == *"--shuffle-window 6 "* ]]
	run -0 tr '\0' ' ' < books.args
	[[ "$output" == *"--shuffle-window 2chunks "* ]]
	sed 's/^shuffle-window 6$/shuffle-window lots/' p.plan > bad.plan
	run -2 --separate-stderr "$OVL_MIX" --check bad.plan
	[[ "$stderr" == *"bad.plan:2: bad shuffle-window 'lots'"* ]]
	run -2 --separate-stderr "$OVL_SOURCE" --shuffle-window 0x web "$SAMPLES/web/web-0.jsonl"
	[[ "$stderr" == *"bad --shuffle-window '0x'"* ]]
	run -2 --separate-stderr "$OVL_SOURCE" --json --shuffle-window 4 web "$SAMPLES/web/web-0.jsonl"
	# a stream read in groups other than the plan's
	mapfile -d '' args < web.args
	"$OVL_SOURCE" "${args[@]}" > web.f
	"$OVL_SOURCE" books "$SAMPLES/books/book-00.txt" --doc-per blank-line > books.f
	run -2 --separate-stderr "$OVL_MIX" p.plan web=web.f books=books.f
	[[ "$stderr" == *"'books=books.f' reads chunks in groups of 1, the plan's shuffle-window= in groups of 2"* ]]
	# a cursor past the documents of its window
	run -2 --separate-stderr "$OVL_SOURCE" --shuffle-window 4 --resume 0:0:0:4 web \
	    "$SAMPLES/books/book-00.txt" --doc-per file
	[[ "$stderr" == *"past the 1 documents of its shuffle window"* ]]
}
