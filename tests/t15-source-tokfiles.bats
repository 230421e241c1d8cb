#!/usr/bin/env bats
# Pre-tokenized sources: Megatron indexed datasets (.bin/.idx, a document
# the entries of its document_indices) and numpy token arrays (.npy; documents ended by the
# end-of-document token, bounded by PATH.offsets.npy, or the whole file).
# The files are written here with numpy from the sample text's byte ids,
# so each must give exactly the documents ovl-source reads from the text.
# Resume and partitions are in t11 and t12.

load test_helper

setup() {
	local py
	py=$(ovl_python_numpy) || skip "no python3 with numpy (scripts/bootstrap installs it)"
	D=$BATS_TEST_TMPDIR
	# the token files, and the documents of the text they hold
	"$py" "$OVL_SRCDIR/tests/helper/tokfiles.py" "$D" \
		"$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-1.jsonl"
	docs_of "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-1.jsonl" > "$D/want"
	[ "$(wc -l < "$D/want")" -eq 205 ]
}

# docs_of ARGS...: the documents ovl-source reads (source, tokens, no file
# name or cursor, which differ by format)
docs_of() {
	"$OVL_SOURCE" --json t "$@" | sed -e 's/"cursor":"[^"]*",//' -e 's/"off":[0-9]*,//' \
		-e 's/,"file":"[^"]*"//' -e 's/"pos":\[0,[0-9]*,[0-9]*\],//'
}

@test "npy: documents ended by the end-of-document token, in uint16 and int32" {
	docs_of "$D/eod16.npy" "$D/eod16b.npy" | cmp - "$D/want"
	docs_of "$D/eod32.npy" "$D/eod32b.npy" | cmp - "$D/want"
}

@test "npy: documents bounded by an offsets array; the whole file as one document" {
	docs_of --doc-per offsets "$D/off.npy" "$D/offb.npy" | cmp - "$D/want"
	run -0 "$OVL_SOURCE" --json --doc-per file t "$D/off.npy"
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *'"ntokens":'"$(stat -c %s "$D/off.npy.len")"','* ]]
}

@test "megatron: one document per entry, any integer dtype, named by .bin or .idx" {
	docs_of "$D/mega16.bin" "$D/mega16b.idx" | cmp - "$D/want"
	docs_of --format megatron "$D/mega64.bin" "$D/mega64b.bin" | cmp - "$D/want"
}

@test "megatron: ovl-ckpt's own Megatron output is a source, one document per packed sequence" {
	local d=$BATS_TEST_TMPDIR
	cat > "$d/p.plan" <<EOF2
source web path=$SAMPLES/web/web-0.jsonl
ranks 2
seq-len 512
output format=megatron path=$d/out/packed
EOF2
	mkdir -p "$d/out"
	run -0 "$OVL_RUN" -q -c "$d/ckpt" "$d/p.plan"
	run -0 "$OVL_CKPT" summary --json "$d/ckpt"
	local seqs
	seqs=$(sed 's/.*"sequences":\([0-9]*\).*/\1/' <<< "$output")
	run -0 "$OVL_SOURCE" --json t "$d/out/packed.bin"
	[ "${#lines[@]}" -eq "$seqs" ]
}

@test "token files: ids beyond the vocabulary, damaged files and wrong shapes are errors naming the file and document" {
	run -1 "$OVL_SOURCE" t "$D/big.npy"
	[[ "$output" == *"big.npy': document 1: token 3 is 300: not an id of bytes (vocabulary 257)"* ]]
	run -0 "$OVL_SOURCE" --json --on-error skip t "$D/big.npy"
	[[ "$output" == *"skipped 1 bad record (1 tokenizer error)"* ]]
	# the same ids are fine for a tokenizer with a larger vocabulary
	run -0 "$OVL_SOURCE" --json --tokenizer "hf:$SAMPLES/tokenizers/sample-tokenizer.json" t "$D/big.npy"
	run -1 "$OVL_SOURCE" t "$D/twod.npy"
	[[ "$output" == *"twod.npy': shape in "*" is not one-dimensional"* ]]
	run -1 "$OVL_SOURCE" t "$D/float.npy"
	[[ "$output" == *"float.npy': dtype in "*" is not a little-endian integer"* ]]
	run -1 "$OVL_SOURCE" --doc-per offsets t "$D/eod16.npy"
	[[ "$output" == *"cannot open '$D/eod16.offsets.npy'"* ]]
	run -1 "$OVL_SOURCE" --doc-per offsets t "$D/badoff.npy"
	[[ "$output" == *"badoff.offsets.npy' does not run from 0 to the "* ]]
	run -1 "$OVL_SOURCE" t "$D/cut.bin"
	[[ "$output" == *"cut.bin' (+"* || "$output" == *"cut.bin': entry "*" does not fit the .bin"* ]]
	run -1 "$OVL_SOURCE" t "$D/notidx.bin"
	[[ "$output" == *"notidx.idx': not a Megatron index"* ]]
	run -2 "$OVL_SOURCE" --doc-per eod t "$SAMPLES/web/web-0.jsonl"
	[[ "$output" == *"--doc-per eod is for npy token files"* ]]
	run -2 "$OVL_SOURCE" --doc-per blank-line t "$D/eod16.npy"
	[[ "$output" == *"npy: --doc-per eod, offsets or file"* ]]
}

@test "npy: every integer dtype, ends on and off 64-id blocks, a last document without its end, negative ids refused" {
	local py dt
	py=$(ovl_python_numpy)
	# documents of lengths 1..200 (ends at every place of a block), then
	# a tail without the end-of-document token; want: ntokens per document
	"$py" - "$D" <<-'PY'
	import numpy as np, sys
	d = sys.argv[1]
	rng = np.random.default_rng(15)
	ids, want = [], []
	for n in list(range(1, 131)) + list(rng.integers(1, 300, 70)):
	    ids += list(rng.integers(0, 256, n)) + [256]
	    want.append(n + 1)
	ids += [7, 8, 9]
	want.append(4)		# its end appended
	for dt in ("i2", "u2", "i4", "u4", "i8", "u8"):
	    np.save("%s/all-%s.npy" % (d, dt), np.array(ids, dtype="<" + dt))
	open(d + "/all.want", "w").write("".join("%d\n" % w for w in want))
	neg = np.array([1, 2, 256, 3, -5, 4, 256], dtype="<i2")
	np.save(d + "/neg.npy", neg)
	np.save(d + "/huge.npy", np.array([1, 2**63 + 5, 256], dtype="<u8"))
	PY
	for dt in i2 u2 i4 u4 i8 u8; do
		"$OVL_SOURCE" --json t "$D/all-$dt.npy" |
		    sed 's/.*"ntokens":\([0-9]*\).*/\1/' | cmp - "$D/all.want"
	done
	run -1 "$OVL_SOURCE" t "$D/neg.npy"
	[[ "$output" == *"neg.npy': document 1: token 1 is -5: not an id of bytes (vocabulary 257)"* ]]
	# an unsigned id of 2^63 and above is said as it is, not as -1
	run -1 "$OVL_SOURCE" t "$D/huge.npy"
	[[ "$output" == *"huge.npy': document 0: token 1 is 9223372036854775813: not an id of bytes (vocabulary 257)"* ]]
}

@test "npy: a token file that shrinks under the run is an error naming it (exit 1), not a SIGBUS" {
	local py pid
	py=$(ovl_python_numpy)
	# 8 M uint16 ids, documents of 1000 ids: far more output than a pipe holds
	"$py" -c 'import numpy as np, sys
a = (np.arange(8 << 20) % 256).astype(np.uint16)
a[999::1000] = 256
np.save(sys.argv[1], a)' "$D/shrink.npy"
	mkfifo "$D/out"
	"$OVL_SOURCE" t "$D/shrink.npy" > "$D/out" 2> "$D/err" 3>&- &
	pid=$!
	exec 4< "$D/out"
	# documents flow, so the file is mapped; the source waits on the pipe
	head -c 300000 <&4 > /dev/null
	truncate -s 4096 "$D/shrink.npy"
	cat <&4 > /dev/null
	exec 4<&-
	run -1 wait "$pid"
	grep -q "ovl-source: '$D/shrink.npy' shrank below its 16777344 bytes while being read" "$D/err"
}

@test "megatron: a document is the entries its document_indices give it (--split-sentences)" {
	local py
	py=$(ovl_python_numpy)
	# 2 documents of 2 sentences each, the end token after each document's
	# last sentence (Megatron's preprocess_data --split-sentences
	# --append-eod), then the same index with its last document index
	# short of the entries
	"$py" - "$D" <<'PY'
import numpy as np, sys
d = sys.argv[1]
sents = [[104, 105], [32, 116, 104, 101, 256], [120, 121, 122], [33, 256]]
docs = [0, 2, 4]
def write(name, di):
    arrs = [np.array(s, dtype=np.uint16) for s in sents]
    sizes = np.array([len(a) for a in arrs], dtype=np.int32)
    ptrs = np.zeros(len(arrs), dtype=np.int64)
    ptrs[1:] = np.cumsum(sizes[:-1].astype(np.int64) * 2)
    with open("%s/%s.bin" % (d, name), "wb") as f:
        for a in arrs:
            f.write(a.tobytes())
    with open("%s/%s.idx" % (d, name), "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(np.array([1], dtype=np.uint64).tobytes())
        f.write(np.array([8], dtype=np.uint8).tobytes())
        f.write(np.array([len(arrs)], dtype=np.uint64).tobytes())
        f.write(np.array([len(di)], dtype=np.uint64).tobytes())
        f.write(sizes.tobytes())
        f.write(ptrs.tobytes())
        f.write(np.array(di, dtype=np.int64).tobytes())
write("sent", docs)
write("short", [0, 2, 3])
PY
	run -0 --separate-stderr "$OVL_SOURCE" --json t "$D/sent.bin"
	[ "${#lines[@]}" -eq 2 ]
	[[ "${lines[0]}" == *'"pos":[0,0,0],'*'"tokens":[104,105,32,116,104,101,256],'* ]]
	[[ "${lines[1]}" == *'"pos":[0,0,1],'*'"tokens":[120,121,122,33,256],'* ]]
	# resumed after the first document: the second, whole
	run -0 --separate-stderr "$OVL_SOURCE" --json --resume 0:0:1:1 t "$D/sent.idx"
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" == *'"tokens":[120,121,122,33,256],'* ]]
	run -1 --separate-stderr "$OVL_SOURCE" --json t "$D/short.bin"
	[[ "$stderr" == *"short.idx': document index 2 is 3: not from 0 up to its 4 entries"* ]]
}
