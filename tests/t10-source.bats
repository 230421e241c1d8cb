#!/usr/bin/env bats
# ovl-source: formats, frames, options, the command-line contract.

load test_helper

# framedump FILE: one line per frame: KIND and its fields (ovl-test-tool dump)
framedump() {
	"$OVL_TEST_TOOL" dump "$1"
}

@test "version, usage errors exit 2 with the synopsis on stderr" {
	run -0 "$OVL_SOURCE" --version
	[[ "$output" =~ ^ovl-source\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
	run -2 "$OVL_SOURCE"
	[[ "$output" == *"usage: ovl-source [options] NAME PATH..."* ]]
	run -2 "$OVL_SOURCE" --partition 2/2 web "$SAMPLES/web/web-0.jsonl"
	run -2 "$OVL_SOURCE" --format xml web "$SAMPLES/web/web-0.jsonl"
	run -2 "$OVL_SOURCE" --bogus web "$SAMPLES/web/web-0.jsonl"
	run -2 "$OVL_SOURCE" --match '(' --json web "$SAMPLES/web/web-0.jsonl"
	[[ "$output" == *"bad --match pattern"* ]]
	run -2 "$OVL_SOURCE" --resume 1:2:3 --json web "$SAMPLES/web/web-0.jsonl"
	run -2 "$OVL_SOURCE" --tokenizer nonesuch --json web "$SAMPLES/web/web-0.jsonl"
	run -2 "$OVL_SOURCE" --json web "$SAMPLES/README-nonexistent.xyz"
	[[ "$output" == *"cannot guess the format"* ]]
}

@test "binary frames are refused on a terminal" {
	command -v script >/dev/null || skip "script(1) not installed"
	run -0 script -qec "'$OVL_SOURCE' web '$SAMPLES/web/web-0.jsonl'; echo rc=\$?" /dev/null
	[[ "$output" == *"refusing to write binary frames"* ]]
	[[ "$output" == *"rc=2"* ]]
}

@test "jsonl: every document's bytes tokens equal the field, eod appended, META first, END last" {
	"$OVL_SOURCE" --text web "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-2.jsonl.zst" \
	    > "$BATS_TEST_TMPDIR/f"
	framedump "$BATS_TEST_TMPDIR/f" > "$BATS_TEST_TMPDIR/d"
	run -0 head -n 1 "$BATS_TEST_TMPDIR/d"
	# each file's identity: its size, then mtime and inode (lib/chunk.h)
	[[ $output == "META tokenizer bytes|vocab 257|eod 256|source 0 web|source.web.chunks 2|source.web.partition 0/1|source.web.chunk.0 0 - $SAMPLES/web/web-0.jsonl|source.web.chunk.1 0 - $SAMPLES/web/web-2.jsonl.zst|source.web.file.0 $(stat -c %s "$SAMPLES/web/web-0.jsonl") m."*".i."*" $SAMPLES/web/web-0.jsonl|source.web.file.1 $(stat -c %s "$SAMPLES/web/web-2.jsonl.zst") m."*".i."*" $SAMPLES/web/web-2.jsonl.zst|" ]]
	run -0 tail -n 1 "$BATS_TEST_TMPDIR/d"
	[ "$output" = "END frames=$(( $(wc -l < "$BATS_TEST_TMPDIR/d") - 1 ))" ]
	run -0 grep -c '^DOC' "$BATS_TEST_TMPDIR/d"
	[ "$output" -eq 230 ]
	run -0 grep -c '^CHUNK_END' "$BATS_TEST_TMPDIR/d"
	[ "$output" -eq 2 ]
	# The field's value, byte for byte, as Python's json module reads it.
	"$OVL_SOURCE" --json --text web "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-2.jsonl.zst" \
	    > "$BATS_TEST_TMPDIR/j"
	run -0 python3 -c '
import json, subprocess, sys
docs = [json.loads(l) for l in open(sys.argv[1])]
src = [json.loads(l)["text"] for l in open(sys.argv[2])]
src += [json.loads(l)["text"] for l in subprocess.run(["zstd", "-dc", sys.argv[3]],
        capture_output=True, check=True).stdout.decode().splitlines()]
assert [d["text"] for d in docs] == src
for d in docs:
    assert d["tokens"][-1] == 256 and bytes(d["tokens"][:-1]).decode() == d["text"]
    assert d["ntokens"] == len(d["tokens"])
print(len(docs))' "$BATS_TEST_TMPDIR/j" "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-2.jsonl.zst"
	[ "$output" = 230 ]
}

@test "jsonl: nested --field meta.title, and the jansson parser gives the same stream" {
	"$OVL_SOURCE" --field meta.title web "$SAMPLES/web/web-1.jsonl" > "$BATS_TEST_TMPDIR/fast"
	"$OVL_SOURCE" --field meta.title --json-parser jansson web "$SAMPLES/web/web-1.jsonl" \
	    > "$BATS_TEST_TMPDIR/jansson"
	cmp "$BATS_TEST_TMPDIR/fast" "$BATS_TEST_TMPDIR/jansson"
	"$OVL_SOURCE" --json --text --field meta.title web "$SAMPLES/web/web-1.jsonl" > "$BATS_TEST_TMPDIR/j"
	run -0 python3 -c '
import json, sys
a = [json.loads(l)["text"] for l in open(sys.argv[1])]
b = [json.loads(l)["meta"]["title"] for l in open(sys.argv[2])]
assert a == b and len(a) == 95, (len(a), len(b))' "$BATS_TEST_TMPDIR/j" "$SAMPLES/web/web-1.jsonl"
	"$OVL_SOURCE" web "$SAMPLES/web/web-2.jsonl.zst" > "$BATS_TEST_TMPDIR/fast2"
	"$OVL_SOURCE" --json-parser jansson web "$SAMPLES/web/web-2.jsonl.zst" > "$BATS_TEST_TMPDIR/jansson2"
	cmp "$BATS_TEST_TMPDIR/fast2" "$BATS_TEST_TMPDIR/jansson2"
}

@test "text: one document per line (gzip), per blank-line paragraph, per file" {
	"$OVL_SOURCE" --json --text lines "$SAMPLES/lines.txt.gz" > "$BATS_TEST_TMPDIR/l"
	run -0 python3 -c '
import gzip, json, sys
want = [l for l in gzip.open(sys.argv[2]).read().decode().split("\n") if l.strip()]
got = [json.loads(l)["text"] for l in open(sys.argv[1])]
assert got == want, (len(got), len(want))
print(len(got))' "$BATS_TEST_TMPDIR/l" "$SAMPLES/lines.txt.gz"
	[ "$output" = 300 ]
	"$OVL_SOURCE" --json --text --doc-per file books "$SAMPLES"/books/*.txt > "$BATS_TEST_TMPDIR/b"
	run -0 python3 -c '
import glob, json, sys
want = [open(f).read() for f in sorted(glob.glob(sys.argv[2] + "/books/*.txt"))]
got = [json.loads(l)["text"] for l in open(sys.argv[1])]
assert got == want
assert max(len(t) for t in got) > 40000
print(len(got))' "$BATS_TEST_TMPDIR/b" "$SAMPLES"
	[ "$output" = 8 ]
	"$OVL_SOURCE" --json --text --doc-per blank-line books "$SAMPLES"/books/book-05.txt > "$BATS_TEST_TMPDIR/p"
	run -0 python3 -c '
import json, re, sys
text = open(sys.argv[2]).read()
want = [p.strip("\n") for p in re.split(r"\n[ \t\r]*\n", text) if p.strip()]
got = [json.loads(l)["text"] for l in open(sys.argv[1])]
assert got == want, (got[:2], want[:2])
print(len(got))' "$BATS_TEST_TMPDIR/p" "$SAMPLES/books/book-05.txt"
	[ "$output" -gt 10 ]
}

@test "tar: --member-ext picks members, one document each; wds: groups by key and counts images" {
	"$OVL_SOURCE" --json --text --member-ext .c code "$SAMPLES/code/code.tar.zst" > "$BATS_TEST_TMPDIR/c"
	run -0 python3 -c '
import io, json, subprocess, sys, tarfile
raw = subprocess.run(["zstd", "-dc", sys.argv[2]], capture_output=True, check=True).stdout
t = tarfile.open(fileobj=io.BytesIO(raw))
want = [t.extractfile(m).read().decode() for m in t.getmembers() if m.name.endswith(".c")]
got = [json.loads(l) for l in open(sys.argv[1])]
assert [g["text"] for g in got] == want
# the cursor offset of a tar document is the index of the next member group
idx = [i for i, m in enumerate(t.getmembers()) if m.name.endswith(".c")]
assert [int(g["cursor"].split(":")[2]) for g in got] == [i + 1 for i in idx]
print(len(got))' "$BATS_TEST_TMPDIR/c" "$SAMPLES/code/code.tar.zst"
	[ "$output" = 10 ]
	"$OVL_SOURCE" --json --member-ext .c --member-ext .h code "$SAMPLES/code/code.tar.zst" > "$BATS_TEST_TMPDIR/ch"
	run -0 wc -l < "$BATS_TEST_TMPDIR/ch"
	[ "$output" -eq 20 ]
	"$OVL_SOURCE" --format wds --text wds "$SAMPLES"/wds/shard-*.tar > "$BATS_TEST_TMPDIR/w"
	framedump "$BATS_TEST_TMPDIR/w" > "$BATS_TEST_TMPDIR/wd"
	run -0 grep -c '^DOC' "$BATS_TEST_TMPDIR/wd"
	[ "$output" -eq 44 ]
	# every fourth sample has a second image (KEY.1.png)
	run -0 grep -c 'nimages=2 ' "$BATS_TEST_TMPDIR/wd"
	[ "$output" -eq 11 ]
	run -0 grep -c 'nimages=1 ' "$BATS_TEST_TMPDIR/wd"
	[ "$output" -eq 33 ]
	run -0 grep -m1 '^DOC' "$BATS_TEST_TMPDIR/wd"
	[[ "$output" == *"cursor=0:0:1:1 start=0 "* ]]
}

@test "--id, --eod-token, --text flags and the DOC fields" {
	"$OVL_SOURCE" --id 7 --eod-token 0 --text lines "$SAMPLES/lines.txt.gz" > "$BATS_TEST_TMPDIR/f"
	framedump "$BATS_TEST_TMPDIR/f" > "$BATS_TEST_TMPDIR/d"
	run -0 grep -c '^DOC src=7 flags=1 pos=0:0:[0-9]* nchunks=1 .* eod=0 ' "$BATS_TEST_TMPDIR/d"
	[ "$output" -eq 300 ]
	run -0 grep -m1 '^META' "$BATS_TEST_TMPDIR/d"
	[[ "$output" == *"eod 0|source 7 lines|"* ]]
	"$OVL_SOURCE" lines "$SAMPLES/lines.txt.gz" > "$BATS_TEST_TMPDIR/n"
	framedump "$BATS_TEST_TMPDIR/n" > "$BATS_TEST_TMPDIR/nd"
	run -0 grep -c "^DOC src=0 flags=0 .*text=''" "$BATS_TEST_TMPDIR/nd"
	[ "$output" -eq 300 ]
}

@test "filters: --min-tokens, --max-tokens, --match, --drop" {
	"$OVL_SOURCE" --json --text lines "$SAMPLES/lines.txt.gz" > "$BATS_TEST_TMPDIR/all"
	"$OVL_SOURCE" --json --text --min-tokens 100 --max-tokens 400 lines "$SAMPLES/lines.txt.gz" \
	    > "$BATS_TEST_TMPDIR/len"
	"$OVL_SOURCE" --json --text --match '[Ωα-ω]' lines "$SAMPLES/lines.txt.gz" > "$BATS_TEST_TMPDIR/m"
	"$OVL_SOURCE" --json --text --drop '^[A-Z]' lines "$SAMPLES/lines.txt.gz" > "$BATS_TEST_TMPDIR/d"
	run -0 python3 -c '
import json, re, sys
all_ = [json.loads(l) for l in open(sys.argv[1])]
ln = [json.loads(l) for l in open(sys.argv[2])]
m = [json.loads(l) for l in open(sys.argv[3])]
d = [json.loads(l) for l in open(sys.argv[4])]
assert ln == [x for x in all_ if 100 <= x["ntokens"] - 1 <= 400] and ln
assert m == [x for x in all_ if re.search("[Ωα-ω]", x["text"])] and m
assert d == [x for x in all_ if not re.match("[A-Z]", x["text"])] and d
print(len(ln), len(m), len(d))' "$BATS_TEST_TMPDIR/all" "$BATS_TEST_TMPDIR/len" \
	    "$BATS_TEST_TMPDIR/m" "$BATS_TEST_TMPDIR/d"
}

@test "-v reports documents, tokens, bytes and MB/s per chunk on stderr; stdout has data only" {
	run -0 --separate-stderr "$OVL_SOURCE" -v --json web "$SAMPLES"/web/web-[01].jsonl
	[[ "$stderr" == *"web: chunk 0:0 '$SAMPLES/web/web-0.jsonl': 110 docs, "*" tokens, 145834 bytes, "*" MB/s"* ]]
	[[ "$stderr" == *"web: chunk 0:1 "* ]]
	[ "${#lines[@]}" -eq 205 ]
	run -0 --separate-stderr "$OVL_SOURCE" -q --json web "$SAMPLES/web/web-0.jsonl"
	[ -z "$stderr" ]
}

@test "epochs and --repeat: the source starts over, epoch by epoch" {
	"$OVL_SOURCE" --json --epochs 3 lines "$SAMPLES/lines.txt.gz" > "$BATS_TEST_TMPDIR/e"
	run -0 wc -l < "$BATS_TEST_TMPDIR/e"
	[ "$output" -eq 900 ]
	run -0 grep -c '"pos":\[2,0,' "$BATS_TEST_TMPDIR/e"
	[ "$output" -eq 300 ]
	# --repeat never ends by itself; a reader that stops early ends it quietly (SIGPIPE).
	run -0 bash -c '"$1" --repeat --json lines "$2" | head -n 1000 | wc -l' _ "$OVL_SOURCE" "$SAMPLES/lines.txt.gz"
	[ "$output" -eq 1000 ]
	run -0 bash -c '"$1" --repeat lines "$2" | head -c 100000 | wc -c; echo "${PIPESTATUS[0]}"' _ \
	    "$OVL_SOURCE" "$SAMPLES/lines.txt.gz"
	[ "${lines[0]}" -eq 100000 ]
	[ "${lines[1]}" -eq 141 ]
}

@test "a full disk is an error with status 1" {
	run -1 bash -c '"$1" web "$2" > /dev/full' _ "$OVL_SOURCE" "$SAMPLES/web/web-0.jsonl"
	[[ "$output" == *"write error"* ]]
}

@test "--throttle limits the rate (docs per second)" {
	start=$(date +%s%N)
	"$OVL_SOURCE" --json --throttle 100docs lines "$SAMPLES/lines.txt.gz" > "$BATS_TEST_TMPDIR/t"
	end=$(date +%s%N)
	run -0 wc -l < "$BATS_TEST_TMPDIR/t"
	[ "$output" -eq 300 ]
	# 300 documents at 100/s take at least 2.9 s
	[ $(( (end - start) / 1000000 )) -ge 2900 ]
}

@test "scripts/sample-job reads every sample source and prints a summary" {
	run -0 --separate-stderr "$OVL_SRCDIR/scripts/sample-job" "$OVL_BUILDDIR" \
	    "$BATS_TEST_TMPDIR/job"
	[ "${lines[0]}" = "source   documents     tokens      bytes" ]
	[[ "${lines[1]}" =~ ^web\ +325\ +[0-9]+\ +474012$ ]]
	[[ "${lines[5]}" =~ ^lines\ +300\ +49523\ +49523$ ]]
	# then ovl-run packs the sample plan into a Megatron dataset
	[[ "$output" == *"ovl-run samples/plans/bpe.plan"* ]]
	# it ends with the summary, and says where the report is
	[[ "$stderr" == *"run in $BATS_TEST_TMPDIR/job/ckpt: complete"* ]]
	[[ "$stderr" == *"  source "*" share "*" planned"* ]]
	[[ "$output" == *"open $BATS_TEST_TMPDIR/job/report.html in a browser"* ]]
	grep -q 'id="curriculum"' "$BATS_TEST_TMPDIR/job/report.html"
	grep -q '"complete":true' "$BATS_TEST_TMPDIR/job/summary.json"
	[ -s "$BATS_TEST_TMPDIR/job/out/packed.bin" ]
	[ -s "$BATS_TEST_TMPDIR/job/out/packed.idx" ]
	run -0 "$OVL_CKPT" verify "$BATS_TEST_TMPDIR/job/ckpt" \
	    "$BATS_TEST_TMPDIR/job/out/packed.bin"
	run -2 "$OVL_SRCDIR/scripts/sample-job"
}
