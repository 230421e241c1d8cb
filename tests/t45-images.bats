#!/usr/bin/env bats
# Image payloads travel with the stream (issue 16): IMAGE frames
# (ovl-frame(5), minor 2) from ovl-source through ovl-mix and
# ovl-construct to ovl-ckpt's per-rank streams, inline or as references
# into the shards (images=ref); the bytes equal the shard members
# (tests/helper/image-payloads.py reads them with python/overlord and
# Python's tarfile); killed and resumed, the streams are the same bytes,
# images included, and the checkpoints hold none of them.

load test_helper

setup_file() {
	/usr/bin/python3 -c 'import PIL, numpy' 2> /dev/null ||
	    skip "python3-pil or numpy is not installed (scripts/bootstrap)"
	cd "$BATS_FILE_TMPDIR"
	/usr/bin/python3 "$OVL_SRCDIR/tests/helper/images.py" shard s.tar 60 11 > s.jsonl
	/usr/bin/python3 "$OVL_SRCDIR/tests/helper/images.py" interleaved i.tar 30 4 > i.jsonl
}

setup() {
	/usr/bin/python3 -c 'import PIL, numpy' 2> /dev/null || skip "python3-pil or numpy is not installed"
	cd "$BATS_TEST_TMPDIR"
	cp "$BATS_FILE_TMPDIR"/*.tar .
	export PYTHONPATH="$OVL_SRCDIR/python"
	export OVL_CRC_LIB="$OVL_BUILDDIR/python/libovlcrc.so"
	# captions, interleaved documents and text alone, in one mix
	{
		printf 'source cap path=s.tar format=wds image-cost=patch:32 image-token=0 on-exhaust=drop %s\n' "$1"
		printf 'source doc path=i.tar format=wds member-ext=.json field=texts image-cost=dynamic:14:2:3136:200704 image-token=0 on-exhaust=drop %s\n' "$1"
		printf 'source web path=%s on-exhaust=drop\n' "$SAMPLES/web/web-0.jsonl"
		printf 'seq-len 1024\nranks 2\nmicro-batches 2\ncheckpoint every=2\n'
	} > p.plan
}

# pipe PLAN: the stages by hand, per-rank streams r0.fr r1.fr
pipe() {
	local x args
	for x in cap doc web; do
		mapfile -d '' args < <("$OVL_MIX" --source-args "$x" "$1")
		"$OVL_SOURCE" "${args[@]}" > "$x.fr"
	done
	"$OVL_MIX" "$1" cap=cap.fr doc=doc.fr web=web.fr |
	    "$OVL_CONSTRUCT" "$1" | "$OVL_CKPT" -d ck --per-rank 'r%d.fr'
}

@test "images: inline in the per-rank streams, each the shard member's bytes, its run whole in its piece" {
	pipe p.plan
	run -0 /usr/bin/python3 "$OVL_SRCDIR/tests/helper/image-payloads.py" 0 s.tar,i.tar r0.fr r1.fr
	echo "# $output" >&3
	[[ "$output" == *"inline "[1-9]*" ref 0 "* ]]
	[[ "$output" == *"'jpeg': "*"'png': "*"'webp': "* ]]
	# the C reader agrees: every IMAGE after its SEQ, counted by the pieces
	"$OVL_TEST_TOOL" dump r0.fr > d0.txt
	grep -q '^IMAGE inline fmt=' d0.txt
	! grep '^IMAGE' d0.txt | grep -v ' rank=0 '
}

@test "images=ref: each reference names the shard, and dd reads the member's bytes there" {
	sed -i 's/image-token=0/& images=ref/' p.plan
	pipe p.plan
	run -0 /usr/bin/python3 "$OVL_SRCDIR/tests/helper/image-payloads.py" 0 s.tar,i.tar r0.fr r1.fr
	echo "# $output" >&3
	[[ "$output" == *"inline 0 ref "[1-9]* ]]
	# three of them by hand: dd at the offset, tar -xO of the member
	"$OVL_TEST_TOOL" dump r1.fr | grep '^IMAGE ref' | head -3 > refs.txt
	[ "$(wc -l < refs.txt)" -eq 3 ]
	while read -r _ _ _ _ _ _ _ _ _ _ _ _ _ off len member path _; do
		dd if="${path#path=}" bs=1 skip="${off#off=}" count="${len#len=}" status=none > got.img
		tar -xOf "${path#path=}" "${member#member=}" > want.img
		cmp got.img want.img
	done < refs.txt
	# no reference carries bytes (XXH64 of nothing)
	"$OVL_TEST_TOOL" dump r0.fr | grep '^IMAGE' > all.txt
	! grep -v ' data=ef46db3751d8e999$' all.txt
}

# killed_and_resumed PLAN: run PLAN (-c ck), killed three times at random
# checkpoints, then resumed to its end. Every source is throttled: with
# only the image sources slowed, the text source ran the last 14 of 23
# checkpoints in 0.1 s once they were done, and a kill after checkpoint
# 8 and a pause could come after the end (CI saw it).
killed_and_resumed() {
	local k want pid
	sed 's/^source .*/& throttle=25docs/' "$1" > slow.plan
	for k in 1 2 3; do
		if [ "$k" -eq 1 ]; then
			"$OVL_RUN" -q -c ck slow.plan 2> run.err 3>&- &
		else
			"$OVL_RUN" -q --resume -c ck slow.plan 2> run.err 3>&- &
		fi
		pid=$!
		want=$(( k * 2 + RANDOM % 3 ))
		wait_ckpt ck "$want" "$pid" || true
		kill -KILL "$pid" 2> /dev/null || true
		wait "$pid" || true
		# (killed while it ran: the end is not recorded)
		"$OVL_CKPT" show --print0 ck | tr '\0' '\n' | grep -x -A1 ended | tail -n 1 | grep -qx 0
	done
	run -0 "$OVL_RUN" -q --resume -c ck slow.plan
}

# resumed_same PLAN: PLAN (frames to out/all.fr, per rank out/r%d.fr) run
# whole, then killed and resumed: the same bytes, every image whole
resumed_same() {
	run -0 "$OVL_RUN" -q -c ref-ck -o ref/all.fr "$1"
	mkdir ref-r && mv out/r0.fr out/r1.fr ref-r/
	killed_and_resumed "$1"
	cmp ref/all.fr out/all.fr
	cmp ref-r/r0.fr out/r0.fr
	cmp ref-r/r1.fr out/r1.fr
	run -0 /usr/bin/python3 "$OVL_SRCDIR/tests/helper/image-payloads.py" 0 s.tar,i.tar out/r0.fr out/r1.fr
}

@test "images: killed at random points and resumed, the streams are the same bytes, images included; checkpoints hold no image" {
	printf 'output format=frames path=out/all.fr per-rank=out/r%%d.fr\n' >> p.plan
	resumed_same p.plan
	# the images are in the outputs, not in the checkpoint log
	local img log
	img=$(tar -tvf s.tar | awk '$6 ~ /\.(png|jpg|webp)$/ {n += $3} END {print n}')
	log=$(stat -c %s ck/ckpt.log)
	echo "# image bytes $img, checkpoint log $log bytes" >&3
	[ "$log" -lt $((img / 4)) ]
}

@test "images, fixed shapes (uniform yes): no run a sequence can hold is cut, with none, lpt and kk at 1 and 2 micro-batches; every step holds its budget" {
	local mb bal x args
	# interleaved documents alone (text between images, runs of at most
	# 1024 tokens): image-runs.py finds every run whole by its tokens
	printf 'source doc path=i.tar format=wds member-ext=.json field=texts image-cost=patch:64 image-token=0\nseq-len 1024\nranks 2\nuniform yes\n' > d.plan
	mapfile -d '' args < <("$OVL_MIX" --source-args doc d.plan)
	"$OVL_SOURCE" "${args[@]}" > doc.fr
	"$OVL_SOURCE" --json "${args[@]}" > doc.jsonl
	"$OVL_MIX" d.plan doc=doc.fr > dm.fr
	printf 'uniform yes\n' >> p.plan
	for mb in 1 2; do
		for bal in none lpt kk; do
			printf 'micro-batches %s\nbalance %s\n' "$mb" "$bal" > b.plan
			cat d.plan b.plan > db.plan
			"$OVL_CONSTRUCT" --json db.plan < dm.fr > con.jsonl
			run -0 /usr/bin/python3 "$OVL_SRCDIR/tests/helper/image-runs.py" doc.jsonl con.jsonl 1024 2 "$mb"
			echo "# $bal, $mb micro-batches: $output" >&3
			# the whole mix (captions' touching images, runs longer than
			# a sequence, text): every image's run whole in its piece
			sed "s/^micro-batches .*/micro-batches $mb/" p.plan > pb.plan
			printf 'balance %s\n' "$bal" >> pb.plan
			pipe pb.plan
			run -0 /usr/bin/python3 "$OVL_SRCDIR/tests/helper/image-payloads.py" 0 s.tar,i.tar r0.fr r1.fr
			rm -rf ck
		done
	done
}

@test "images, fixed shapes: killed at random points and resumed, the streams are the same bytes" {
	printf 'uniform yes\nbalance kk\noutput format=frames path=out/all.fr per-rank=out/r%%d.fr\n' >> p.plan
	resumed_same p.plan
}

@test "images: a run longer than seq-len follows long-docs: truncate cuts before a run and counts the images left out, split counts and says so, error names the image" {
	local args
	printf 'source doc path=i.tar format=wds member-ext=.json field=texts image-cost=patch:32 image-token=0 long-docs=truncate\nseq-len 1024\nranks 2\nmicro-batches 2\nuniform yes\n' > t.plan
	mapfile -d '' args < <("$OVL_MIX" --source-args doc t.plan)
	"$OVL_SOURCE" "${args[@]}" > doc.fr
	"$OVL_MIX" --stats st.txt --stats-format kv t.plan doc=doc.fr | "$OVL_CONSTRUCT" t.plan > c.fr
	# every placeholder kept is in the run of an image sent with it
	run -0 /usr/bin/python3 - c.fr <<-'PY'
	import sys, overlord
	ph = runs = n = 0
	for it in overlord.read(sys.argv[1]):
	    if isinstance(it, overlord.Seq):
	        ph += int((it.tokens[:it.cu_seqlens[-1]] == 0).sum())
	        runs += sum(im.ntokens for im in it.images); n += len(it.images)
	assert ph == runs and n > 0, (ph, runs, n)
	print("images", n, "placeholders", ph)
	PY
	grep -qx 'source.doc.long_truncated [1-9][0-9]*' st.txt
	grep -qx 'source.doc.long_images_left_out [1-9][0-9]*' st.txt
	# split: counted, and said once
	sed -i 's/long-docs=truncate/long-docs=split/' t.plan
	run -0 --separate-stderr "$OVL_MIX" --stats st.txt --stats-format kv t.plan doc=doc.fr
	[[ "$stderr" == *"source 'doc': record "*" is a run of "*" tokens, longer than seq-len 1024: split across sequences"* ]]
	grep -qx 'source.doc.long_images_split [1-9][0-9]*' st.txt
	# error: the first long document holds a long image (captions)
	printf 'source cap path=s.tar format=wds image-cost=patch:32 image-token=0 long-docs=error\nseq-len 1024\n' > e.plan
	mapfile -d '' args < <("$OVL_MIX" --source-args cap e.plan)
	"$OVL_SOURCE" "${args[@]}" > cap.fr
	run -1 --separate-stderr "$OVL_MIX" e.plan cap=cap.fr
	[[ "$stderr" == *"source 'cap': record "*"its image 0 is a run of "*" tokens, longer than seq-len 1024 (long-docs=error)"* ]]
}

@test "images: the grammar counts IMAGE frames (announced by their DOC, nothing between), exit 3 with the offset" {
	local x args n at
	printf 'source cap path=s.tar format=wds image-cost=patch:32 image-token=0\nseq-len 1024\n' > p.plan
	mapfile -d '' args < <("$OVL_MIX" --source-args cap p.plan)
	"$OVL_SOURCE" "${args[@]}" > cap.fr
	"$OVL_TEST_TOOL" frames cap.fr > frames.txt
	# the first DOC followed by an IMAGE
	n=$(awk '$3 == "DOC" { d = $1 } $3 == "IMAGE" && d != "" { print d; exit }' frames.txt)
	at=$(awk -v n="$n" '$1 == n + 1 { print $2 }' frames.txt)
	# one image more announced: the next frame is not the IMAGE due
	cp cap.fr more.fr
	"$OVL_TEST_TOOL" poke more.fr "$n" 20 99
	run -3 --separate-stderr "$OVL_MIX" p.plan cap=more.fr
	[[ "$stderr" == *"more IMAGE frames of the DOC before were due at byte offset"* ]]
	# none announced (the DOC's image flag cleared): its IMAGE is out of place
	cp cap.fr none.fr
	"$OVL_TEST_TOOL" poke none.fr "$n" 4 0
	run -3 --separate-stderr "$OVL_MIX" p.plan cap=none.fr
	[[ "$stderr" == *"an IMAGE frame that no DOC or SEQ before it announced at byte offset $at"* ]]
	# after a SEQ: its pieces count its IMAGE frames (u32 at +36 of a
	# piece record); one more than follow is an error in ovl-ckpt
	"$OVL_MIX" p.plan cap=cap.fr | "$OVL_CONSTRUCT" p.plan > c.fr
	"$OVL_TEST_TOOL" frames c.fr > frames.txt
	n=$(awk '$3 == "SEQ" { s = $1 } $3 == "IMAGE" && s != "" { print s; exit }' frames.txt)
	"$OVL_TEST_TOOL" dump c.fr | sed -n "$((n + 1))p" > seq.txt
	np=$(sed 's/.* npieces=\([0-9]*\).*/\1/' seq.txt)
	len=$(awk -v n="$n" '$1 == n { print $4 }' frames.txt)
	# the piece records end the payload (whatever the arrays' widths)
	"$OVL_TEST_TOOL" poke c.fr "$n" $((len - 40 * np + 36)) 99
	run -3 --separate-stderr "$OVL_CKPT" -d ck < c.fr
	[[ "$stderr" == *"more IMAGE frames of the SEQ before were due at byte offset"* ]]
}

@test "images: ovl-ckpt --format wds, a tar shard per rank and step: each sample's arrays and images as the stream has them; resumed to the same shards" {
	printf 'output format=wds path=out/vlm manifest=out/manifest.jsonl per-rank=out/r%%d.fr\n' >> p.plan
	run -0 "$OVL_RUN" -q -c ref-ck p.plan
	mv out ref
	# every rank and step has its shard (an empty step too), nothing else
	steps=$("$OVL_TEST_TOOL" dump ref/r0.fr | grep -c '^STEP ')
	[ "$steps" -gt 10 ]
	[ "$(ls ref/vlm-r*-s*.tar | wc -l)" -eq $((2 * steps)) ]
	run -0 /usr/bin/python3 - <<-'PY'
	import io, json, tarfile, glob, numpy as np, overlord
	seqs = {}
	for r in (0, 1):
	    for s in overlord.read("ref/r%d.fr" % r):
	        if isinstance(s, overlord.Seq):
	            seqs[(s.step, s.rank, s.mb)] = s
	n = imgs = 0
	man = [json.loads(l) for l in open("ref/manifest.jsonl")]
	assert len(man) == len(seqs)
	for path in sorted(glob.glob("ref/vlm-r*-s*.tar")):
	    with tarfile.open(path) as t:
	        got = {}
	        for m in t.getmembers():
	            key, _, ext = m.name.partition(".")
	            got.setdefault(key, {})[ext] = t.extractfile(m).read()
	    for key, mem in got.items():
	        meta = json.loads(mem["json"])
	        s = seqs[(meta["step"], meta["rank"], meta["mb"])]
	        arr = lambda e: np.load(io.BytesIO(mem[e]))
	        assert (arr("tokens.npy") == s.tokens).all()
	        assert (arr("positions.npy") == s.positions.astype(np.int32)).all()
	        assert (arr("cu_seqlens.npy") == s.cu_seqlens.astype(np.int32)).all()
	        assert len(meta["images"]) == len(s.images)
	        for j, im in zip(meta["images"], s.images):
	            assert mem[j["file"]] == im.read(), key
	            assert (j["seq_pos"], j["ntokens"], j["member"]) == (im.seq_pos, im.ntokens, im.member)
	            imgs += 1
	        n += 1
	assert n == len(seqs) and imgs > 100, (n, imgs)
	assert all(m["shard"].startswith("vlm-r") for m in man)
	print("samples", n, "images", imgs)
	PY
	echo "# $output" >&3
	# GNU tar reads them: images beside the arrays
	for f in ref/vlm-r*.tar; do tar -tf "$f"; done > names.txt
	grep -q '\.img0\.\(png\|jpg\|webp\)$' names.txt
	grep -q '\.tokens\.npy$' names.txt
	killed_and_resumed p.plan
	for f in ref/*; do
		cmp "$f" "out/${f#ref/}"
	done
	[ "$(ls out | wc -l)" -eq "$(ls ref | wc -l)" ]
}

# imbalance FILE: over the steps, the ranks' difference in sum n^2 of
# their images (n a run's tokens), over the total
imbalance() {
	"$OVL_TEST_TOOL" dump "$1" | awk '/^IMAGE/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		c[v["step"] " " v["rank"]] += v["ntok"] * v["ntok"]; if (v["step"] > m) m = v["step"]
	} END {
		for (s = 0; s <= m; s++) { a = c[s " 0"]; b = c[s " 1"]; d += a > b ? a - b : b - a; t += a + b }
		printf "%d\n", 1000 * d / t
	}'
}

@test "images: the encoder's own cost per image (image-encoder-cost A:B) balances the ranks' images" {
	local x args
	# images of two sizes (fixed:48, fixed:32), so that no outlier decides
	sed -i 's/^micro-batches 2/micro-batches 8/; s/^seq-len 1024/seq-len 512/
	    s/patch:32/fixed:48/; s/dynamic:14:2:3136:200704/fixed:32/' p.plan
	for x in cap doc web; do
		mapfile -d '' args < <("$OVL_MIX" --source-args "$x" p.plan)
		"$OVL_SOURCE" "${args[@]}" > "$x.fr"
	done
	"$OVL_MIX" p.plan cap=cap.fr doc=doc.fr web=web.fr > m.fr
	"$OVL_CONSTRUCT" p.plan < m.fr > plain.fr
	# the encoder's attention over an image outweighs a piece's
	printf 'image-encoder-cost 0:500\n' >> p.plan
	"$OVL_CONSTRUCT" p.plan < m.fr > enc.fr
	a=$(imbalance plain.fr)
	b=$(imbalance enc.fr)
	echo "# encoder-cost imbalance of the ranks: $a/1000 without, $b/1000 with" >&3
	[ "$b" -lt $((a / 4)) ]
	# the same tokens and images, only placed otherwise; the META says it
	"$OVL_TEST_TOOL" dump enc.fr | grep -c '^IMAGE' > n.enc
	"$OVL_TEST_TOOL" dump plain.fr | grep -c '^IMAGE' > n.plain
	cmp n.enc n.plain
	"$OVL_TEST_TOOL" dump enc.fr | head -1 | grep -q 'image-encoder-cost 0:500'
	# a bad value is the plan's error, exit 2
	sed -i 's/^image-encoder-cost .*/image-encoder-cost -1/' p.plan
	run -2 --separate-stderr "$OVL_MIX" --check p.plan
	[[ "$stderr" == *"image-encoder-cost: bad encoder cost '-1'"* ]]
}

@test "images=ref: a compressed shard cannot be referred to (exit 2, naming it)" {
	zstd -q s.tar -o s.tar.zst
	run -2 --separate-stderr "$OVL_SOURCE" --format wds --image-cost fixed:4 --image-token 0 --images ref x s.tar.zst
	[[ "$stderr" == *"--images ref: '"*"s.tar.zst' is compressed"* ]]
	run -0 "$OVL_SOURCE" --format wds --image-cost fixed:4 --image-token 0 x s.tar.zst
}

@test "images: images placed back to back stay whole, each in one piece, when together they are longer than a sequence" {
	# a captioned sample's images touch: the cutters take each run's
	# bounds from the IMAGE frames (tokens alone show one block)
	printf 'source cap path=s.tar format=wds image-cost=patch:16 image-token=0\nseq-len 512\nranks 2\nmicro-batches 2\n' > p.plan
	mapfile -d '' args < <("$OVL_MIX" --source-args cap p.plan)
	"$OVL_SOURCE" "${args[@]}" | "$OVL_MIX" p.plan cap=- |
	    "$OVL_CONSTRUCT" p.plan | "$OVL_CKPT" -d ck --per-rank 'r%d.fr'
	run -0 /usr/bin/python3 "$OVL_SRCDIR/tests/helper/image-payloads.py" 0 s.tar r0.fr r1.fr
	echo "# $output" >&3
	[[ "$output" == *"longer-than-a-sequence "[1-9]* ]]
}
