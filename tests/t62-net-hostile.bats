#!/usr/bin/env bats
# Peers that lie or say nothing (src/lib/net.c accept_all, net-auth.c): a
# tcp-listen: or unix-listen: stream greets every peer at once and takes
# the first that proves itself, so connections that never say a word do
# not keep the real peer waiting; every rank's listener opens at once. A
# greeting's faults are named as they are; a plan's per-rank ports are
# checked for every rank.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	net_env t62-$BATS_TEST_NUMBER
	printf 'source web path=%s\nranks 2\nseq-len 256\ncheckpoint every=4\n' \
	    "$SAMPLES/web/web-0.jsonl" > one.plan
	"$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" > s.fr
	"$OVL_MIX" one.plan web=s.fr > m.fr
	"$OVL_CONSTRUCT" one.plan < m.fr > c.fr
	"$OVL_CKPT" --dir ref -p ref/rank%d one.plan < c.fr
	SILENT="$OVL_SRCDIR/tests/helper/silent-peers.py"
}

teardown() {
	[ -z "${HOLD:-}" ] || kill "$HOLD" 2>/dev/null || true
}

# wait_file FILE: until FILE exists (a port file, the holders' marker)
wait_file() {
	wait_until 30 test -s "$1"
}

@test "silent peers: 40 plain sockets on rank 0's port before its reader; both ranks' readers get their streams, the run exits 0" {
	"$OVL_CKPT" -v --dir ck -p "tcp-listen:127.0.0.1:0,port-file=port.%d" \
	    one.plan < c.fr 2> ckpt.err 3>&- &
	ckpt=$!
	wait_file port.0
	# more than a listener keeps in its handshake at once (32)
	python3 "$SILENT" "127.0.0.1:$(cat port.0)" 40 held 3>&- &
	HOLD=$!
	wait_file held
	# rank 1's listener is open though rank 0 has no reader yet
	[ -s port.1 ]
	"$OVL_TEST_TOOL" net-cat "tcp:127.0.0.1:$(cat port.1)" got1 3>&- &
	r1=$!
	run -0 "$OVL_TEST_TOOL" net-cat "tcp:127.0.0.1:$(cat port.0)" got0
	wait "$r1"
	wait "$ckpt"
	cmp got0 ref/rank0
	cmp got1 ref/rank1
	grep -q "peer 127.0.0.1:[0-9]* on tcp-listen:127.0.0.1:$(cat port.0): authenticated" ckpt.err
	grep -q "refused peer 127.0.0.1:[0-9]*: no proof yet, and 32 peers wait with it (the oldest goes)" ckpt.err
}

@test "silent peers: 8 plain sockets on a unix-listen: input before its writer; the writer's stream is read whole" {
	"$OVL_CKPT" --dir ck --input "unix-listen:$PWD/in.sock" -p out/rank%d \
	    one.plan 2> ckpt.err 3>&- &
	ckpt=$!
	wait_until 30 test -S in.sock
	python3 "$SILENT" "$PWD/in.sock" 8 held 3>&- &
	HOLD=$!
	wait_file held
	run -0 "$OVL_CONSTRUCT" --output "unix:$PWD/in.sock" one.plan < m.fr
	wait "$ckpt"
	cmp out/rank0 ref/rank0
	cmp out/rank1 ref/rank1
}

@test "hostile peers: a greeting with a run id over 200 bytes is refused as such, not as another version" {
	"$OVL_CKPT" --dir ck --input "tcp-listen:127.0.0.1:0,port-file=port.in" \
	    -p out/rank%d one.plan 2> ckpt.err 3>&- &
	ckpt=$!
	wait_file port.in
	python3 - "$(cat port.in)" <<-'PY'
	import socket, sys
	s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
	s.sendall(b"OVLAUTH\n" + bytes([1, ord("W"), 250, 0]) + bytes(32) + b"x" * 250)
	s.recv(1024)
	PY
	wait_until 30 grep -q "refused peer" ckpt.err
	kill -KILL "$ckpt"
	wait "$ckpt" || true
	grep -q "tcp-listen:127.0.0.1:$(cat port.in): refused peer 127.0.0.1:[0-9]*: a run id too long (250 bytes; at most 200)" ckpt.err
	! grep -q "another version" ckpt.err
}

@test "hostile peers: ovl-mix --check refuses per-rank ports past 65535 at the output's line (exit 2)" {
	printf '%s\n' "source web path=$SAMPLES/web/web-0.jsonl" 'ranks 4' \
	    'output format=frames per-rank=tcp-listen::65532+%d' > ok.plan
	run -0 "$OVL_MIX" --check ok.plan
	sed 's/65532/65533/' ok.plan > bad.plan
	run -2 "$OVL_MIX" --check bad.plan
	[[ "$output" == *"bad.plan:3: output per-rank=tcp-listen::65533+%d: rank 3's endpoint 'tcp-listen::65533+3' is not one (a port is at most 65535)"* ]]
}

@test "silent peers: ovl-mix takes its network inputs at once; a silent peer on one, its source not started, holds no other back" {
	printf 'source web path=%s partitions=2\nranks 2\nseq-len 256\n' \
	    "$SAMPLES/web/web-0.jsonl" > two.plan
	mapfile -d '' args < <("$OVL_MIX" --source-args web two.plan)
	"$OVL_MIX" -v two.plan "web=tcp-listen:127.0.0.1:0,port-file=port.0" \
	    "web=tcp-listen:127.0.0.1:0,port-file=port.1" > mixed.fr \
	    2> mix.err 3>&- &
	mix=$!
	wait_file port.0
	wait_file port.1
	python3 "$SILENT" "127.0.0.1:$(cat port.0)" 2 held 3>&- &
	HOLD=$!
	wait_file held
	# input 1's source is greeted while input 0 has only silent peers
	"$OVL_SOURCE" "${args[@]}" --partition 1/2 --output \
	    "tcp:127.0.0.1:$(cat port.1)" 2> s1.err 3>&- &
	s1=$!
	wait_until 30 grep -q "peer 127.0.0.1:[0-9]* on tcp-listen:127.0.0.1:$(cat port.1): authenticated" mix.err
	run -0 "$OVL_SOURCE" "${args[@]}" --partition 0/2 --output \
	    "tcp:127.0.0.1:$(cat port.0)"
	wait "$s1"
	wait "$mix"
	"$OVL_SOURCE" "${args[@]}" --partition 0/2 > ref0.fr
	"$OVL_SOURCE" "${args[@]}" --partition 1/2 > ref1.fr
	"$OVL_MIX" two.plan web=ref0.fr web=ref1.fr > ref.fr
	cmp ref.fr mixed.fr
}
