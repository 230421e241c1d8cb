#!/usr/bin/env bats
# ovl-construct: steps, balancing, packing, barriers and resume, checked by
# an independent reader of the frames (tests/construct-check.py).

load test_helper

setup() {
	construct_setup 160 3
}

@test "help, version, usage errors" {
	run -0 "$OVL_CONSTRUCT" --help
	[[ "${lines[0]}" == "usage: ovl-construct "* ]]
	# the methods named from the tables the option and the plan read
	[[ "$output" == *"  --balance METHOD       none, lpt or kk (default kk)"$'\n'* ]]
	[[ "$output" == *"  --pack METHOD          bfd, first-fit or concat (default bfd)"$'\n'* ]]
	run -0 "$OVL_CONSTRUCT" -V
	[[ "$output" == "ovl-construct "* ]]
	run -2 "$OVL_CONSTRUCT" --balance best
	[[ "$output" == *"unknown --balance 'best' (none, lpt, kk)"* ]]
	[[ "$output" == *"usage:"* ]]
	run -2 "$OVL_CONSTRUCT" --pack tight
	[[ "$output" == *"unknown --pack 'tight' (bfd, first-fit, concat)"* ]]
	run -2 "$OVL_CONSTRUCT" --seq-len 128,64@0
	run -2 "$OVL_CONSTRUCT" --cost 0,0
	run -2 "$OVL_CONSTRUCT" --window 0
	run -2 "$OVL_CONSTRUCT" a.plan b.plan
}

@test "every token once, pieces as cut, sequences consistent: each balance and pack" {
	for m in "--balance kk --pack bfd" "--balance lpt --pack first-fit" \
	    "--balance none --pack concat" "--balance kk --pack concat"; do
		"$OVL_CONSTRUCT" $C $m < "$T/in.f" > "$T/out.f"
		run -0 python3 "$CHECK" check "$T/in.f" "$T/out.f" $C
		[[ "$output" == "ok 160 documents"* ]]
	done
}

@test "the checker catches a wrong cut" {
	"$OVL_CONSTRUCT" $C < "$T/in.f" > "$T/out.f"
	run -1 python3 "$CHECK" check "$T/in.f" "$T/out.f" --ranks 4 \
	    --micro-batches 3 --seq-len 256
	run -1 python3 "$CHECK" check "$T/in.f" "$T/out.f" --ranks 4 \
	    --micro-batches 2 --seq-len 128
}

@test "uniform: every rank the same number of full sequences, padded at the end" {
	"$OVL_CONSTRUCT" $C --uniform --stats "$T/st" < "$T/in.f" > "$T/out.f"
	run -0 python3 "$CHECK" check "$T/in.f" "$T/out.f" $C --uniform
	run -0 python3 -c '
import json, sys
for l in open(sys.argv[1]):
    s = json.loads(l)
    n = len(s["mb"]) * s["mb"][0] * s["seq_len"]
    assert len(set(s["mb"])) == 1, s
    assert s["padding"] == n - s["tokens"], s
    assert s["max_cost"] >= s["lower_bound"] * (1 - 1e-9), s
' "$T/st"
}

@test "window: pieces stay in their window, documents in order, budgets kept" {
	"$OVL_CONSTRUCT" $C --window 4 --stats "$T/st" < "$T/in.f" > "$T/out.f"
	run -0 python3 "$CHECK" check "$T/in.f" "$T/out.f" $C --window 4
	grep -q '"drift":' "$T/st"
	"$OVL_CONSTRUCT" $C --window 3 --uniform < "$T/in.f" > "$T/out.f"
	run -0 python3 "$CHECK" check "$T/in.f" "$T/out.f" $C --window 3 --uniform
}

@test "seq-len schedule: the length switches at the step after the token count" {
	S="--ranks 2 --micro-batches 2 --seq-len 128,512@9000"
	"$OVL_CONSTRUCT" $S --stats "$T/st" < "$T/in.f" > "$T/out.f"
	run -0 python3 "$CHECK" check "$T/in.f" "$T/out.f" $S
	grep -q '"seq_len":128' "$T/st"
	grep -q '"seq_len":512' "$T/st"
	run -0 python3 -c '
import json, sys
prev = None
for l in open(sys.argv[1]):
    s = json.loads(l)
    if prev is not None and prev["seq_len"] == 128 and s["seq_len"] == 512:
        print("switch")
    prev = s
' "$T/st"
	[ "$output" = switch ]
}

@test "deterministic: the same input and flags give the same bytes" {
	"$OVL_CONSTRUCT" $C --window 2 < "$T/in.f" > "$T/a.f"
	"$OVL_CONSTRUCT" $C --window 2 < "$T/in.f" > "$T/b.f"
	cmp "$T/a.f" "$T/b.f"
}

@test "stats: bound below the maximum, kk not worse than none, json fields" {
	"$OVL_CONSTRUCT" $C --stats "$T/st" --json < "$T/in.f" > "$T/out.json"
	run -0 python3 -c '
import json, sys
for l in open(sys.argv[1]):
    s = json.loads(l)
    assert s["max_cost"] >= s["lower_bound"] * (1 - 1e-9), s
    assert s["max_cost"] <= s["none"]["max_cost"] * (1 + 1e-9), s
    assert s["tokens"] <= s["budget"], s
seqs = [json.loads(l) for l in open(sys.argv[2])]
assert seqs[0]["kind"] == "meta" and "seq-len 256" in seqs[0]["text"]
# after every step, one step line per rank (4), with its sequence count
ends = [o for o in seqs if o["kind"] == "step"]
assert ends and len(ends) % 4 == 0
for o in seqs[1:]:
    if o["kind"] == "step":
        assert sorted(o) == ["kind", "rank", "seqs", "step"], o
        continue
    for k in ("step", "rank", "mb", "tokens", "cu_seqlens", "positions", "docs"):
        assert k in o, k
    assert o["cu_seqlens"][-1] == sum(d[3] for d in o["docs"])
print(len(seqs))
' "$T/st" "$T/out.json"
}

@test "image tokens count in the cost" {
	"$GEN" $GENARGS --images 3 > "$T/img.f"
	"$OVL_CONSTRUCT" $C --stats "$T/a" < "$T/img.f" > "$T/a.f"
	"$OVL_CONSTRUCT" $C --stats "$T/b" --image-tokens 300 < "$T/img.f" > "$T/b.f"
	run -0 python3 -c '
import json, sys
a = [json.loads(l)["mean_cost"] for l in open(sys.argv[1])]
b = [json.loads(l)["mean_cost"] for l in open(sys.argv[2])]
assert sum(b) > sum(a) * 1.1, (sum(a), sum(b))
' "$T/a" "$T/b"
	run -0 python3 "$CHECK" check "$T/img.f" "$T/b.f" $C
}

@test "resume at every barrier: cut output plus continuation equals the uncut run" {
	B="$GENARGS --checkpoint-every 2 --ranks 4 --micro-batches 2 --seq-len 256"
	"$GEN" $B > "$T/bar.f"
	for w in 1 3; do
		"$OVL_CONSTRUCT" $C --window $w < "$T/bar.f" > "$T/full.f"
		resume_each "$T/full.f" 5 $B -- $C --window $w
	done
	run -0 python3 "$CHECK" check "$T/bar.f" "$T/full.f" $C --window 3
}

@test "resume: a stream replayed from an earlier checkpoint is read from the resume point on" {
	# (a writer replays from the last commit it heard of, which may be
	# older than the one its restarted reader resumes at)
	B="$GENARGS --checkpoint-every 2 --ranks 4 --micro-batches 2 --seq-len 256"
	"$GEN" $B > "$T/bar.f"
	"$OVL_CONSTRUCT" $C < "$T/bar.f" > "$T/full.f"
	python3 "$CHECK" state "$T/full.f" 2 > "$T/st"
	"$GEN" $B --from-checkpoint 2 | "$OVL_CONSTRUCT" $C --resume "$T/st" > "$T/at2.f"
	for from in 0 1; do
		if [ $from -eq 0 ]; then cat "$T/bar.f"; else "$GEN" $B --from-checkpoint 1; fi |
			"$OVL_CONSTRUCT" $C --resume "$T/st" > "$T/from$from.f"
		cmp "$T/at2.f" "$T/from$from.f"
	done
	[ "$(stat -c %s "$T/at2.f")" -gt 1000 ]
}

@test "barriers from another plan are refused (exit 2)" {
	"$GEN" $GENARGS --checkpoint-every 2 --ranks 4 --micro-batches 2 --seq-len 200 > "$T/bar.f"
	run -2 "$OVL_CONSTRUCT" $C < "$T/bar.f" > "$T/out.f"
	[[ "$output" == *"plans"* ]]
}

@test "resume refuses a state of other settings or of another stream" {
	B="$GENARGS --checkpoint-every 2 --ranks 4 --micro-batches 2 --seq-len 256"
	"$GEN" $B > "$T/bar.f"
	"$OVL_CONSTRUCT" $C < "$T/bar.f" > "$T/full.f"
	python3 "$CHECK" state "$T/full.f" 2 > "$T/st"
	run -2 "$OVL_CONSTRUCT" $C --balance lpt --resume "$T/st" < "$T/bar.f"
	[[ "$output" == *"balance kk"* ]]
	# a stream that starts after the resume point
	"$GEN" $B --from-checkpoint 4 > "$T/later.f"
	run -1 "$OVL_CONSTRUCT" $C --resume "$T/st" < "$T/later.f"
	[[ "$output" == *"resuming at document"* ]]
	echo "bogus 1" > "$T/bad"
	run -2 "$OVL_CONSTRUCT" $C --resume "$T/bad" < "$T/bar.f"
	run -2 "$OVL_CONSTRUCT" $C --resume "$T/nonexistent" < "$T/bar.f"
}

@test "bad input: truncated, corrupt, not documents" {
	head -c 3000 "$T/in.f" > "$T/trunc.f"
	run -3 "$OVL_CONSTRUCT" $C < "$T/trunc.f"
	[[ "$output" == *"byte offset"* ]]
	{ head -c 2000 "$T/in.f"; printf 'XXXX'; tail -c +2005 "$T/in.f"; } > "$T/bad.f"
	run -3 "$OVL_CONSTRUCT" $C < "$T/bad.f"
	"$OVL_CONSTRUCT" $C < "$T/in.f" > "$T/out.f"
	run -3 "$OVL_CONSTRUCT" $C < "$T/out.f"
	[[ "$output" == *"'standard input': unexpected SEQ frame in a stream of documents at byte offset "* ]]
	run -3 "$OVL_CONSTRUCT" $C < /dev/null
}

@test "refuses a terminal, stops quietly on a closed pipe, fails on a full disk" {
	if [ -e /dev/full ]; then
		run -1 bash -c '"$1" $2 < "$3" > /dev/full' _ "$OVL_CONSTRUCT" "$C" "$T/in.f"
	fi
	run -0 bash -c '"$1" $2 < "$3" | head -c 100 > /dev/null; s=("${PIPESTATUS[@]}"); [ "${s[0]}" -eq 141 ] || [ "${s[0]}" -eq 0 ]' _ "$OVL_CONSTRUCT" "$C" "$T/in.f"
}

@test "real pipeline: ovl-source | ovl-mix PLAN | ovl-construct PLAN, resumed at a checkpoint" {
	[ -x "$OVL_SOURCE" ] && [ -x "$OVL_MIX" ] || skip "ovl-source or ovl-mix not built"
	cat > "$T/p.plan" <<PLAN
source web path=$SAMPLES/web/web-0.jsonl
source books path=$SAMPLES/books/*.txt format=text doc-per=blank-line
weights web=1 books=1
seq-len 256
seq-len at=20000 512
ranks 4
micro-batches 2
balance kk cost=1,0
checkpoint every=2
PLAN
	"$OVL_SOURCE" web "$SAMPLES"/web/web-0.jsonl > "$T/web.f"
	"$OVL_SOURCE" --format text --doc-per blank-line books "$SAMPLES"/books/*.txt > "$T/books.f"
	"$OVL_MIX" "$T/p.plan" web="$T/web.f" books="$T/books.f" > "$T/mix.f"
	"$OVL_CONSTRUCT" "$T/p.plan" < "$T/mix.f" > "$T/con.f"
	run -0 python3 "$CHECK" check "$T/mix.f" "$T/con.f" --ranks 4 \
	    --micro-batches 2 --seq-len 256,512@20000
	python3 "$CHECK" state "$T/con.f" 5 > "$T/con5"
	python3 -c '
import struct, sys
sys.argv = sys.argv
data = open(sys.argv[1], "rb").read()
off = 16
while off < len(data):
    ln, kind = struct.unpack_from("<IB", data, off)
    p = data[off + 12:off + 12 + ln]
    if kind == 6:
        st, tl, n = struct.unpack_from("<IIQ", p, 0)
        if st == 1 and n == 5:
            open(sys.argv[2], "w").write(p[16:16 + tl].decode())
    off += 12 + ln
' "$T/con.f" "$T/mix5"
	wc=$(sed -n 's/^source\.web\.cursor //p' "$T/mix5")
	bc=$(sed -n 's/^source\.books\.cursor //p' "$T/mix5")
	"$OVL_SOURCE" --resume "$wc" web "$SAMPLES"/web/web-0.jsonl > "$T/webr.f"
	"$OVL_SOURCE" --resume "$bc" --format text --doc-per blank-line books "$SAMPLES"/books/*.txt > "$T/booksr.f"
	"$OVL_MIX" --resume "$T/mix5" "$T/p.plan" web="$T/webr.f" books="$T/booksr.f" > "$T/mixr.f"
	"$OVL_CONSTRUCT" --resume "$T/con5" "$T/p.plan" < "$T/mixr.f" > "$T/conr.f"
	python3 "$CHECK" after "$T/con.f" 5 > "$T/want"
	python3 "$CHECK" body "$T/conr.f" > "$T/got"
	cmp "$T/want" "$T/got"
}

@test "a stream without META, or with a second one, is a framing error (status 3, as in ovl-mix and ovl-ckpt)" {
	cd "$BATS_TEST_TMPDIR"
	printf 'source web path=%s\nranks 2\nseq-len 256\n' "$SAMPLES/web/web-0.jsonl" > p.plan
	"$OVL_SOURCE" --format jsonl web "$SAMPLES/web/web-0.jsonl" > s.fr
	"$OVL_MIX" p.plan web=s.fr > m.fr
	"$OVL_TEST_TOOL" frames m.fr > frames.txt
	meta_end=$(sed -n 2p frames.txt | cut -d' ' -f2)
	# the stream header, then the frames after META
	{ head -c 16 m.fr; tail -c +$((meta_end + 1)) m.fr; } > nometa.fr
	run -3 --separate-stderr "$OVL_CONSTRUCT" p.plan < nometa.fr
	[[ "$stderr" = "ovl-construct: 'standard input': the stream does not begin with META ("*" first) at byte offset 16" ]]
	# META twice
	{ head -c "$meta_end" m.fr; tail -c +17 m.fr; } > twometa.fr
	run -3 --separate-stderr "$OVL_CONSTRUCT" p.plan < twometa.fr
	[ "$stderr" = "ovl-construct: 'standard input': a second META at byte offset $meta_end" ]
}

@test "a seq-len other than the one the stream was mixed for: exit 2 at the META, nothing written" {
	[ -x "$OVL_SOURCE" ] && [ -x "$OVL_MIX" ] || skip "ovl-source or ovl-mix not built"
	cd "$BATS_TEST_TMPDIR"
	printf 'source web path=%s/web/web-0.jsonl\nseq-len 256\nranks 2\n' \
	    "$SAMPLES" > p.plan
	"$OVL_SOURCE" web "$SAMPLES"/web/web-0.jsonl > web.f
	"$OVL_MIX" p.plan web=web.f > mix.f
	run -0 "$OVL_MIX" --json p.plan web=web.f
	[[ "${lines[0]}" == *'seq-len 256\n'* ]]
	run -2 "$OVL_CONSTRUCT" --seq-len 128 --output out.f p.plan < mix.f
	[[ "$output" == *"seq-len 128, but the stream was mixed for seq-len 256"* ]]
	[ -e out.f ] && [ ! -s out.f ]
	run -2 "$OVL_CONSTRUCT" --seq-len 128 --ranks 2 --output out2.f < mix.f
	[ -e out2.f ] && [ ! -s out2.f ]
	printf 'step-tokens 2048\n' >> p.plan
	"$OVL_MIX" p.plan web=web.f > mix2.f
	run -2 "$OVL_CONSTRUCT" --step-tokens 1024 --output out3.f p.plan < mix2.f
	[[ "$output" == *"step-tokens 1024, but the stream was mixed for step-tokens 2048"* ]]
	[ -e out3.f ] && [ ! -s out3.f ]
	run -0 "$OVL_CONSTRUCT" --output out3.f p.plan < mix2.f
	[ -s out3.f ]
	run -0 "$OVL_CONSTRUCT" --seq-len 256 --output out4.f p.plan < mix.f
	[ -s out4.f ]
}
