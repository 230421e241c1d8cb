#!/usr/bin/env bats
# Per-rank streams on FIFOs: a rank's stream never loses data and never
# hangs silently. The writer waits for its reader (--wait-readers), a late
# reader gets every byte, a reader that goes away is an error naming the
# rank, and the run is not called done before every byte was read.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	printf 'source web path=%s\nranks 2\nseq-len 256\n' "$SAMPLES/web/web-0.jsonl" > p.plan
	"$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-1.jsonl" > s.fr
	"$OVL_MIX" p.plan web=s.fr > m.fr
	"$OVL_CONSTRUCT" p.plan < m.fr > c.fr
	mkdir ref f
	"$OVL_CKPT" --dir ref/ck -p ref/rank%d p.plan < c.fr
	mkfifo f/rank0 f/rank1
}

# wait_for_line FILE TEXT: until FILE holds a line with TEXT (30 s at most)
wait_for_line() {
	local _
	for _ in $(seq 600); do
		grep -qF -- "$2" "$1" 2>/dev/null && return 0
		nap 0.05
	done
	echo "no '$2' in $1:"; cat "$1"
	return 1
}

@test "late readers get every byte: the writer waits for each rank's reader" {
	"$OVL_CKPT" -v --dir ck -p f/rank%d p.plan < c.fr 2> err 3>&- &
	pid=$!
	wait_for_line err "rank0: waiting for a reader of '$PWD/f/rank0'"
	cat f/rank0 > got0 3>&- &
	r0=$!
	wait_for_line err "rank1: waiting for a reader of '$PWD/f/rank1'"
	cat f/rank1 > got1
	wait "$r0"
	wait "$pid"
	cmp got0 ref/rank0
	cmp got1 ref/rank1
	"$OVL_TEST_TOOL" dump got1 | tail -n 1 | grep -q '^END '
}

@test "no reader within --wait-readers: exit 1 naming the rank, no END recorded" {
	run -1 --separate-stderr "$OVL_CKPT" --wait-readers 1 --dir ck -p f/rank%d p.plan < c.fr
	[ "$stderr" = "ovl-ckpt: rank0: no reader opened '$PWD/f/rank0' within 1 s (--wait-readers)" ]
	mapfile -d '' st < <("$OVL_CKPT" show --print0 ck)
	[ "${st[1]}" -eq 0 ] || [ "${st[9]}" = 0 ]
	run -2 "$OVL_CKPT" --wait-readers soon --dir ck2 -p f/rank%d p.plan
}

@test "a reader that goes away mid-stream is an error naming its rank, within seconds, and the run resumes" {
	# rank 0's reader takes 100 bytes and leaves; rank 1's reads all
	(head -c 100 f/rank0 > /dev/null) 3>&- &
	cat f/rank1 > got1 3>&- &
	run -1 --separate-stderr timeout 60 "$OVL_CKPT" --dir ck -p f/rank%d p.plan < c.fr
	[[ "$stderr" == "ovl-ckpt: rank0: the reader of '$PWD/f/rank0' went away"* ]]
	wait
	# the end of the run was not recorded: it can be restored and resumed
	mapfile -d '' st < <("$OVL_CKPT" show --print0 ck)
	[ "${st[0]}" = checkpoints ]
	[ "${st[1]}" -eq 0 ] || [ "${st[9]}" = 0 ]
}

@test "SIGTERM while waiting for a reader stops cleanly (143)" {
	"$OVL_CKPT" -v --dir ck -p f/rank%d p.plan < c.fr 2> err 3>&- &
	pid=$!
	wait_for_line err "rank0: waiting for a reader"
	kill -TERM "$pid"
	st=0
	wait "$pid" || st=$?
	[ "$st" -eq 143 ]
	grep -qF "stopped while rank0 waited for the reader of '$PWD/f/rank0'" err
}

# check_steps FILE RANK: the rank's stream ends every step with one STEP
# frame for it that counts its SEQs of that step; prints the steps seen
check_steps() {
	"$OVL_TEST_TOOL" dump "$1" | (
		n=0 step=-1 out=
		while read -r kind a b c _; do
			case $kind in
			SEQ)
				s=${a#step=}
				[ "${b#rank=}" = "$2" ] || { echo "SEQ of rank ${b#rank=}"; exit 1; }
				[ "$s" -ge "$step" ] || { echo "step $s after $step"; exit 1; }
				if [ "$s" -ne "$step" ]; then
					[ "$n" -eq 0 ] || { echo "step $step not ended"; exit 1; }
				fi
				step=$s n=$((n + 1)) ;;
			STEP)
				[ "${b#rank=}" = "$2" ] || { echo "STEP of rank ${b#rank=}"; exit 1; }
				[ "${c#seqs=}" -eq "$n" ] || { echo "step ${a#step=}: $n SEQs, STEP says ${c#seqs=}"; exit 1; }
				out+="${a#step=} "
				step=${a#step=} n=0 ;;
			esac
		done
		[ "$n" -eq 0 ] || { echo "the last step has no STEP"; exit 1; }
		echo "$out"
	)
}

@test "every rank's stream ends every step with a STEP frame, an empty step too" {
	# per-rank files of the two-rank run: every step ends in both
	s0=$(check_steps ref/rank0 0)
	s1=$(check_steps ref/rank1 1)
	[ -n "$s0" ] && [ "$s0" = "$s1" ]
	# three short documents over four ranks: rank 2 gets nothing, and
	# still learns that step 0 is over
	"$OVL_BUILDDIR/scripts/ovl-gendocs" --docs 3 --median 100 --seed 1 |
	    "$OVL_CONSTRUCT" --ranks 4 --seq-len 256 > few.fr
	"$OVL_CKPT" --dir ck -p few/rank%d < few.fr
	for r in 0 1 2 3; do
		[ "$(check_steps "few/rank$r" "$r")" = "0 " ]
	done
	"$OVL_TEST_TOOL" dump few/rank2 | grep -qx 'STEP step=0 rank=2 seqs=0'
	! "$OVL_TEST_TOOL" dump few/rank2 | grep -q '^SEQ' || false
	# a STEP for a rank the run does not have is refused like a SEQ
	"$OVL_TEST_TOOL" frames few.fr > frames.txt
	line=$(grep ' STEP ' frames.txt | head -n 1)
	cp few.fr bad.fr
	"$OVL_TEST_TOOL" poke bad.fr "${line%% *}" 8 9
	run -3 --separate-stderr "$OVL_CKPT" --dir ck2 -p bad/rank%d < bad.fr
	[[ "$stderr" == *"STEP for rank 9 of a 4-rank run at byte offset $(echo "$line" | cut -d' ' -f2)" ]]
}

@test "checkpoint boundaries are marked in every rank's stream, at the same place in each" {
	printf 'source web path=%s\nranks 2\nseq-len 256\ncheckpoint every=4\n' \
	    "$SAMPLES/web/web-0.jsonl" > cp.plan
	"$OVL_MIX" cp.plan web=s.fr | "$OVL_CONSTRUCT" cp.plan > cc.fr
	"$OVL_CKPT" --dir ck -p cr/rank%d cp.plan < cc.fr
	"$OVL_TEST_TOOL" dump cc.fr | grep '^BARRIER' > want
	[ "$(wc -l < want)" -gt 1 ]
	for r in 0 1; do
		"$OVL_TEST_TOOL" dump "cr/rank$r" | grep '^BARRIER' | cmp - want
		# each BARRIER comes right after a STEP: at a step boundary
		! "$OVL_TEST_TOOL" dump "cr/rank$r" | grep -B1 '^BARRIER' | grep -q '^SEQ' || false
	done
	run -0 "$OVL_CKPT" verify ck cr/rank0 cr/rank1
}
