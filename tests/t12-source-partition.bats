#!/usr/bin/env bats
# ovl-source --partition: the documents of all partitions, taken chunk by
# chunk in canonical order, are the same for every partition count.

load test_helper

# merge E:C N FILE...: read N partition streams (frames) the way ovl-mix
# does: canonical chunk k from partition k % N until its CHUNK_END, epoch
# after epoch, from chunk C of epoch E on. Prints one line per document: its
# DOC payload's SHA-1 and cursor.
merge() {
	python3 - "$@" <<'EOF'
import hashlib, struct, sys
e0, c0 = map(int, sys.argv[1].split(":"))
n = int(sys.argv[2])
parts = []
for path in sys.argv[3:]:
    b = open(path, "rb").read()
    assert b[:8] == b"\x89OVL\r\n\x1a\n"
    off, frames = 16, []
    while off < len(b):
        ln, kind = struct.unpack_from("<IB", b, off)
        frames.append((kind, b[off + 12: off + 12 + ln]))
        off += 12 + ln
    assert frames[0][0] == 1 and frames[-1][0] == 7, "META ... END"
    parts.append(frames[1:-1])
assert len(parts) == n
pos = [0] * n
nchunks = None
out = []
for ep in range(e0, 1000):
    k = c0 if ep == e0 else 0
    while nchunks is None or k < nchunks:
        p = k % n
        if pos[p] >= len(parts[p]):
            break
        while True:
            kind, pl = parts[p][pos[p]]
            pos[p] += 1
            if kind == 3:
                src, e, c, nc, ndocs, nbytes = struct.unpack_from("<4I2Q", pl)
                assert (e, c) == (ep, k), ("CHUNK_END out of order", e, c, ep, k)
                nchunks = nc
                break
            assert kind == 2
            e, c = struct.unpack_from("<2I", pl, 8)
            assert (e, c) == (ep, k), ("DOC of another chunk", e, c, ep, k)
            noff, nrec = struct.unpack_from("<2Q", pl, 32)
            out.append("%s %d:%d:%d:%d" % (hashlib.sha1(pl).hexdigest(), e, c, noff, nrec))
        k += 1
    if all(pos[i] >= len(parts[i]) for i in range(n)):
        break
assert all(pos[i] == len(parts[i]) for i in range(n)), "frames left over"
print("\n".join(out))
EOF
}

# run_parts N OUT ARGS...: run N partitions of ARGS, merge them into OUT
# (from $START, E:C, default 0:0).
run_parts() {
	local n=$1 out=$2 p files=()
	shift 2
	for ((p = 0; p < n; p++)); do
		"$OVL_SOURCE" --partition "$p/$n" "$@" > "$BATS_TEST_TMPDIR/part.$p" || return 1
		files+=("$BATS_TEST_TMPDIR/part.$p")
	done
	merge "${START:-0:0}" "$n" "${files[@]}" > "$out"
}

@test "partitions 1, 2, 3, 5 give the same document sequence (chunked jsonl, shuffled, 2 epochs)" {
	args=(--chunk-size 25000 --shuffle-seed 5 --epochs 2 web "$SAMPLES"/web/web-0.jsonl
	    "$SAMPLES"/web/web-2.jsonl.zst "$SAMPLES"/web/web-1.jsonl)
	for n in 1 2 3 5; do
		run_parts "$n" "$BATS_TEST_TMPDIR/seq.$n" "${args[@]}"
	done
	run -0 wc -l < "$BATS_TEST_TMPDIR/seq.1"
	[ "$output" -eq 650 ]
	for n in 2 3 5; do
		cmp "$BATS_TEST_TMPDIR/seq.1" "$BATS_TEST_TMPDIR/seq.$n"
	done
}

@test "partitions 1, 2, 3, 5 agree for books, tar and WebDataset sources too" {
	for n in 1 2 3 5; do
		run_parts "$n" "$BATS_TEST_TMPDIR/b.$n" --doc-per file --shuffle-seed 9 books "$SAMPLES"/books/*.txt
		run_parts "$n" "$BATS_TEST_TMPDIR/w.$n" --format wds wds "$SAMPLES"/wds/shard-*.tar \
		    "$SAMPLES"/wds/shard-*.tar "$SAMPLES"/wds/shard-000000.tar
	done
	for n in 2 3 5; do
		cmp "$BATS_TEST_TMPDIR/b.1" "$BATS_TEST_TMPDIR/b.$n"
		cmp "$BATS_TEST_TMPDIR/w.1" "$BATS_TEST_TMPDIR/w.$n"
	done
	run -0 wc -l < "$BATS_TEST_TMPDIR/w.1"
	[ "$output" -eq 112 ]
}

@test "the shuffled chunk order differs per epoch and is the same for the same seed" {
	"$OVL_SOURCE" --json --shuffle-seed 42 --epochs 2 --doc-per file books "$SAMPLES"/books/*.txt \
	    > "$BATS_TEST_TMPDIR/a"
	"$OVL_SOURCE" --json --shuffle-seed 42 --epochs 2 --doc-per file books "$SAMPLES"/books/*.txt \
	    > "$BATS_TEST_TMPDIR/b"
	cmp "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
	# sum of the tokens of each canonical chunk tells which file it is
	run -0 python3 -c '
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1])]
e0 = [d["ntokens"] for d in docs if d["pos"][0] == 0]
e1 = [d["ntokens"] for d in docs if d["pos"][0] == 1]
assert sorted(e0) == sorted(e1) and len(e0) == 8
assert e0 != e1, "epochs in the same order"
assert e0 != sorted(e0) or e1 != sorted(e1)
' "$BATS_TEST_TMPDIR/a"
}

@test "a partition that owns no chunk writes META and END at once, even with --repeat" {
	"$OVL_SOURCE" --repeat --partition 3/4 lines "$SAMPLES/lines.txt.gz" "$SAMPLES/lines.txt.gz" \
	    > "$BATS_TEST_TMPDIR/f"
	run -0 bash -c '"$1" dump "$2" | cut -d" " -f1 | tr "\n" " "' _ "$OVL_TEST_TOOL" "$BATS_TEST_TMPDIR/f"
	[ "$output" = "META END " ]
}

@test "every owned chunk ends with CHUNK_END, even when all its documents are filtered" {
	"$OVL_SOURCE" --partition 1/2 --min-tokens 999999 --doc-per file books "$SAMPLES"/books/*.txt \
	    > "$BATS_TEST_TMPDIR/f"
	# the chunks of the CHUNK_ENDs, and no DOC
	run -0 bash -c '"$1" dump "$2" | sed -n "s/^CHUNK_END .* chunk=\([0-9]*\) .*/\1/p; s/^DOC .*/DOC/p" | tr "\n" " "' _ "$OVL_TEST_TOOL" "$BATS_TEST_TMPDIR/f"
	[ "$output" = "1 3 5 7 " ]
}

@test "resume with a different partition count: the merged continuation equals the uncut run" {
	args=(--chunk-size 25000 --shuffle-seed 5 web "$SAMPLES"/web/web-0.jsonl "$SAMPLES"/web/web-1.jsonl)
	run_parts 1 "$BATS_TEST_TMPDIR/uncut" "${args[@]}"
	for k in 1 77 150; do
		cur=$(sed -n "${k}p" "$BATS_TEST_TMPDIR/uncut" | cut -d' ' -f2)
		# the chunk holding the cursor comes first; merge starts there
		START=$(echo "$cur" | cut -d: -f1,2) run_parts 3 "$BATS_TEST_TMPDIR/rest" \
		    --resume "$cur" "${args[@]}"
		tail -n +"$((k + 1))" "$BATS_TEST_TMPDIR/uncut" > "$BATS_TEST_TMPDIR/want"
		run -0 python3 -c '
import sys
want = open(sys.argv[1]).read().split("\n")
got = open(sys.argv[2]).read().split("\n")
assert got == want, (len(got), len(want))' "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/rest"
	done
}

@test "partitions 1, 2, 3, 5 agree for pre-tokenized jsonl (--field-type ids)" {
	ids_jsonl "$BATS_TEST_TMPDIR/ids.jsonl" "$SAMPLES"/web/web-0.jsonl "$SAMPLES"/web/web-1.jsonl
	for n in 1 2 3 5; do
		run_parts "$n" "$BATS_TEST_TMPDIR/i.$n" --chunk-size 15000 --shuffle-seed 3 \
		    --field ids --field-type ids --tokenizer "hf:$SAMPLES/tokenizers/sample-tokenizer.json" \
		    web "$BATS_TEST_TMPDIR/ids.jsonl"
	done
	[ "$(wc -l < "$BATS_TEST_TMPDIR/i.1")" -ge 200 ]
	for n in 2 3 5; do
		cmp "$BATS_TEST_TMPDIR/i.1" "$BATS_TEST_TMPDIR/i.$n"
	done
}

@test "partitions 1, 2, 3, 5 agree for parquet (row groups are the chunks), shuffled over two epochs" {
	for n in 1 2 3 5; do
		run_parts "$n" "$BATS_TEST_TMPDIR/q.$n" --shuffle-seed 5 --epochs 2 \
		    --field doc.text web "$SAMPLES/parquet/web-1.parquet"
	done
	[ "$(wc -l < "$BATS_TEST_TMPDIR/q.1")" -eq 190 ]
	for n in 2 3 5; do
		cmp "$BATS_TEST_TMPDIR/q.1" "$BATS_TEST_TMPDIR/q.$n"
	done
}

@test "partitions 1, 2, 3 agree for token files (.npy and Megatron), shuffled over two epochs" {
	local py d=$BATS_TEST_TMPDIR/tok n
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	mkdir -p "$d"
	"$py" "$OVL_SRCDIR/tests/helper/tokfiles.py" "$d" "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-1.jsonl" "$SAMPLES/web/web-0.jsonl"
	for n in 1 2 3; do
		run_parts "$n" "$BATS_TEST_TMPDIR/t.$n" --shuffle-seed 5 --epochs 2 \
		    web "$d/eod16.npy" "$d/eod16b.npy" "$d/off.npy"
		run_parts "$n" "$BATS_TEST_TMPDIR/m.$n" --shuffle-seed 5 --epochs 2 \
		    web "$d/mega16.bin" "$d/mega16b.bin" "$d/mega64.bin"
	done
	[ "$(wc -l < "$BATS_TEST_TMPDIR/t.1")" -ge 400 ]
	[ "$(wc -l < "$BATS_TEST_TMPDIR/m.1")" -ge 400 ]
	for n in 2 3; do
		cmp "$BATS_TEST_TMPDIR/t.1" "$BATS_TEST_TMPDIR/t.$n"
		cmp "$BATS_TEST_TMPDIR/m.1" "$BATS_TEST_TMPDIR/m.$n"
	done
}
