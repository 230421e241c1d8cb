#!/usr/bin/env bats
# The sample BPE tokenizer (samples/tokenizers/sample.tiktoken, trained on
# the sample corpus by scripts/train-sample-bpe) and the sample plan that
# uses it (samples/plans/bpe.plan): the rank file is valid, loads and
# reproduces byte for byte; ids decode back to the documents; the plan
# runs end to end into uint16 outputs.

load test_helper

RANKS="$SAMPLES/tokenizers/sample.tiktoken"
SPEC="tiktoken:$RANKS:r50k"
PLAN="$SAMPLES/plans/bpe.plan"

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
}

# decode.py RANKFILE JSON...: each ovl-source --json --text document's ids
# (less the final eod 50256), decoded with the rank file, are its text.
decoder() {
	cat > decode.py <<'PY'
import base64, json, sys
tok = {}
for line in open(sys.argv[1], "rb"):
    b64, rank = line.split()
    tok[int(rank)] = base64.b64decode(b64)
ndocs = nbytes = ntok = 0
for path in sys.argv[2:]:
    for line in open(path, encoding="utf-8"):
        d = json.loads(line)
        ids = d["tokens"]
        assert ids[-1] == 50256, (path, d["pos"], "no eod at the end")
        ids = ids[:-1]
        assert all(i < len(tok) for i in ids), (path, d["pos"], max(ids))
        got = b"".join(tok[i] for i in ids)
        want = d["text"].encode("utf-8")
        assert got == want, (path, d["pos"], got[:80], want[:80])
        ndocs += 1
        nbytes += len(want)
        ntok += len(ids)
print(ndocs, nbytes, ntok)
PY
}

@test "sample.tiktoken: 256 bytes, then merges of earlier tokens, small" {
	[ "$(wc -c < "$RANKS")" -lt 60000 ]
	python3 - "$RANKS" <<'PY'
import base64, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
assert lines[-1] == b"", "no final newline"
tokens = []
for n, line in enumerate(lines[:-1]):
    b64, rank = line.split(b" ")
    assert int(rank) == n, (n, rank)
    tokens.append(base64.b64decode(b64, validate=True))
assert tokens[:256] == [bytes([i]) for i in range(256)]
assert len(set(tokens)) == len(tokens), "duplicate token"
assert 1000 <= len(tokens) - 256 <= 2000, len(tokens)
seen = set(tokens[:256])
for t in tokens[256:]:
    assert any(t[:k] in seen and t[k:] in seen for k in range(1, len(t))), t
    seen.add(t)
PY
}

@test "sample.tiktoken loads: META, ids below the ranks, fewer tokens than bytes" {
	nranks=$(wc -l < "$RANKS")
	"$OVL_SOURCE" --tokenizer "$SPEC" web "$SAMPLES/web/web-0.jsonl" > web.frames
	grep -a -q 'tokenizer tiktoken:r50k$' web.frames
	# r50k's <|endoftext|> keeps its id, 50256: the vocabulary counts it
	grep -a -q '^vocab 50257$' web.frames
	grep -a -q '^eod 50256$' web.frames
	"$OVL_SOURCE" --tokenizer "$SPEC" --json web "$SAMPLES/web/web-0.jsonl" > web.json
	python3 - "$nranks" web.json <<'PY'
import json, sys
n = int(sys.argv[1])
ids = [i for l in open(sys.argv[2]) for i in json.loads(l)["tokens"]]
body = [i for i in ids if i != 50256]
assert max(body) < n, max(body)
assert len(ids) - len(body) == 110, "one eod per document"
assert sum(i >= 256 for i in body) > len(body) // 2, "merges barely used"
assert len(set(body)) > 1000, len(set(body))
PY
}

@test "scripts/train-sample-bpe reproduces the committed rank file and tokenizer.json" {
	run -0 "$OVL_SRCDIR/scripts/train-sample-bpe" -o "$BATS_TEST_TMPDIR/again.tiktoken" \
		--hf "$BATS_TEST_TMPDIR/again.json"
	cmp "$RANKS" again.tiktoken
	cmp "$SAMPLES/tokenizers/sample-tokenizer.json" again.json
	# another -o writes no tokenizer.json unless asked
	run -0 "$OVL_SRCDIR/scripts/train-sample-bpe" -m 10 -o other.tiktoken
	cmp "$SAMPLES/tokenizers/sample-tokenizer.json" again.json
	[ ! -e other.json ]
	# fewer merges: the committed file's first ranks, the same merge order
	run -0 "$OVL_SRCDIR/scripts/train-sample-bpe" -m 100 -o small.tiktoken \
		"$SAMPLES"
	[ "$(wc -l < small.tiktoken)" -eq 356 ]
	head -n 356 "$RANKS" | cmp - small.tiktoken
	run -2 "$OVL_SRCDIR/scripts/train-sample-bpe" -m -1 -o x.tiktoken
	[ ! -e x.tiktoken ]
}

@test "sample BPE: ids decode back to every document of web, code and books" {
	decoder
	"$OVL_SOURCE" --tokenizer "$SPEC" --json --text web \
		"$SAMPLES"/web/web-*.jsonl* > web.json
	"$OVL_SOURCE" --tokenizer "$SPEC" --json --text --format tar \
		--member-ext .c --member-ext .h --member-ext .md code \
		"$SAMPLES/code/code.tar.zst" > code.json
	"$OVL_SOURCE" --tokenizer "$SPEC" --json --text --doc-per file books \
		"$SAMPLES"/books/*.txt > books.json
	run -0 python3 decode.py "$RANKS" web.json code.json books.json
	read -r ndocs nbytes ntok <<< "$output"
	[ "$ndocs" -gt 300 ]
	# a BPE trained on this text: well under half a token per byte
	[ $((ntok * 5)) -lt $((nbytes * 2)) ]
}

@test "bpe.plan: the tokenizer path is relative to the plan" {
	run -0 --separate-stderr "$OVL_MIX" --check "$PLAN"
	printf '%s\n' "$output" > check.out
	spec=$(sed -n 's/^tokenizer //p' check.out)
	[[ "$spec" == tiktoken:*:r50k ]]
	f=${spec#tiktoken:}
	f=${f%:r50k}
	cmp "$f" "$RANKS"
	# every source runs with it
	for s in web code books; do
		"$OVL_MIX" --source-args "$s" "$PLAN" | tr '\0' '\n' > "$s.args"
		grep -q -x -- "--tokenizer" "$s.args"
		grep -q -x -- "$spec" "$s.args"
	done
}

@test "bpe.plan runs end to end: by hand and by ovl-run, into uint16" {
	local IN=() src i n p args s
	# name, partitions, shadows, on-exhaust of each source
	mapfile -d '' src < <("$OVL_MIX" --list-sources "$PLAN")
	[ "${#src[@]}" -eq 12 ]
	for ((i = 0; i < ${#src[@]}; i += 4)); do
		n=${src[i + 1]}
		mapfile -d '' args < <("$OVL_MIX" --source-args "${src[i]}" "$PLAN")
		for ((p = 0; p < n; p++)); do
			mkfifo "${src[i]}.$p"
			"$OVL_SOURCE" -q --partition "$p/$n" "${args[@]}" \
				> "${src[i]}.$p" 3>&- &
			IN+=("${src[i]}=${src[i]}.$p")
		done
	done
	[ "${#IN[@]}" -eq 5 ]
	# web and code repeat: the plan's stop tokens=200K ends the mix
	"$OVL_MIX" -q "$PLAN" "${IN[@]}" > mix.frames
	wait
	"$OVL_CONSTRUCT" -q "$PLAN" < mix.frames > con.frames
	run -0 "$OVL_CKPT" -q --dir ck --format npy -o out/packed -m out/manifest \
		"$PLAN" < con.frames
	run -0 "$OVL_CKPT" -q --dir ck2 --format megatron -o out2/packed \
		-m out2/manifest "$PLAN" < con.frames
	# the last checkpoint (every 4 steps) records 16-bit tokens, vocab 50257
	run -0 "$OVL_CKPT" show --json ck
	[[ "$output" == *'"end":true'* ]]
	[[ "$output" == *'"token-bits":"16","vocab":"50257"'* ]]
	[[ "$output" =~ \"checkpoint\":([0-9]+) ]]
	[ "${BASH_REMATCH[1]}" -ge 20 ]
	# vocab 50257: uint16 in both formats (Megatron's dtype code 8)
	[ "$(od -A n -t u1 -j 17 -N 1 out2/packed.idx | tr -d ' ')" = 8 ]
	# ovl-run wires the same plan to the same bytes: a copy of the plan
	# beside links to the corpus, so its ../../run is in this directory
	mkdir -p s/plans
	for s in web code books tokenizers; do ln -s "$SAMPLES/$s" "s/$s"; done
	cp "$PLAN" s/plans/
	run -0 "$OVL_RUN" -q -d rundir s/plans/bpe.plan
	cmp run/bpe-out/packed.bin out2/packed.bin
	cmp run/bpe-out/packed.idx out2/packed.idx
	python3 - "$RANKS" out/packed <<'PY'
import ast, base64, struct, sys
tok = {}
for line in open(sys.argv[1], "rb"):
    b64, rank = line.split()
    tok[int(rank)] = base64.b64decode(b64)
def npy(path):
    data = open(path, "rb").read()
    assert data[:6] == b"\x93NUMPY"
    hl = struct.unpack("<H", data[8:10])[0]
    h = ast.literal_eval(data[10:10 + hl].decode())
    code = {"<u2": "H", "<i4": "i", "<i8": "q"}[h["descr"]]
    n = h["shape"][0] if len(h["shape"]) == 1 else h["shape"][0] * h["shape"][1]
    return h["descr"], struct.unpack("<%d%s" % (n, code), data[10 + hl:10 + hl + n * struct.calcsize(code)])
descr, ids = npy(sys.argv[2] + ".tokens.npy")
assert descr == "<u2", descr
_, cu = npy(sys.argv[2] + ".cu_seqlens.npy")
assert 150000 <= len(ids) <= 260000, len(ids)
# every piece decodes to text of the corpus (the sample documents are UTF-8
# pieces cut at token boundaries, so compare bytes)
import glob, io, json, os, subprocess, tarfile
top = os.path.dirname(os.path.dirname(sys.argv[1]))
corpus = []
for p in sorted(glob.glob(top + "/web/*.jsonl*")):
    raw = open(p, "rb").read()
    if p.endswith(".zst"):
        raw = subprocess.run(["zstd", "-dc", p], stdout=subprocess.PIPE, check=True).stdout
    corpus += [json.loads(l)["text"].encode() for l in raw.splitlines() if l.strip()]
for p in sorted(glob.glob(top + "/books/*.txt")):
    corpus.append(open(p, "rb").read())
raw = subprocess.run(["zstd", "-dc", top + "/code/code.tar.zst"], stdout=subprocess.PIPE, check=True).stdout
with tarfile.open(fileobj=io.BytesIO(raw)) as t:
    corpus += [t.extractfile(m).read() for m in t.getmembers() if m.isfile()]
blob = b"\0".join(corpus)
npieces = nmerged = 0
for a, b in zip(cu, cu[1:]):
    piece = list(ids[a:b])
    if all(i == 50256 for i in piece):
        continue	# padding
    if piece[-1] == 50256:
        piece.pop()
    assert all(i < len(tok) for i in piece), max(piece)
    text = b"".join(tok[i] for i in piece)
    assert text in blob, text[:80]
    npieces += 1
    nmerged += sum(i >= 256 for i in piece)
assert npieces > 100, npieces
assert nmerged > len(ids) // 2
PY
}
