#!/usr/bin/env bats
# Image-text samples (issue 16, first part): WebDataset shards made here
# with Pillow (PNG, JPEG and WebP of many sizes and kinds); ovl-source
# reads each image's size from its header (src/lib/image.c) and places it
# before the caption as a run of the placeholder token, as long as the cost
# model says: fixed:N, patch:P (ViT patches) or dynamic:P:M:MIN:MAX
# (Qwen2-VL's dynamic resolution). tests/helper/images.py writes the
# shards and computes the expected counts from the sizes Pillow reads back.

load test_helper

setup_file() {
	/usr/bin/python3 -c 'import PIL' 2> /dev/null ||
	    skip "python3-pil is not installed (scripts/bootstrap installs it)"
	cd "$BATS_FILE_TMPDIR"
	/usr/bin/python3 "$OVL_SRCDIR/tests/helper/images.py" shard s.tar 80 5 > s.jsonl
	/usr/bin/python3 "$OVL_SRCDIR/tests/helper/images.py" shard c.tar 12 9 6 > c.jsonl
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	/usr/bin/python3 -c 'import PIL' 2> /dev/null || skip "python3-pil is not installed"
	cp "$BATS_FILE_TMPDIR"/s.* "$BATS_FILE_TMPDIR"/c.* .
}

# check SPEC: every document is [its images' placeholders] + caption + eod,
# the placeholder count the model's for the sizes Pillow reads
check() {
	run -0 "$OVL_SOURCE" --format wds --image-cost "$1" --image-token 0 --json x s.tar
	printf '%s\n' "$output" > got.jsonl
	/usr/bin/python3 "$OVL_SRCDIR/tests/helper/images.py" expect "$1" < s.jsonl > want.jsonl
	/usr/bin/python3 - <<-'PY'
	import json
	want = [json.loads(l) for l in open("want.jsonl")]
	samples = [json.loads(l) for l in open("s.jsonl")]
	got = [json.loads(l) for l in open("got.jsonl")]
	assert len(got) == len(samples), (len(got), len(samples))
	single = 0
	for w, s, g in zip(want, samples, got):
	    t = g["tokens"]
	    n = sum(w)
	    assert g["nimages"] == len(w), (s["key"], g["nimages"], w)
	    assert t[:n] == [0] * n, (s["key"], w)
	    assert t[n:-1] == list(s["text"].encode()), s["key"]
	    assert t[-1] == 256
	    single += len(w) == 1
	assert single >= 10, single
	PY
}

@test "images: every format's size from its header, the fixed model" {
	check fixed:64
}

@test "images: ViT patches, ceil(h/p) * ceil(w/p)" {
	check patch:14
	check patch:32
}

@test "images: dynamic resolution (Qwen2-VL's defaults and a small budget)" {
	check dynamic:14:2:3136:1003520
	check dynamic:16:2:50000:200000
}

@test "images: the META says the placeholder and the model; the frames hold the JSON's tokens" {
	run -0 "$OVL_SOURCE" --format wds --image-cost patch:14 --image-token 0 x s.tar
	"$OVL_SOURCE" --format wds --image-cost patch:14 --image-token 0 x s.tar > s.fr
	"$OVL_TEST_TOOL" dump s.fr > dump
	grep -q "source.x.image-token 0" dump || "$OVL_TEST_TOOL" dump s.fr | head -5
	grep -q "source.x.image-cost patch:14" dump
	# resumed after every tenth document: the rest of the run, the same
	"$OVL_SOURCE" --format wds --image-cost patch:14 --image-token 0 --json x s.tar > all.jsonl
	for k in 10 40 70; do
		cur=$(sed -n "${k}p" all.jsonl | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["cursor"])')
		run -0 "$OVL_SOURCE" --format wds --image-cost patch:14 --image-token 0 --json --resume "$cur" x s.tar
		printf '%s\n' "$output" > tail.jsonl
		cmp tail.jsonl <(tail -n +$((k + 1)) all.jsonl)
	done
}

@test "images: a damaged image fails naming the member (1), or its sample is skipped and counted" {
	run -1 "$OVL_SOURCE" --format wds --image-cost fixed:4 --image-token 0 x c.tar
	[[ "$output" == *"'c.tar': member 's00006.0."*"' (group 6): "* ]]
	run -0 --separate-stderr "$OVL_SOURCE" --on-error skip --format wds --image-cost fixed:4 \
	    --image-token 0 --json x c.tar
	[ "${#lines[@]}" -eq 11 ]
	! grep -q '"off":6,' <<< "$output" || false
	grep -q '"off":7,' <<< "$output"
	[[ "$stderr" == *"skipped 1 bad record (1 bad image)"* ]]
	# a header that claims 2^24 x 2^24 pixels: refused before its run of
	# 2^48 tokens is made (the count saturates at 2^32 - 1)
	/usr/bin/python3 - <<-'PY'
	import struct, zlib
	ihdr = b"IHDR" + struct.pack(">IIBBBBB", 1 << 24, 1 << 24, 8, 2, 0, 0, 0)
	png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
	open("h.0.png", "wb").write(png)
	open("h.txt", "w").write("huge")
	PY
	tar --format=ustar -cf huge.tar h.0.png h.txt
	run -1 "$OVL_SOURCE" --format wds --image-cost patch:1 --image-token 0 x huge.tar
	[[ "$output" == *"image 'h.0.png' (16777216x16777216) costs at least 4294967295 tokens, more than a sequence holds (16777216)"* ]]
}

@test "images: usage errors (exit 2) in ovl-source and in the plan" {
	run -2 "$OVL_SOURCE" --format wds --image-cost patch:14 x s.tar
	[[ "$output" == *"--image-cost and --image-token go together"* ]]
	run -2 "$OVL_SOURCE" --format wds --image-cost patch:0 --image-token 0 x s.tar
	[[ "$output" == *"bad image cost 'patch:0'"* ]]
	run -2 "$OVL_SOURCE" --format wds --image-cost dynamic:14:2:9:3 --image-token 0 x s.tar
	run -2 "$OVL_SOURCE" --format tar --image-cost fixed:1 --image-token 0 x s.tar
	[[ "$output" == *"--format wds"* ]]
	run -2 "$OVL_SOURCE" --format wds --image-cost fixed:1 --image-token 256 x s.tar
	[[ "$output" == *"end-of-document"* ]]
	run -2 "$OVL_SOURCE" --format wds --image-cost fixed:1 --image-token 257 x s.tar
	[[ "$output" == *"not below the vocabulary size 257"* ]]
	printf 'source v path=s.tar format=wds image-cost=fixed:1\n' > p.plan
	run -2 "$OVL_MIX" --check p.plan
	[[ "$output" == *"p.plan:1: "*"image-token= go together"* ]]
	printf 'source v path=s.tar format=wds image-cost=patch:x image-token=0\n' > p.plan
	run -2 "$OVL_MIX" --check p.plan
	[[ "$output" == *"p.plan:1: "*"bad image cost"* ]]
	printf 'source v path=s.tar format=wds image-cost=patch:14 image-token=0\n' > p.plan
	run -0 "$OVL_MIX" --check p.plan
	mapfile -d '' args < <("$OVL_MIX" --source-args v p.plan)
	[[ " ${args[*]} " == *" --image-cost patch:14 --image-token 0 "* ]]
}

@test "images: interleaved documents (a .json member's texts, each null the next image); every count in its place" {
	/usr/bin/python3 "$OVL_SRCDIR/tests/helper/images.py" interleaved i.tar 40 3 > i.jsonl
	run -0 "$OVL_SOURCE" --format wds --member-ext .json --field texts \
	    --image-cost patch:32 --image-token 0 --json x i.tar
	printf '%s\n' "$output" > got.jsonl
	/usr/bin/python3 "$OVL_SRCDIR/tests/helper/images.py" expect patch:32 < i.jsonl > want.jsonl
	/usr/bin/python3 - <<-'PY'
	import json
	want = [json.loads(l) for l in open("want.jsonl")]
	samples = [json.loads(l) for l in open("i.jsonl")]
	got = [json.loads(l) for l in open("got.jsonl")]
	assert len(got) == len(samples)
	for w, s, g in zip(want, samples, got):
	    t, out, k = g["tokens"], [], 0
	    for part in s["texts"]:
	        if part is None:
	            out += [0] * w[k]
	            k += 1
	        else:
	            out += list(part.encode())
	    assert t == out + [256], s["key"]
	PY
	# a null too many for the images: a bad record naming the member
	printf '{"texts": [null, "x", null]}' > k.json
	cp "$OVL_SRCDIR/tests/fuzz/seeds/image/seed.png" k.0.png
	tar --format=ustar -cf bad.tar k.0.png k.json
	run -1 "$OVL_SOURCE" --format wds --member-ext .json --field texts \
	    --image-cost patch:32 --image-token 0 x bad.tar
	[[ "$output" == *"member 'k.json' (group 0): field 'texts' has 2 image places (nulls) for 1 images"* ]]
}

@test "images: ovl-mix and ovl-construct never cut an image's run where a piece can hold it" {
	/usr/bin/python3 "$OVL_SRCDIR/tests/helper/images.py" interleaved i.tar 30 3 > i.jsonl
	printf 'source x path=i.tar format=wds member-ext=.json field=texts image-cost=patch:128 image-token=0\nseq-len 512\nranks 2\ncheckpoint every=2\n' > i.plan
	mapfile -d '' args < <("$OVL_MIX" --source-args x i.plan)
	"$OVL_SOURCE" "${args[@]}" > i.fr
	"$OVL_SOURCE" --json "${args[@]}" > src.jsonl
	"$OVL_MIX" i.plan x=i.fr | "$OVL_CONSTRUCT" --json i.plan > con.jsonl
	run -0 /usr/bin/python3 "$OVL_SRCDIR/tests/helper/image-runs.py" src.jsonl con.jsonl 512
	echo "# $output" >&3
	# killed and resumed through ovl-run: the bytes of an uncut run
	printf 'output format=npy path=out/p\n' >> i.plan
	"$OVL_RUN" -q -c ref-ck -o ref/p i.plan
	sed -i "s/^source x .*/& throttle=10K/" i.plan
	"$OVL_RUN" -q -c ck i.plan 2> run.err 3>&- &
	pid=$!
	wait_ckpt ck 2 || true
	# (the run was still going: the end is not recorded)
	"$OVL_CKPT" show --print0 ck | tr '\0' '\n' | grep -x -A1 ended | tail -n 1 | grep -qx 0
	kill -KILL "$pid"
	wait "$pid" || true
	run -0 "$OVL_RUN" -q --resume -c ck i.plan
	for f in tokens positions cu_seqlens seqs; do
		cmp "ref/p.$f.npy" "out/p.$f.npy"
	done
	run -0 "$OVL_CKPT" verify ck out/p.tokens.npy
}

@test "images: a header bomb (8 PNG headers of 57344x57344 under patch:14) is a bad record naming shard and member, skipped with --on-error skip" {
	# each image 4096^2 tokens, within a sequence's bound; together 8x that,
	# more than a document holds: refused before any run is allocated
	/usr/bin/python3 - <<-'PY'
	import struct, zlib
	def png(w, h):
	    ihdr = b"IHDR" + struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
	    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
	for k in range(8):
	    open("b.%d.png" % k, "wb").write(png(57344, 57344))
	open("b.txt", "w").write("bomb")
	open("c.0.png", "wb").write(png(28, 28))
	open("c.txt", "w").write("fine")
	PY
	tar --format=ustar -cf bomb.tar b.*.png b.txt c.0.png c.txt
	run -1 "$OVL_SOURCE" --format wds --image-cost patch:14 --image-token 0 x bomb.tar
	[[ "$output" == *"'bomb.tar': member 'b.txt' (group 0): its images cost 50331648 tokens by image 'b.2.png' (57344x57344, image 3 of 8), more than a document holds (--max-doc-bytes 33554432)"* ]]
	run -0 --separate-stderr "$OVL_SOURCE" --on-error skip --json --format wds \
	    --image-cost patch:14 --image-token 0 x bomb.tar
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" == *'"off":1,"nimages":1,"ntokens":9,'* ]]
	[[ "$stderr" == *"skipped 1 bad record (1 bad image)"* ]]
}
