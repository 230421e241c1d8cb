#!/usr/bin/env bats
# ovl-ckpt at scale: its index of base records (DIR/ckpt.idx), so that
# restore and a resuming sink read the log from its last base records, not
# whole, and a missing, damaged or foreign index only makes the read
# longer; a descriptor per rank within RLIMIT_NOFILE.

load test_helper

GEN="$OVL_BUILDDIR/tests/unit/t-ckptgen"
# 3,000 steps, 1 rank, a checkpoint every step (a base every 16 records)
GENARGS=(5 3000 1 1 300)

# the stream, the same cut before its end (checkpoints up to 2999, no END),
# and the outputs of an uninterrupted run, made once for the file's tests
setup_file() {
	cd "$BATS_FILE_TMPDIR"
	"$GEN" "${GENARGS[@]}" > full.frames
	head -c $(($(stat -c %s full.frames) - 200)) full.frames > cut.frames
	"$OVL_CKPT" --dir ref/ck -f npy -o ref/out/x < full.frames
}

setup() {
	cd "$BATS_TEST_TMPDIR"
	run -3 "$OVL_CKPT" --dir ck -f npy -o out/x < "$BATS_FILE_TMPDIR/cut.frames"
}

# The -v line of a read of the log: sets READ, SIZE, FROM, NREC.
read_line() {
	local l
	l=$(grep -o "read [0-9]* of [0-9]* bytes (from byte offset [0-9]*), [0-9]* records" <<< "$1" | tail -n 1)
	[ -n "$l" ] || { echo "no read line in: $1"; return 1; }
	read -r _ READ _ SIZE _ _ _ _ FROM NREC _ <<< "${l//[(),]/}"
}

# restore -v CKPTDIR: its output in $1.out and states in $1.mix, $1.con;
# the read line's figures as read_line sets them
restore_to() {
	run -0 --separate-stderr "$OVL_CKPT" restore -v ck
	printf '%s\n' "${lines[@]}" > "$1.out"
	cp ck/resume/mix.state "$1.mix"
	cp ck/resume/construct.state "$1.con"
	read_line "$stderr"
}

same_restore() {
	cmp "$1.out" "$2.out" && cmp "$1.mix" "$2.mix" && cmp "$1.con" "$2.con"
}

@test "restore after 3,000 checkpoints reads two base segments of the log and says what a whole read says; the run resumes from them" {
	[ -s ck/ckpt.idx ]
	restore_to tail
	[ "$(tail -n 1 tail.out)" = "ckpt --resume 2999" ]
	# the log is over a megabyte; two segments of 16 records are a few KB
	[ "$SIZE" -gt 1000000 ]
	[ "$FROM" -gt 0 ]
	[ "$READ" -lt 20000 ]
	[ "$NREC" -le 32 ]
	# without the index: the whole log, the same answer
	mv ck/ckpt.idx idx.saved
	restore_to whole
	[ "$FROM" -eq 0 ]
	[ "$NREC" -eq 2999 ]
	same_restore tail whole
	# the sink resumes reading the same tail, and the outputs are the
	# uninterrupted run's
	mv idx.saved ck/ckpt.idx
	run -0 --separate-stderr bash -c '"$0" "${@:1:5}" 2999 | "$OVL_CKPT" -v --dir ck -f npy -o out/x --resume 2999' "$GEN" "${GENARGS[@]}"
	read_line "$stderr"
	[ "$FROM" -gt 0 ]
	cmp out/x.tokens.npy "$BATS_FILE_TMPDIR/ref/out/x.tokens.npy"
	cmp out/x.positions.npy "$BATS_FILE_TMPDIR/ref/out/x.positions.npy"
}

@test "a damaged, foreign or stale index costs a longer read, never another state" {
	local from1 size
	restore_to good
	from1=$FROM
	# the last entry fails its CRC: the base records before it
	size=$(stat -c %s ck/ckpt.idx)
	printf '\x7e' | dd of=ck/ckpt.idx bs=1 seek=$((size - 10)) conv=notrunc 2>/dev/null
	restore_to crc
	[ "$FROM" -gt 0 ]
	[ "$FROM" -lt "$from1" ]
	same_restore good crc
	# another log's index (bases every 7 records): no entry is confirmed
	run -3 "$OVL_CKPT" --dir ck2 --base-every 7 -f npy -o out2/x < "$BATS_FILE_TMPDIR/cut.frames"
	cp ck2/ckpt.idx ck/ckpt.idx
	restore_to foreign
	[ "$FROM" -eq 0 ]
	same_restore good foreign
	# not an index at all
	printf 'not an index at all, no' > ck/ckpt.idx
	restore_to junk
	[ "$FROM" -eq 0 ]
	same_restore good junk
}

@test "restore --at an early checkpoint reads the whole log and cuts the index with it; compact removes the index" {
	run -0 --separate-stderr "$OVL_CKPT" restore -v ck --at 100
	read_line "$stderr"
	[ "$FROM" -eq 0 ]
	[ "${lines[-1]}" = "ckpt --resume 100" ]
	# no entry past the cut log is left, and the next restore reads a tail
	restore_to cut
	[ "$(tail -n 1 cut.out)" = "ckpt --resume 100" ]
	[ "$FROM" -gt 0 ]
	[ "$((FROM + READ))" -eq "$SIZE" ]
	run -0 "$OVL_CKPT" compact ck
	[ ! -e ck/ckpt.idx ]
	restore_to compacted
	[ "$FROM" -eq 0 ]
	[ "$NREC" -eq 1 ]
	same_restore cut compacted
}

@test "a descriptor per rank: the soft RLIMIT_NOFILE is raised, a hard limit too low is an error naming it" {
	"$GEN" 5 2 300 1 300 > wide.frames
	run -0 bash -c 'ulimit -Sn 200 && exec "$0" --dir ck3 --per-rank out3/rank%d < wide.frames' "$OVL_CKPT"
	[ -s out3/rank299 ]
	run -1 --separate-stderr bash -c 'ulimit -n 200 && exec "$0" --dir ck4 --per-rank out4/rank%d < wide.frames' "$OVL_CKPT"
	[[ "$stderr" == "ovl-ckpt: 300 per-rank outputs need "*" open files, more than RLIMIT_NOFILE allows (soft 200, hard 200): raise the hard limit"* ]]
	[ ! -e out4/rank0 ]
}
