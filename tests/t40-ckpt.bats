#!/usr/bin/env bats
# ovl-ckpt: output writers, the checkpoint log, restore and exact resume,
# on streams from tests/unit/t-ckptgen (frames built with src/lib/frame.h).
# The whole-pipeline kill tests are in t41-ckpt-pipeline.bats.

load test_helper

GEN="$OVL_BUILDDIR/tests/unit/t-ckptgen"
READER="$OVL_SRCDIR/samples/reader.py"

# 12 steps, 2 ranks, a checkpoint every 2 steps, vocab 300: barriers
# 1..5 at bytes 1880, 4428, 7072, 9364, 11496 and END at 13868
GENARGS=(5 12 2 2 300)

# the stream, generated once for the file's tests
setup_file() {
	"$GEN" "${GENARGS[@]}" > "$BATS_FILE_TMPDIR/full.frames"
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	cp "$BATS_FILE_TMPDIR/full.frames" full.frames
	OPTS=(--per-rank out/rank%d --format npy -o out/npy --manifest out/man.jsonl)
}

# The outputs of OPTS after an uninterrupted run, in ref/.
reference() {
	mkdir -p ref
	(cd ref && "$OVL_CKPT" --dir ck "${OPTS[@]}" < ../full.frames)
}

# Resume after an interrupted run: restore, then the stream from the
# checkpoint (what a restarted pipeline sends), or from scratch.
resume() {
	local n
	"$OVL_CKPT" restore ${RESTORE_OPTS:-} ck > restore.out 2> restore.err && rc=0 || rc=$?
	if [ "$rc" -eq 1 ] && grep -q 'no checkpoint' restore.err; then
		"$OVL_CKPT" --dir ck "${OPTS[@]}" < full.frames
		return
	fi
	[ "$rc" -eq 0 ] || { cat restore.err; return 1; }
	n=$(sed -n 's/^ckpt --resume //p' restore.out)
	if [ -z "$n" ]; then	# the run had ended
		grep -q 'end of the run' restore.err
		return
	fi
	"$GEN" "${GENARGS[@]}" "$n" | "$OVL_CKPT" --dir ck "${OPTS[@]}" --resume "$n"
}

@test "ovl-ckpt: --help, --version, usage errors" {
	run -0 "$OVL_CKPT" --help
	[[ "${lines[0]}" == "usage: ovl-ckpt [options] --dir CKPTDIR [PLAN]" ]]
	run -0 "$OVL_CKPT" --version
	[[ "$output" == "ovl-ckpt "* ]]
	run -2 "$OVL_CKPT"
	[[ "$output" == *"no checkpoint directory"* ]]
	run -2 "$OVL_CKPT" --dir d --per-rank out/rank
	[[ "$output" == *"exactly one %d"* ]]
	run -2 "$OVL_CKPT" --dir d --format parquet -o x
	run -2 "$OVL_CKPT" --dir d --format npy
	[[ "$output" == *"needs --output"* ]]
	run -2 "$OVL_CKPT" diff ck 1
	[[ "$output" == usage:* ]]
}

@test "ovl-ckpt: each subcommand has its own usage line and refuses the others' options" {
	local sub line
	"$OVL_CKPT" --help | sed -n '/^usage: /,/^[^ u]/p' | sed '$d' |
	    sed 's/^usage: //; s/^ *//' > all.txt
	for sub in show diff compact restore verify; do
		run -0 "$OVL_CKPT" "$sub" --help
		line=${lines[0]#usage: }
		[[ "$line" == "ovl-ckpt $sub "* ]]
		grep -qxF -- "$line" all.txt
		run -2 "$OVL_CKPT" "$sub" --format npy ck
		[[ "${lines[0]}" == "ovl-ckpt: unknown option '--format' for $sub" ]]
		[[ "${lines[1]}" == "usage: $line" ]]
		[ "${#lines[@]}" -eq 2 ]
	done
	# the sink takes none of the subcommands' options
	# (--wait would be taken as the sink's --wait-readers: getopt
	# accepts an unambiguous prefix)
	for opt in --list --print0 --verify-all --adopt "--at 3"; do
		# shellcheck disable=SC2086
		run -2 "$OVL_CKPT" --dir ck $opt
		[[ "${lines[0]}" == "ovl-ckpt: unknown option '${opt% *}'" ]]
	done
	[ ! -e ck ]
	run -2 "$OVL_CKPT" compact --at 3 ck
	run -2 "$OVL_CKPT" diff --json ck 1 2
	run -2 "$OVL_CKPT" verify --print0 ck x
	run -2 "$OVL_CKPT" show --adopt ck
	run -2 "$OVL_CKPT" show --json --list ck
	[[ "$output" == *"exclude each other"* ]]
	run -2 "$OVL_CKPT" restore ck --at
	[[ "${lines[0]}" == "ovl-ckpt: option '--at' needs a value" ]]
	run -2 "$OVL_CKPT" show -x ck
	[[ "${lines[0]}" == "ovl-ckpt: unknown option '-x' for show" ]]
}

@test "frames on stdout equal --format frames, and the reader sees every step" {
	"$OVL_CKPT" --dir a < full.frames > std.frames
	"$OVL_CKPT" --dir b --format frames -o file.frames < full.frames
	cmp std.frames file.frames
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	run -0 "$py" "$READER" frames std.frames
	[ "${#lines[@]}" -eq 12 ]
	[[ "${lines[0]}" == "step 0 rank 0 seqs 2 tokens "* ]]
}

@test "per-rank files, npy, megatron and jsonl carry the same tokens" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	"$OVL_CKPT" --dir c1 --per-rank out/rank%d < full.frames
	"$OVL_CKPT" --dir c2 --format npy -o out/npy < full.frames
	"$OVL_CKPT" --dir c3 --format megatron -o out/mega < full.frames
	"$OVL_CKPT" --dir c4 --format jsonl -o out/js < full.frames
	"$OVL_CKPT" --dir c5 < full.frames > all.frames
	"$py" "$READER" --tokens frames all.frames | grep -v '^step' > want
	"$py" "$READER" --tokens npy out/npy | grep -v '^step' > got.npy
	"$py" "$READER" --tokens megatron out/mega | grep -v '^batch' > got.mega
	"$py" -c 'import json,sys
for l in open(sys.argv[1]): print(" ".join(map(str, json.loads(l)["tokens"])))' \
	    out/js.jsonl > got.jsonl
	cmp want got.npy
	cmp want got.mega
	cmp want got.jsonl
	for r in 0 1; do
		"$py" "$READER" --rank $r --tokens frames all.frames | grep -v '^step' > want.$r
		"$py" "$READER" --tokens frames out/rank$r | grep -v '^step' > got.$r
		cmp want.$r got.$r
	done
}

@test "npy output loads with numpy.load: dtypes, shapes, cu_seqlens and positions" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	"$OVL_CKPT" --dir c --format npy -o n < full.frames
	run -0 "$py" -c '
import numpy as np
t, p, cu, s = (np.load("n.%s.npy" % k) for k in ("tokens", "positions", "cu_seqlens", "seqs"))
assert t.dtype == np.uint16 and p.dtype == np.int32 and cu.dtype == np.int64, (t.dtype, p.dtype)
assert s.shape == (24, 7) and t.shape == p.shape
assert cu[0] == 0 and cu[-1] == len(t) and np.all(np.diff(cu) > 0)
for a, b in zip(cu[:-1], cu[1:]):
    assert np.array_equal(p[a:b], np.arange(b - a)), (a, b)
assert np.array_equal(s[:, 3], np.concatenate(([0], np.cumsum(s[:, 4])[:-1])))
print(int(s[:, 0].max()))'
	[ "$output" = 11 ]
}

@test "megatron: uint16 below 65500 ids, int32 above, as Megatron's reader expects" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	"$OVL_CKPT" --dir c1 --format megatron -o small < full.frames
	"$GEN" 5 4 2 2 70000 | "$OVL_CKPT" --dir c2 --format megatron -o big
	run -0 "$py" -c '
import sys; sys.path.insert(0, sys.argv[1])
import numpy as np, reader
for p, want in (("small", np.uint16), ("big", np.int32)):
    dt, sizes, ptrs, docs = reader.read_megatron_index(p)
    assert dt == want, (p, dt)
    assert len(docs) == len(sizes) + 1
    toks = np.concatenate([s["tokens"] for s in reader.iter_megatron(p)])
    assert len(toks) == sizes.sum() and toks.max() < (300 if p == "small" else 70000)
print("ok")' "$OVL_SRCDIR/samples"
	[ "$output" = ok ]
}

@test "checkpoints: a base, then diffs; show, show --json, diff" {
	"$OVL_CKPT" --dir ck --base-every 3 --per-rank out/rank%d < full.frames
	run -0 "$OVL_CKPT" show --list ck
	[ "${#lines[@]}" -eq 7 ]
	[[ "${lines[1]}" == "1 "*base* ]]
	[[ "${lines[2]}" == "2 "*diff* ]]
	[[ "${lines[4]}" == "4 "*base* ]]
	[[ "${lines[6]}" == "6 "*end ]]
	run -0 "$OVL_CKPT" show ck --at 2
	[[ "${lines[0]}" == "checkpoint 2: diff record of "* ]]
	[[ "$output" == *$'\nstep 4\n'* ]]
	[[ "$output" == *"source.web.cursor 0:1:400:4"* ]]
	run -0 "$OVL_CKPT" show --json ck --at 2
	[[ "$output" == '{"checkpoint":2,"record":"diff",'* ]]
	run -0 "$OVL_CKPT" diff ck 1 2
	[[ "$output" == *$'- step 2\n+ step 4'* ]]
	[[ "$output" != *"source.web.partitions"* ]]
	run -1 "$OVL_CKPT" show ck --at 99
	[[ "$output" == *"no checkpoint 99"* ]]
	# --at repeated: each in turn, a JSON line each, the same objects
	run -0 "$OVL_CKPT" show --json ck --at 5 --at 2
	[ "${#lines[@]}" -eq 2 ]
	[ "${lines[1]}" = "$("$OVL_CKPT" show --json ck --at 2)" ]
	[ "${lines[0]}" = "$("$OVL_CKPT" show --json ck --at 5)" ]
	run -1 --separate-stderr "$OVL_CKPT" show --json ck --at 2 --at 99
	[ -z "$output" ]
	[[ "$stderr" == *"no checkpoint 99"* ]]
}

@test "restore prints the resume options of every stage and writes the STATE files" {
	head -c 5000 full.frames | "$OVL_CKPT" --dir ck --per-rank out/rank%d 2> err || rc=$?
	[ "$rc" -eq 3 ]
	run -0 "$OVL_CKPT" restore ck
	[ "${lines[0]}" = "source:web:0/2 --resume 0:1:400:4" ]
	[ "${lines[1]}" = "source:web:1/2 --resume 0:1:400:4" ]
	[ "${lines[2]}" = "source:code:0/1 --resume 0:0:200:0" ]
	[ "${lines[3]}" = "mix --resume $BATS_TEST_TMPDIR/ck/resume/mix.state" ]
	[ "${lines[4]}" = "construct --resume $BATS_TEST_TMPDIR/ck/resume/construct.state" ]
	[ "${lines[5]}" = "ckpt --resume 2" ]
	printf 'step 4\nskip 4\n' > want
	cmp want ck/resume/construct.state
	grep -qx 'source.code.partitions 1' ck/resume/mix.state
}

@test "restore with no checkpoint says so and exits 1; a used directory is refused" {
	head -c 1500 full.frames | "$OVL_CKPT" --dir ck --per-rank out/rank%d || true
	run -1 "$OVL_CKPT" restore ck
	[[ "$output" == *"no checkpoint in 'ck'"* ]]
	"$OVL_CKPT" --dir ck2 --per-rank o2/rank%d < full.frames
	run -2 "$OVL_CKPT" --dir ck2 --per-rank o2/rank%d < full.frames
	[[ "$output" == *"already holds checkpoints"* ]]
	run -0 "$OVL_CKPT" restore ck2
	[[ "$output" == *"end of the run"* ]]
	run -2 "$OVL_CKPT" --dir ck2 --per-rank o2/rank%d --resume 42 < full.frames
}

@test "a stream cut at seeded random bytes resumes byte-identical (per-rank, npy, manifest)" {
	reference
	size=$(stat -c %s full.frames)
	RANDOM=4242
	for i in 1 2 3 4 5 6 7 8; do
		rm -rf ck out
		cut=$(( (RANDOM * 32768 + RANDOM) % size ))
		head -c "$cut" full.frames | "$OVL_CKPT" --dir ck "${OPTS[@]}" 2>/dev/null || true
		resume
		same_as_reference || { echo "cut at $cut"; false; }
	done
}

@test "megatron output resumes byte-identical, .idx included" {
	OPTS=(--format megatron -o out/mega)
	reference
	for cut in 1500 5000 12000 20000; do
		rm -rf ck out
		head -c "$cut" full.frames | "$OVL_CKPT" --dir ck "${OPTS[@]}" 2>/dev/null || true
		resume
		same_as_reference
	done
	cmp ref/ck/megatron.sizes ck/megatron.sizes
}

@test "restore --at an earlier checkpoint drops the later ones and still resumes exactly" {
	reference
	head -c 15000 full.frames | "$OVL_CKPT" --dir ck "${OPTS[@]}" 2>/dev/null || true
	run -0 "$OVL_CKPT" restore ck --at 1
	[ "${lines[-1]}" = "ckpt --resume 1" ]
	run -0 "$OVL_CKPT" show --list ck
	[ "${#lines[@]}" -eq 2 ]
	"$GEN" "${GENARGS[@]}" 1 | "$OVL_CKPT" --dir ck "${OPTS[@]}" --resume 1
	same_as_reference
}

@test "a torn tail of the log is ignored: the previous checkpoint is used" {
	reference
	head -c 15000 full.frames | "$OVL_CKPT" --dir ck "${OPTS[@]}" 2>/dev/null || true
	last=$("$OVL_CKPT" show --list ck | tail -n 1 | awk '{print $1}')
	len=$(stat -c %s ck/ckpt.log)
	head -c $((len - 7)) ck/ckpt.log > torn && cat torn > ck/ckpt.log
	run -0 "$OVL_CKPT" restore ck
	[ "${lines[-1]}" = "ckpt --resume $((last - 1))" ]
	n=$((last - 1))
	"$GEN" "${GENARGS[@]}" "$n" | "$OVL_CKPT" --dir ck "${OPTS[@]}" --resume "$n"
	same_as_reference
}

@test "a corrupt record before the tail is an error with its byte offset" {
	"$OVL_CKPT" --dir ck --per-rank out/rank%d < full.frames
	# flip one payload byte of the first record (it starts at byte 16)
	printf '\x7e' | dd of=ck/ckpt.log bs=1 seek=60 conv=notrunc 2>/dev/null
	run -3 "$OVL_CKPT" show ck
	[[ "$output" == *"record 1 at byte offset 16 fails its CRC"* ]]
	run -3 "$OVL_CKPT" restore ck
}

@test "verify recomputes the rolling hash; a changed byte is found" {
	"$OVL_CKPT" --dir ck "${OPTS[@]}" < full.frames
	run -0 "$OVL_CKPT" verify ck out/rank0 out/rank1 out/npy.tokens.npy out/man.jsonl
	[ "${#lines[@]}" -eq 4 ]
	[[ "${lines[0]}" == "out/rank0: ok: matches checkpoint 6 "* ]]
	run -0 "$OVL_CKPT" verify ck --at 3 out/rank1
	[[ "$output" == *"matches checkpoint 3"*"bytes after it"* ]]
	printf 'X' | dd of=out/rank1 bs=1 seek=2000 conv=notrunc 2>/dev/null
	run -1 "$OVL_CKPT" verify ck out/rank0 out/rank1
	[[ "${lines[0]}" == *ok* ]]
	[[ "${lines[1]}" == "out/rank1: MISMATCH: bytes "*" do not match checkpoint "* ]]
	run -1 "$OVL_CKPT" verify ck full.frames
	[[ "$output" == *"not an output"* ]]
}

@test "compact folds the log into one base; verify and resume still work" {
	reference
	head -c 12000 full.frames | "$OVL_CKPT" --dir ck "${OPTS[@]}" 2>/dev/null || true
	before=$("$OVL_CKPT" show ck)
	n=$("$OVL_CKPT" show --list ck | tail -n 1 | awk '{print $1}')
	run -0 "$OVL_CKPT" compact ck
	run -0 "$OVL_CKPT" show --list ck
	[ "${#lines[@]}" -eq 2 ]
	[[ "${lines[1]}" == "$n "*base* ]]
	# same state, apart from the record line and the hashes
	diff <(echo "$before" | sed 1d | grep -v '^rank[0-9] \|^tokens \|^positions \|^cu_seqlens \|^seqs \|^manifest ') \
	    <("$OVL_CKPT" show ck | sed 1d | grep -v '^rank[0-9] \|^tokens \|^positions \|^cu_seqlens \|^seqs \|^manifest ')
	run -0 "$OVL_CKPT" verify ck out/rank0 out/npy.seqs.npy
	run -0 "$OVL_CKPT" restore ck
	"$GEN" "${GENARGS[@]}" "$n" | "$OVL_CKPT" --dir ck "${OPTS[@]}" --resume "$n"
	same_as_reference
	run -0 "$OVL_CKPT" verify ck out/rank0 out/rank1 out/man.jsonl
}

@test "compact refuses when an output no longer matches its checkpoints" {
	"$OVL_CKPT" --dir ck --per-rank out/rank%d < full.frames
	cp ck/ckpt.log saved.log
	printf 'X' | dd of=out/rank0 bs=1 seek=100 conv=notrunc 2>/dev/null
	run -1 "$OVL_CKPT" compact ck
	[[ "$output" == *"not compacting"* ]]
	cmp saved.log ck/ckpt.log
}

@test "restore --skip-steps: the resumed output drops exactly those steps" {
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	OPTS=(--per-rank out/rank%d)
	reference
	head -c 5000 full.frames | "$OVL_CKPT" --dir ck "${OPTS[@]}" 2>/dev/null || true
	run -2 "$OVL_CKPT" restore --skip-steps 1-2 ck
	[[ "$output" == *"already written"* ]]
	run -0 "$OVL_CKPT" restore --skip-steps 5-7 ck
	n=$(sed -n 's/^ckpt --resume //p' <<< "$output")
	run -0 "$OVL_CKPT" show ck
	[[ "$output" == *"skip-steps 5-7"* ]]
	"$GEN" "${GENARGS[@]}" "$n" | "$OVL_CKPT" --dir ck "${OPTS[@]}" --resume "$n"
	"$py" "$READER" frames ref/out/rank0 | awk '$2 < 5 || $2 > 7' > want
	"$py" "$READER" frames out/rank0 > got
	cmp want got
	# and the skip survives a later restore (it is in the log)
	run -0 "$OVL_CKPT" show ck --at 5
	[[ "$output" == *"skip-steps 5-7"* ]]
}

# committed DIR: a checkpoint is in DIR's log (past its 16-byte header)
committed() {
	[ "$(stat -c %s "$1/ckpt.log" 2>/dev/null || echo 0)" -gt 16 ]
}

@test "SIGTERM: ovl-ckpt commits at the next barrier and exits 143; resume is exact" {
	reference
	mkfifo in.fifo
	"$OVL_CKPT" --dir ck "${OPTS[@]}" < in.fifo 2> err 3>&- &
	pid=$!
	# the signal once the sink has committed a checkpoint of the first
	# 5000 bytes, the rest after it
	{
		head -c 5000 full.frames
		wait_until 60 committed ck
		kill -TERM "$pid"
		tail -c +5001 full.frames
	} > in.fifo 2>/dev/null || true
	wait "$pid" && rc=0 || rc=$?
	[ "$rc" -eq 143 ]
	grep -q 'stopped at checkpoint' err
	resume
	same_as_reference
}

@test "a full disk at commit: the error says so and the previous checkpoint stays valid" {
	command -v unshare >/dev/null || skip "no unshare"
	unshare -rm true 2>/dev/null || skip "no user namespaces here"
	# 60 checkpoints: more log than the 4 KiB file system holds
	GENARGS=(5 60 2 1 300)
	"$GEN" "${GENARGS[@]}" > full.frames
	reference
	mkdir ckfs
	run -1 unshare -rm sh -c '
		mount -t tmpfs -o size=4k tmpfs ckfs || exit 9
		"$0" --dir ckfs/ck --per-rank out/rank%d --format npy -o out/npy \
		    --manifest out/man.jsonl < full.frames
		rc=$?
		cp -r ckfs/ck ck
		exit $rc' "$OVL_CKPT"
	[[ "$output" == *"cannot append checkpoint"*"previous checkpoint stays valid"*"No space left on device"* ]]
	run -0 "$OVL_CKPT" show --list ck
	# the log was written in ckfs/ck: the copy takes its outputs over
	run -2 "$OVL_CKPT" restore ck
	[[ "$output" == *"ckfs/ck': this is a copy or a move"* ]]
	RESTORE_OPTS=--adopt resume
	same_as_reference
}

@test "restoring a copy of a checkpoint directory never touches the original run's outputs" {
	"$OVL_CKPT" --dir ck --format npy -o out/npy < full.frames
	cp -r ck ck2
	cp out/npy.tokens.npy before.npy
	run -2 --separate-stderr "$OVL_CKPT" restore ck2 --at 3
	[ "$stderr" = "ovl-ckpt: 'ck2': checkpoint 3 was written in '$BATS_TEST_TMPDIR/ck': this is a copy or a move, and its outputs are that run's; restore there, or give --adopt to take them over" ]
	cmp out/npy.tokens.npy before.npy
	run -0 "$OVL_CKPT" restore ck --at 3
	[ "$(stat -c %s out/npy.tokens.npy)" -lt "$(stat -c %s before.npy)" ]
}

@test "frames that pass their CRC but make no sense stop ovl-ckpt with status 3 and the byte offset: rank beyond ranks, steps backwards, a broken META" {
	printf 'source web path=%s\nranks 2\nseq-len 256\n' "$SAMPLES/web/web-0.jsonl" > p.plan
	"$OVL_SOURCE" --format jsonl web "$SAMPLES/web/web-0.jsonl" > s.fr
	"$OVL_MIX" p.plan web=s.fr > m.fr
	"$OVL_CONSTRUCT" p.plan < m.fr > c.fr
	"$OVL_TEST_TOOL" frames c.fr > frames.txt
	[[ "$(sed -n 1p frames.txt)" == "0 16 META "* ]]
	off3=$(sed -n 4p frames.txt | cut -d' ' -f2)
	# SEQ payload: u64 step at 0, u32 rank at 8
	cp c.fr rank.fr
	"$OVL_TEST_TOOL" poke rank.fr 3 8 1000
	run -3 --separate-stderr "$OVL_CKPT" --dir ck1 --format jsonl -o out1/x p.plan < rank.fr
	[ "$stderr" = "ovl-ckpt: 'standard input': SEQ for rank 1000 of a 2-rank run at byte offset $off3" ]
	[ ! -e out1/rank1000 ]
	# a later SEQ set back to step 0
	line=$(grep ' SEQ ' frames.txt | tail -n 1)
	offl=$(echo "$line" | cut -d' ' -f2)
	cp c.fr step.fr
	"$OVL_TEST_TOOL" poke step.fr "${line%% *}" 0 0
	run -3 --separate-stderr "$OVL_CKPT" --dir ck2 --format jsonl -o out2/x p.plan < step.fr
	[[ "$stderr" == "ovl-ckpt: 'standard input': SEQ for step 0 after step "*" (steps out of order) at byte offset $offl" ]]
	# a META whose text length no longer fits its payload
	cp c.fr meta.fr
	"$OVL_TEST_TOOL" poke meta.fr 0 0 100000
	run -3 --separate-stderr "$OVL_CKPT" --dir ck3 --format jsonl -o out3/x p.plan < meta.fr
	[ "$stderr" = "ovl-ckpt: 'standard input': malformed META at byte offset 16" ]
	# the untouched stream is fine
	run -0 "$OVL_CKPT" --dir ck4 --format jsonl -o out4/x p.plan < c.fr
}

@test "a corrupt record in the middle: restore --at an earlier checkpoint works, plain restore names the last intact one" {
	"$OVL_CKPT" --dir ck "${OPTS[@]}" < full.frames
	reference
	off=$("$OVL_CKPT" show --list ck | awk '$1 == 4 { print $3 }')
	printf '\x7e' | dd of=ck/ckpt.log bs=1 seek=$((off + 40)) conv=notrunc 2>/dev/null
	run -3 --separate-stderr "$OVL_CKPT" restore ck
	[ "$stderr" = "ovl-ckpt: 'ck/ckpt.log': record 4 at byte offset $off fails its CRC; checkpoints up to 3 are intact: restore one with --at" ]
	run -0 --separate-stderr "$OVL_CKPT" restore ck --at 2
	[[ "$stderr" == *"record 4 at byte offset $off fails its CRC; checkpoint 2 comes before it: the log is cut there" ]]
	printf '%s\n' "${lines[@]}" > restore.out
	# the log is whole again, and the run resumes exactly from checkpoint 2
	run -0 "$OVL_CKPT" show --list ck
	[ "$(tail -n 1 <<< "$output" | cut -d' ' -f1)" = 2 ]
	bytes=$(sed -n 's/^.* --resume \([0-9]*\)$/\1/p' restore.out)
	[ "$bytes" = 2 ]
	off2=$("$OVL_CKPT" show ck --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["checkpoint"])')
	[ "$off2" = 2 ]
}

@test "restore checks committed bytes: a changed byte in the last segment stops it; --verify-all checks every segment" {
	"$OVL_CKPT" --dir ck --format jsonl -o out/j < full.frames
	"$OVL_CKPT" restore ck --at 5 > /dev/null
	cp -r ck ck.bak && cp out/j.jsonl j.bak
	l4=$("$OVL_CKPT" show ck --at 4 | sed -n 's/^jsonl \([0-9]*\) .*/\1/p')
	l5=$("$OVL_CKPT" show ck --at 5 | sed -n 's/^jsonl \([0-9]*\) .*/\1/p')
	[ "$l4" -lt "$l5" ]
	# a byte of the last committed segment (checkpoint 4 to 5)
	printf 'X' | dd of=out/j.jsonl bs=1 seek=$((l4 + 3)) conv=notrunc 2>/dev/null
	run -3 --separate-stderr "$OVL_CKPT" restore ck
	[ "$stderr" = "ovl-ckpt: '$BATS_TEST_TMPDIR/out/j.jsonl': bytes $l4..$l5 do not match checkpoint 5: cannot resume (ovl-ckpt verify tells more)" ]
	# the log and the output are untouched by the refusal
	cmp ck/ckpt.log ck.bak/ckpt.log
	# a byte of the first segment: only --verify-all looks there
	cp j.bak out/j.jsonl
	printf 'X' | dd of=out/j.jsonl bs=1 seek=3 conv=notrunc 2>/dev/null
	run -3 --separate-stderr "$OVL_CKPT" restore --verify-all ck
	[[ "$stderr" == "ovl-ckpt: '$BATS_TEST_TMPDIR/out/j.jsonl': bytes 0.."*" do not match checkpoint 1: cannot resume from checkpoint 5" ]]
	run -0 "$OVL_CKPT" restore ck
	cp j.bak out/j.jsonl
	run -0 "$OVL_CKPT" restore --verify-all ck
}

# waits_in_read PID FD: PID waits in read(2) on FD (0x0 for 0)
waits_in_read() {
	local nr fd _
	read -r nr fd _ 2>/dev/null < "/proc/$1/syscall" || return 1
	case $(uname -m):$nr in
	x86_64:0 | aarch64:63) [ "$fd" = "$2" ] ;;
	*) return 1 ;;
	esac
}

@test "an output file has one writer: a second run on the same output prefix is refused and the first run's bytes stay whole" {
	mkfifo in
	"$OVL_CKPT" --dir ck1 --format npy -o out/npy < in 3>&- &
	pid=$!
	exec 4> in
	head -c 1880 full.frames >&4	# up to the first barrier
	# its outputs open and locked: it waits for more of its input
	wait_until 60 waits_in_read "$pid" 0x0
	cp out/npy.tokens.npy before.npy
	run -2 --separate-stderr "$OVL_CKPT" --dir ck2 --format npy -o out/npy < full.frames
	[ "$stderr" = "ovl-ckpt: '$BATS_TEST_TMPDIR/out/npy.tokens.npy' is being written by another ovl-ckpt (two runs with one output)" ]
	cmp out/npy.tokens.npy before.npy
	tail -c +1881 full.frames >&4
	exec 4>&-
	wait "$pid"
	"$OVL_CKPT" --dir ckref --format npy -o ref/npy < full.frames
	cmp out/npy.tokens.npy ref/npy.tokens.npy
	run -0 "$OVL_CKPT" verify ck1 out/npy.tokens.npy
}

@test "the manifest names each piece's file (and byte range of a cut file), in shuffled order" {
	printf 'source books path=%s/books/book-0*.txt doc-per=file shuffle-seed=7 epochs=2\nsource web path=%s/web/web-0.jsonl chunk-size=20000\nranks 2\nseq-len 512\n' \
	    "$SAMPLES" "$SAMPLES" > m.plan
	mapfile -d '' a < <("$OVL_MIX" --source-args books m.plan)
	"$OVL_SOURCE" "${a[@]}" > b.fr
	"$OVL_SOURCE" --json "${a[@]}" > b.json
	mapfile -d '' a < <("$OVL_MIX" --source-args web m.plan)
	"$OVL_SOURCE" "${a[@]}" > w.fr
	"$OVL_SOURCE" --json "${a[@]}" > w.json
	"$OVL_MIX" m.plan books=b.fr web=w.fr | "$OVL_CONSTRUCT" m.plan |
	    "$OVL_CKPT" --dir ck --format jsonl -o out/m --manifest out/man.jsonl m.plan
	run -0 python3 -c '
import json, sys
where = {}
for sid, path in ((0, sys.argv[2]), (1, sys.argv[3])):
    for l in open(path):
        d = json.loads(l)
        where[(sid, d["pos"][0], d["pos"][1])] = d["file"]
n = cut = 0
for l in open(sys.argv[1]):
    for p in json.loads(l)["pieces"]:
        assert p["file"] == where[(p["source"], p["epoch"], p["chunk"])], p
        if "file_range" in p:
            cut += 1
            assert p["source"] == 1 and p["file_range"][1] > 0, p
        n += 1
assert n > 100 and cut > 0, (n, cut)
print(n)' out/man.jsonl b.json w.json
}
