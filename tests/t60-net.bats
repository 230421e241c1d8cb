#!/usr/bin/env bats
# Streams over TCP and UNIX sockets (src/lib/net.c, ovl-frame(5)): a pipeline with TCP links
# writes the bytes of the pipe pipeline; nobody without the run's secret,
# of another run, or speaking anything else gets a byte to a reader; a
# listener without a peer and a connection that never comes end with a
# clear error; a peer killed mid-stream is an error naming it, and the
# checkpoint rules still hold over TCP.

load test_helper
load ckpt/pipeline

setup() {
	cd "$BATS_TEST_TMPDIR"
	net_env t60-$BATS_TEST_NUMBER
	cat > p.plan <<-EOF
	source web path=$SAMPLES/web/web-0.jsonl format=jsonl partitions=2
	source book path=$SAMPLES/books/book-0[0-4].txt doc-per=file
	weights web=1 book=1
	seq-len 256
	ranks 2
	checkpoint every=4
	EOF
	L=tcp-listen:127.0.0.1:0
}

# wait_for FILE [TEXT]: until FILE is not empty (a listener's port file) or
# holds a line with TEXT (30 s at most)
wait_for() {
	local _
	for _ in $(seq 600); do
		if [ $# -eq 1 ]; then
			[ -s "$1" ] && return 0
		else
			grep -qF -- "$2" "$1" 2>/dev/null && return 0
		fi
		nap 0.05
	done
	echo "waited in vain for $1 ${2:-}"; cat "$1" 2>/dev/null
	return 1
}

# free_port: a port nobody listens on now (bound to 0 and released)
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# sources OUTPUT...: one ovl-source per partition of p.plan, in the
# background, the i-th writing to OUTPUT i (3>&-); pids in SRC_PIDS
sources() {
	local name parts p k i=0 list args outs=("$@")
	SRC_PIDS=()
	mapfile -d '' list < <("$OVL_MIX" --list-sources p.plan)
	for ((k = 0; k < ${#list[@]}; k += 4)); do
		name=${list[k]} parts=${list[k+1]}
		mapfile -d '' args < <("$OVL_MIX" --source-args "$name" p.plan)
		for ((p = 0; p < parts; p++)); do
			"$OVL_SOURCE" "${args[@]}" --partition "$p/$parts" \
			    --output "${outs[i]}" 2>> source.err 3>&- &
			SRC_PIDS+=($!)
			i=$((i + 1))
		done
	done
}

# the pipe pipeline's outputs in ref/: sources to files, mix | construct | ckpt
reference() {
	mkdir -p ref
	set -- ref/web.0 ref/web.1 ref/book.0
	sources "$@"
	wait "${SRC_PIDS[@]}"
	"$OVL_MIX" p.plan web=ref/web.0 web=ref/web.1 book=ref/book.0 |
	    "$OVL_CONSTRUCT" p.plan |
	    "$OVL_CKPT" --dir ref/ck -p ref/out/rank%d --format npy -o ref/out/npy p.plan
}

@test "sources, mixer and constructor joined by TCP: the bytes of the pipe pipeline" {
	reference
	# every source -> ovl-mix and ovl-mix -> ovl-construct over TCP,
	# ovl-construct -> ovl-ckpt a pipe
	"$OVL_MIX" -v --output "$L,port-file=port.mix" p.plan \
	    "web=$L,port-file=port.0" "web=$L,port-file=port.1" \
	    "book=$L,port-file=port.2" 2> mix.err 3>&- &
	mix=$!
	wait_for port.0 && wait_for port.1 && wait_for port.2 && wait_for port.mix
	sources "tcp:127.0.0.1:$(cat port.0)" "tcp:127.0.0.1:$(cat port.1)" \
	    "tcp:localhost:$(cat port.2)"
	run -0 bash -c '"$OVL_CONSTRUCT" --input "tcp:127.0.0.1:$1" p.plan |
	    "$OVL_CKPT" --dir ck -p out/rank%d --format npy -o out/npy p.plan' _ "$(cat port.mix)"
	wait "$mix"
	wait "${SRC_PIDS[@]}"
	for f in rank0 rank1 npy.tokens.npy npy.positions.npy npy.cu_seqlens.npy npy.seqs.npy; do
		cmp "ref/out/$f" "out/$f"
	done
	grep -q "peer 127.0.0.1:[0-9]* on tcp-listen:127.0.0.1:$(cat port.0): authenticated" mix.err
	! grep -q refused mix.err source.err || false
}

@test "construct to ckpt and per-rank streams over TCP, IPv4 and IPv6: the bytes of the files" {
	rank_refs
	# rank streams listen on every address: rank 1's reader comes over IPv6
	host6=127.0.0.1
	python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' \
	    2> /dev/null && host6='[::1]'
	"$OVL_CKPT" -v --dir ck --input "$L,port-file=port.in" \
	    -p "tcp-listen::0,port-file=port.%d" one.plan 2> ckpt.err 3>&- &
	ckpt=$!
	wait_for port.in
	"$OVL_CONSTRUCT" --output "tcp:127.0.0.1:$(cat port.in)" one.plan < m.fr 3>&- &
	con=$!
	wait_for port.0
	"$OVL_TEST_TOOL" net-cat "tcp:127.0.0.1:$(cat port.0)" got0 3>&- &
	r0=$!
	wait_for port.1
	run -0 "$OVL_TEST_TOOL" net-cat "tcp:$host6:$(cat port.1)" got1
	wait "$r0"
	wait "$con"
	wait "$ckpt"
	cmp got0 ref/rank0
	cmp got1 ref/rank1
	grep -q "peer .* on tcp-listen::$(cat port.1): authenticated" ckpt.err
	# the end of the run is recorded once both readers took every byte
	run -0 "$OVL_CKPT" show --list ck
	[[ "${lines[-1]}" == *" end" ]]
}

@test "construct to ckpt and per-rank streams over UNIX sockets: the bytes of the files; sockets of mode 0600, gone with their listeners" {
	one_stream
	"$OVL_CKPT" --dir ref -p ref/rank%d one.plan < ref.fr
	"$OVL_CKPT" -v --dir ck --input "unix-listen:$PWD/in.sock" \
	    -p "unix-listen:$PWD/r%d.sock" one.plan 2> ckpt.err 3>&- &
	ckpt=$!
	"$OVL_CONSTRUCT" --output "unix:$PWD/in.sock" one.plan < m.fr 3>&- &
	con=$!
	# the rank 0 reader retries until its socket is there
	"$OVL_TEST_TOOL" net-cat "unix:$PWD/r0.sock" got0 3>&- &
	r0=$!
	for _ in $(seq 600); do [ -S r1.sock ] && break; nap 0.05; done
	[ "$(stat -c %a r1.sock)" = 600 ]
	run -0 "$OVL_TEST_TOOL" net-cat "unix:$PWD/r1.sock" got1
	wait "$r0"
	wait "$con"
	wait "$ckpt"
	cmp got0 ref/rank0
	cmp got1 ref/rank1
	grep -q "peer local on unix-listen:$PWD/r1.sock: authenticated" ckpt.err
	[ ! -e in.sock ] && [ ! -e r0.sock ] && [ ! -e r1.sock ]
	# a file that is not a socket is never replaced
	: > r0.sock
	run -2 "$OVL_TEST_TOOL" net-cat "unix-listen:$PWD/r0.sock" x
	[[ "$output" == *"'$PWD/r0.sock' exists and is not a socket"* ]]
}

# one.plan, its mixed stream m.fr and what ovl-construct makes of it (ref.fr)
one_stream() {
	printf 'source web path=%s\nranks 2\nseq-len 256\ncheckpoint every=4\n' \
	    "$SAMPLES/web/web-0.jsonl" > one.plan
	"$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" > s.fr
	"$OVL_MIX" one.plan web=s.fr > m.fr
	"$OVL_CONSTRUCT" one.plan < m.fr > ref.fr
}

# one_stream, with ovl-construct's stream as c.fr and each rank's stream
# written to the files ref/rank0 and ref/rank1
rank_refs() {
	one_stream
	mv ref.fr c.fr
	"$OVL_CKPT" --dir ref -p ref/rank%d one.plan < c.fr
}

# stop_sink PID: a SIGTERM to a sink that waits for its readers: exit 143
stop_sink() {
	local st=0
	kill -TERM "$1"
	wait "$1" || st=$?
	[ "$st" -eq 143 ]
}

# rank_digests A B: the steps RankDataset gives from stream A and from
# stream B (a file) are the same, and there are some (torch loaded once)
rank_digests() {
	"$PY" - "$@" <<-'EOF'
	import hashlib, sys
	from overlord import torch as otorch
	def digest(src):
	    h, n = hashlib.sha256(), 0
	    ds = otorch.RankDataset(src)
	    for item in ds:
	        n += 1
	        for k in sorted(item):
	            v = item[k]
	            h.update(k.encode())
	            h.update(v.numpy().tobytes() if hasattr(v, "numpy") else repr(v).encode())
	    ds.close()
	    return n, h.hexdigest()
	a, b = digest(sys.argv[1]), digest(sys.argv[2])
	sys.exit(0 if a == b and a[0] > 0 else "%r != %r" % (a, b))
	EOF
}

@test "UNIX sockets without a secret: readers of this user (ovl's, RankDataset) go by their credentials; TCP still needs the secret" {
	PY=$(ovl_python_numpy) || skip "no python3 with numpy"
	"$PY" -c 'import torch' 2>/dev/null || skip "no torch"
	export PYTHONPATH="$OVL_SRCDIR/python" OVL_CRC_LIB="$OVL_BUILDDIR/python/libovlcrc.so"
	one_stream
	"$OVL_CKPT" --dir ref -p ref/rank%d one.plan < ref.fr
	unset OVL_SECRET_FILE
	"$OVL_CKPT" -v --dir ck -p "unix-listen:$PWD/r%d.sock" one.plan < ref.fr 2> ckpt.err 3>&- &
	ckpt=$!
	"$OVL_TEST_TOOL" net-cat "unix:$PWD/r0.sock" got0 3>&- &
	r0=$!
	run -0 rank_digests "unix:$PWD/r1.sock" ref/rank1
	wait "$r0"
	wait "$ckpt"
	cmp got0 ref/rank0
	grep -q "peer local on unix-listen:$PWD/r0.sock: authenticated" ckpt.err
	grep -q "peer local on unix-listen:$PWD/r1.sock: authenticated" ckpt.err
	run -2 --separate-stderr "$OVL_TEST_TOOL" net-cat "tcp:127.0.0.1:9" x
	[ "$stderr" = "ovl-test-tool: 'tcp:127.0.0.1:9' needs the run's secret: --secret-file FILE, OVL_SECRET_FILE or OVL_SECRET" ]
}

@test "UNIX sockets: a side with a secret and one without refuse each other, naming why; another user's reader is refused" {
	one_stream
	# the sink has the secret, the reader none
	"$OVL_CKPT" --dir ck -p "unix-listen:$PWD/r%d.sock" one.plan < ref.fr 2> ckpt.err 3>&- &
	ckpt=$!
	run -2 --separate-stderr env -u OVL_SECRET_FILE "$OVL_TEST_TOOL" net-cat "unix:$PWD/r0.sock" x
	[[ "$stderr" == *"unix:$PWD/r0.sock refused: it proves the run's secret and this side has none (--secret-file, OVL_SECRET_FILE or OVL_SECRET)" ]]
	wait_until 30 grep -q "refused peer local: it has no secret (it goes by its user's credentials): give it the run's secret too, or this side none" ckpt.err
	stop_sink "$ckpt"
	# the sink has none, the reader the secret
	rm -rf ck
	env -u OVL_SECRET_FILE "$OVL_CKPT" --dir ck -p "unix-listen:$PWD/r%d.sock" one.plan < ref.fr 2> ckpt.err 3>&- &
	ckpt=$!
	run -2 --separate-stderr "$OVL_TEST_TOOL" net-cat "unix:$PWD/r0.sock" x
	[[ "$stderr" == *"unix:$PWD/r0.sock refused: it has no secret (it goes by its user's credentials): give it the run's secret too, or this side none" ]]
	wait_until 30 grep -q "refused peer local: it proves the run's secret and this side has none" ckpt.err
	# a reader of another user, let through the socket's mode and the
	# directories (the socket by an O_PATH descriptor): refused by its uid
	if [ "$(id -u)" -eq 0 ] && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null &&
	    PY=$(ovl_python_numpy); then
		chmod 666 r0.sock
		run -1 --separate-stderr "$PY" -c '
import os, subprocess, sys
fd = os.open(sys.argv[1], os.O_PATH)
sys.exit(subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                         "env", "-u", "OVL_SECRET_FILE", "OVL_CONNECT_TIMEOUT=1", sys.argv[2], "net-cat",
                         "unix:/proc/self/fd/%d" % fd, "/dev/null"], pass_fds=[fd]).returncode)' \
		    "$PWD/r0.sock" "$OVL_TEST_TOOL"
		[[ "$stderr" == *"cannot connect to unix:/proc/self/fd/"*" within 1 s (--connect-timeout): "* ]]
		wait_until 30 grep -q "refused peer local: it is of uid 65534, not this user's (0), and there is no secret" ckpt.err
	else
		echo "# (no other user to try: not root, or no setpriv)" >&3
	fi
	stop_sink "$ckpt"
}

@test "ovl-run --run-ahead over UNIX sockets without a secret: a paused trainer holds the sink within N steps, never more; it reads on, the bytes of the files" {
	PY=$(ovl_python_numpy) || skip "no python3 with numpy"
	export PYTHONPATH="$OVL_SRCDIR/python"
	rank_refs
	unset OVL_SECRET_FILE
	echo "output format=frames per-rank=unix-listen:$PWD/r%d.sock" >> one.plan
	"$PY" "$OVL_SRCDIR/tests/helper/pause-reader.py" "unix:$PWD/r0.sock" 10 at go got0 3>&- &
	r0=$!
	"$OVL_TEST_TOOL" net-cat "unix:$PWD/r1.sock" got1 3>&- &
	r1=$!
	"$OVL_RUN" -q --run-ahead 5 -c ck -d run one.plan 2> err 3>&- &
	pid=$!
	wait_until 60 test -e at
	wait_until 60 pgrep -P "$pid" -f "ovl-ckpt " > /dev/null
	ck=$(pgrep -P "$pid" -f "ovl-ckpt ")
	# the reader took step 10 and reads no more: the sink waits on it
	# before step 16 at the latest (a UNIX socket counts the kernel's
	# buffers too: it may wait a step or two early)
	wait_until 60 waits_in "$ck" poll
	n=$("$OVL_CKPT" show --print0 ck | tr '\0' '\n' | sed -n '/^step$/{n;p}')
	[ "$n" -le 16 ] || { echo "checkpoint at step $n"; false; }
	touch go
	wait "$pid" || { cat err; false; }
	wait "$r0"
	wait "$r1"
	cmp got0 ref/rank0
	cmp got1 ref/rank1
}

@test "refused and logged, never read: garbage, a raw stream, a wrong secret, another run, a second reader" {
	one_stream
	"$OVL_CONSTRUCT" --input "$L,port-file=port" one.plan > got.fr 2> c.err 3>&- &
	con=$!
	wait_for port
	P=$(cat port)
	# bytes that are no greeting (bash's /dev/tcp), then a whole valid
	# stream without the handshake (python3)
	(exec 5> "/dev/tcp/127.0.0.1/$P" && printf 'garbage\n' >&5) 3>&-
	wait_for c.err "refused peer 127.0.0.1:"
	python3 - "$P" <<-'PY' 3>&-
	import socket, sys
	s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
	try:
	    s.sendall(open("m.fr", "rb").read())
	    s.recv(1)
	except OSError:
	    pass
	PY
	# a writer with another secret (from the environment), of another
	# run, and a second reader: each stops with status 2
	run -2 --separate-stderr env -u OVL_SECRET_FILE OVL_SECRET=another-secret-of-20-bytes \
	    "$OVL_TEST_TOOL" net-cat m.fr "tcp:127.0.0.1:$P"
	[[ "$stderr" == "ovl-test-tool: tcp:127.0.0.1:$P refused: "* ]]
	run -2 --separate-stderr "$OVL_MIX" --run-id other-run --output "tcp:127.0.0.1:$P" one.plan web=s.fr
	[ "$stderr" = "ovl-mix: tcp:127.0.0.1:$P refused: it is of run '$OVL_RUN_ID', not 'other-run' (--run-id)" ]
	run -2 --separate-stderr "$OVL_CKPT" --dir ck2 --input "tcp:127.0.0.1:$P"
	[ "$stderr" = "ovl-ckpt: tcp:127.0.0.1:$P refused: it reads the stream too" ]
	# the listener is still waiting: the run's writer gets through
	run -0 "$OVL_TEST_TOOL" net-cat m.fr "tcp:127.0.0.1:$P"
	wait "$con"
	cmp got.fr ref.fr
	# one line per refused peer, each naming it, in order
	grep 'refused peer' c.err | sed 's/peer 127.0.0.1:[0-9]*/peer PEER/' > refused
	cat > want <<-EOF
	ovl-construct: tcp-listen:127.0.0.1:$P: refused peer PEER: not an overlord peer (it sent no greeting but 8 other bytes)
	ovl-construct: tcp-listen:127.0.0.1:$P: refused peer PEER: not an overlord peer (it sent no greeting but 44 other bytes)
	ovl-construct: tcp-listen:127.0.0.1:$P: refused peer PEER: a wrong proof (another secret)
	ovl-construct: tcp-listen:127.0.0.1:$P: refused peer PEER: it is of run 'other-run', not '$OVL_RUN_ID' (--run-id)
	ovl-construct: tcp-listen:127.0.0.1:$P: refused peer PEER: it reads the stream too
	EOF
	diff want refused
}

@test "the secret: a file others can read is refused, none at all too, short ones too; OVL_SECRET works" {
	one_stream
	cp secret open.secret
	chmod 644 open.secret
	run -2 --separate-stderr "$OVL_CONSTRUCT" --secret-file open.secret --input "$L" one.plan
	[ "$stderr" = "ovl-construct: secret file 'open.secret' has mode 0644: it must be readable by its owner only (chmod 600)" ]
	run -2 --separate-stderr env OVL_SECRET_FILE=open.secret "$OVL_SOURCE" \
	    --output tcp:127.0.0.1:9 web "$SAMPLES/web/web-0.jsonl"
	[[ "$stderr" == *"has mode 0644"* ]]
	run -2 --separate-stderr env -u OVL_SECRET_FILE "$OVL_MIX" --output tcp:127.0.0.1:9 one.plan web=s.fr
	[ "$stderr" = "ovl-mix: 'tcp:127.0.0.1:9' needs the run's secret: --secret-file FILE, OVL_SECRET_FILE or OVL_SECRET" ]
	run -2 --separate-stderr env -u OVL_SECRET_FILE OVL_SECRET=short "$OVL_MIX" --output tcp:127.0.0.1:9 one.plan web=s.fr
	[ "$stderr" = "ovl-mix: the secret in OVL_SECRET has 5 bytes: it needs 16 to 4096" ]
	for bad in tcp:host-without-port tcp::7000 tcp:127.0.0.1:0 tcp-listen:1.2.3.4:70000 \
	    tcp:[::1 'tcp-listen::0,colour=blue' unix: unix-listen: "unix:/$(printf 'x%.0s' {1..120})"; do
		run -2 --separate-stderr "$OVL_CONSTRUCT" --input "$bad" one.plan
		[[ "$stderr" == "ovl-construct: bad endpoint '$bad' (tcp:HOST:PORT, tcp-listen:[HOST]:PORT[,port-file=FILE][,from=HOST], unix:PATH or unix-listen:PATH)" ]]
	done
	# the secret from the environment, on both sides
	export OVL_SECRET="$(cat secret)"
	unset OVL_SECRET_FILE
	"$OVL_CONSTRUCT" --input "$L,port-file=port" one.plan > got.fr 3>&- &
	wait_for port
	run -0 "$OVL_TEST_TOOL" net-cat m.fr "tcp:127.0.0.1:$(cat port)"
	wait $!
	cmp got.fr ref.fr
}

@test "nobody comes: a listener ends with status 1 after --connect-timeout, a connection too" {
	one_stream
	run -1 --separate-stderr "$OVL_CONSTRUCT" --connect-timeout 1 \
	    --input "tcp-listen:127.0.0.1:0,port-file=port" one.plan
	[ "$stderr" = "ovl-construct: no peer on tcp-listen:127.0.0.1:$(cat port) within 1 s (--connect-timeout)" ]
	P=$(free_port)
	run -1 --separate-stderr env OVL_CONNECT_TIMEOUT=0.5 "$OVL_MIX" \
	    --output "tcp:127.0.0.1:$P" one.plan web=s.fr
	[ "$stderr" = "ovl-mix: cannot connect to tcp:127.0.0.1:$P within 0.5 s (--connect-timeout): Connection refused" ]
	# a listener that saw only refused peers says so
	"$OVL_CKPT" --connect-timeout 2 --dir ck --input "$L,port-file=port2" 2> ck.err 3>&- &
	ck=$!
	wait_for port2
	run -2 env OVL_RUN_ID=x "$OVL_TEST_TOOL" net-cat m.fr "tcp:127.0.0.1:$(cat port2)"
	st=0
	wait "$ck" || st=$?
	[ "$st" -eq 1 ]
	[ "$(tail -n 1 ck.err)" = "ovl-ckpt: no peer on tcp-listen:127.0.0.1:$(cat port2) within 2 s (--connect-timeout), only peers that were refused" ]
}

@test "a SIGTERM to ovl-ckpt while its input's listener waits for a writer stops it at once (exit 143), not at the connect timeout" {
	"$OVL_CKPT" --connect-timeout 600 --dir ck --input "$L,port-file=port" 2> ck.err 3>&- &
	ck=$!
	wait_for port
	kill -TERM "$ck"
	st=0
	wait "$ck" || st=$?
	[ "$st" -eq 143 ] || { echo "exit $st"; cat ck.err; false; }
	grep -q "stopped at checkpoint" ck.err
}

@test "the connecting side starts first and retries until the listener appears" {
	one_stream
	"$OVL_CKPT" --dir ref -p ref/rank%d one.plan < ref.fr
	P=$(free_port)
	"$OVL_CONSTRUCT" -v --output "tcp:127.0.0.1:$P" one.plan < m.fr 2> c.err 3>&- &
	con=$!
	# it has tried (and been refused) before the listener exists
	wait_for c.err "waiting for tcp:127.0.0.1:$P: Connection refused"
	run -0 "$OVL_CKPT" --dir ck -p out/rank%d --input "tcp-listen:127.0.0.1:$P" one.plan
	wait "$con"
	cmp out/rank0 ref/rank0
	cmp out/rank1 ref/rank1
	grep -q "connected to tcp:127.0.0.1:$P" c.err
}

# tcp_start PLAN RESUMEFILE: every stage of PLAN joined by TCP (sources to
# ovl-mix, ovl-mix to ovl-construct, ovl-construct to ovl-ckpt; outputs in
# out/), started with the options of RESUMEFILE (restore's lines, or "") in
# the background; pids in PID[role]
declare -gA PID RC
tcp_start() {
	local plan=$1 resume=$2 name parts p k i=0 list args inputs=()
	rm -f port.*
	PID=()
	mapfile -d '' list < <("$OVL_MIX" --list-sources "$plan")
	for ((k = 0; k < ${#list[@]}; k += 4)); do
		for ((p = 0; p < list[k+1]; p++)); do
			inputs+=("${list[k]}=$L,port-file=port.in$i")
			i=$((i + 1))
		done
	done
	pl_opts "$resume" ckpt
	"$OVL_CKPT" --dir ck -p out/rank%d --format npy -o out/npy \
	    --input "$L,port-file=port.ckpt" "${PL_OPTS[@]}" "$plan" 2>> ckpt.err 3>&- &
	PID[ckpt]=$!
	pl_opts "$resume" mix
	"$OVL_MIX" "${PL_OPTS[@]}" --output "$L,port-file=port.mix" "$plan" \
	    "${inputs[@]}" 2>> mix.err 3>&- &
	PID[mix]=$!
	wait_for port.ckpt && wait_for port.mix
	pl_opts "$resume" construct
	"$OVL_CONSTRUCT" "${PL_OPTS[@]}" --input "tcp:127.0.0.1:$(cat port.mix)" \
	    --output "tcp:127.0.0.1:$(cat port.ckpt)" "$plan" 2>> construct.err 3>&- &
	PID[construct]=$!
	i=0
	for ((k = 0; k < ${#list[@]}; k += 4)); do
		name=${list[k]} parts=${list[k+1]}
		mapfile -d '' args < <("$OVL_MIX" --source-args "$name" "$plan")
		for ((p = 0; p < parts; p++)); do
			wait_for "port.in$i"
			pl_opts "$resume" "source:$name:$p/$parts"
			"$OVL_SOURCE" "${args[@]}" --partition "$p/$parts" "${PL_OPTS[@]}" \
			    --output "tcp:127.0.0.1:$(cat "port.in$i")" 2>> source.err 3>&- &
			PID["source:$name:$p/$parts"]=$!
			i=$((i + 1))
		done
	done
}

# tcp_wait: every stage ends by itself within 60 s (else: killed, and the
# test fails); statuses in RC[role]
tcp_wait() {
	local role _ alive
	for _ in $(seq 1200); do
		alive=0
		for role in "${!PID[@]}"; do
			kill -0 "${PID[$role]}" 2>/dev/null && alive=1
		done
		[ "$alive" -eq 0 ] && break
		nap 0.05
	done
	for role in "${!PID[@]}"; do
		[ "$alive" -eq 0 ] || kill -KILL "${PID[$role]}" 2>/dev/null || true
		wait "${PID[$role]}" && RC[$role]=0 || RC[$role]=$?
	done
	[ "$alive" -eq 0 ] || { echo "stages hung"; cat ./*.err; return 1; }
}

# every stage ended well (a repeating source may end by SIGPIPE at the stop)
tcp_all_ok() {
	local role
	for role in "${!RC[@]}"; do
		[ "${RC[$role]}" -eq 0 ] || { [[ $role == source:* ]] && [ "${RC[$role]}" -eq 141 ]; } ||
		    { echo "$role: ${RC[$role]}"; cat ./*.err; return 1; }
	done
}

# kill_resume ROLE: run k.plan over TCP with small socket buffers, SIGKILL
# ROLE once the run has committed a checkpoint while its throttled sources
# still feed the mixer, let the others end by themselves, restore, resume over TCP: the
# reference's bytes. (The mark is the log's checkpoint count with the mixer
# alive, not the log's size: a stage can write its whole output into socket
# and reader buffers long before the checkpoint log catches up, and then
# the run completes without it.)
kill_resume() {
	local role=$1 rc _ n try
	for try in 1 2 3 4 5; do
		rm -rf ck out ./*.err
		OVL_SOCKBUF=16K tcp_start k.plan ""
		n=0
		for _ in $(seq 3000); do
			kill -0 "${PID[mix]}" 2>/dev/null || break
			n=$("$OVL_CKPT" show --print0 ck 2>>show.err | tr '\0' '\n' | sed -n 2p)
			[ "${n:-0}" -ge 1 ] && break
			nap 0.01
		done
		if [ "${n:-0}" -ge 1 ] && kill -0 "${PID[mix]}" 2>/dev/null; then
			kill -KILL "${PID[$role]}"
			break
		fi
		tcp_wait || true
		[ "$try" -lt 5 ] || { echo "the mixer ended before the first checkpoint ($n)"; tail -3 show.err; return 1; }
	done
	tcp_wait
	cp mix.err first-mix.err; cp construct.err first-construct.err; cp ckpt.err first-ckpt.err
	rc=0
	pl_restore ck resume.lines || rc=$?
	[ "$rc" -eq 0 ]
	tcp_start k.plan resume.lines
	tcp_wait
	tcp_all_ok
	same_as_reference
	"$OVL_CKPT" verify ck out/rank0 out/rank1 out/npy.tokens.npy > /dev/null
}

@test "a peer killed mid-stream is an error naming it; restore and resume over TCP: byte-identical" {
	sed -e 's/partitions=2$/partitions=2 on-exhaust=repeat throttle=300K/' \
	    -e 's/^source book .*/& on-exhaust=repeat/' p.plan > k.plan
	echo 'stop tokens=2M' >> k.plan
	mkdir ref
	(cd ref && pl_start ../k.plan ck "" -p out/rank%d --format npy -o out/npy &&
	    pl_wait && pl_all_ok)
	# ovl-construct killed: its reader (ovl-ckpt) and writer (ovl-mix) say whom they lost
	kill_resume construct
	[ "${RC[construct]}" -eq 0 ]
	grep -q "^ovl-ckpt: 'peer 127.0.0.1:[0-9]* on tcp-listen:127.0.0.1:[0-9]*': truncated stream" first-ckpt.err
	grep -q "^ovl-mix: the reader of 'peer 127.0.0.1:[0-9]* on tcp-listen:127.0.0.1:[0-9]*' went away" first-mix.err
	# a source killed: ovl-mix names the partition and its peer
	kill_resume source:web:0/2
	grep -q "^ovl-mix: input web=tcp-listen:127.0.0.1:0,port-file=port.in0: 'peer 127.0.0.1:[0-9]* on tcp-listen:127.0.0.1:[0-9]*': truncated stream .*(its writer failed)" first-mix.err
	grep -q "^ovl-construct: 'tcp:127.0.0.1:[0-9]*': truncated stream" first-construct.err
}

@test "the TCP example of ovl-frame(5) runs as written" {
	n=$(man_examples ovl-frame.5 "$BATS_TEST_TMPDIR")
	grep -q 'tcp-listen' "ex.$n.sh"
	mkdir -p bin w
	for t in source construct; do ln -s "$OVL_BUILDDIR/ovl-$t" "bin/ovl-$t"; done
	ln -s "$SAMPLES" w/samples
	unset OVL_SECRET_FILE OVL_RUN_ID
	(cd w && PATH="$BATS_TEST_TMPDIR/bin:$PATH" bash -e "../ex.$n.sh" 3>&-)
	(cd w && "$OVL_SOURCE" web samples/web/*.jsonl* | "$OVL_CONSTRUCT" --seq-len 256) > want
	cmp want w/seqs.frames
	[ "$(stat -c %a w/secret)" = 600 ]
}

@test "a rank's TCP reader that goes away is an error naming its peer; the end of the run is not recorded" {
	one_stream
	"$OVL_CKPT" --dir ck -p "$L,port-file=port.%d" one.plan < ref.fr 2> ck.err 3>&- &
	ck=$!
	wait_for port.0
	# rank 0's reader takes 100 bytes and leaves; rank 1's reads all
	("$OVL_TEST_TOOL" net-cat "tcp:127.0.0.1:$(cat port.0)" - | head -c 100 > /dev/null) 3>&- &
	wait_for port.1
	"$OVL_TEST_TOOL" net-cat "tcp:127.0.0.1:$(cat port.1)" got1 2> /dev/null 3>&- &
	st=0
	wait "$ck" || st=$?
	wait
	[ "$st" -eq 1 ]
	grep -q "^ovl-ckpt: rank0: the reader of 'peer 127.0.0.1:[0-9]* on tcp-listen:127.0.0.1:$(cat port.0)' went away" ck.err
	mapfile -d '' st < <("$OVL_CKPT" show --print0 ck)
	[ "${st[1]}" -eq 0 ] || [ "${st[9]}" = 0 ]
}

@test "ovl-mix --reopen takes the next authenticated writer of a TCP input; repeated documents are dropped" {
	one_stream
	"$OVL_MIX" -v --reopen --stats st.json one.plan "web=$L,port-file=port" > got.fr 2> mix.err 3>&- &
	mix=$!
	wait_for port
	# a slow writer, killed mid-stream, then one that starts over
	"$OVL_SOURCE" --throttle 50K --output "tcp:127.0.0.1:$(cat port)" web \
	    "$SAMPLES/web/web-0.jsonl" 2> /dev/null 3>&- &
	slow=$!
	wait_for mix.err "authenticated"
	kill -KILL "$slow"
	wait_for mix.err "waiting for a new writer"
	run -0 "$OVL_SOURCE" --output "tcp:127.0.0.1:$(cat port)" web "$SAMPLES/web/web-0.jsonl"
	wait "$mix"
	cmp got.fr m.fr
	grep -q "truncated stream" mix.err
	[ "$(grep -c ': authenticated' mix.err)" -eq 2 ]
}

@test "ovl-mix --reopen: a writer that dies after the handshake, before its META, leaves the output as the pipe's" {
	one_stream
	"$OVL_MIX" -v --reopen one.plan "web=$L,port-file=port" > got.fr 2> mix.err 3>&- &
	mix=$!
	wait_for port
	# a writer that passes the handshake and ends without a byte of stream
	# (overlord/net.py alone: the standard library, no numpy)
	run -0 python3 - "$(cat port)" "$OVL_SRCDIR/python/overlord/net.py" <<-'PY'
	import importlib.util, socket, sys
	spec = importlib.util.spec_from_file_location("net", sys.argv[2])
	net = importlib.util.module_from_spec(spec)
	spec.loader.exec_module(net)
	s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
	net.handshake(s, net.load_secret(None, None), role=b"W")
	s.close()
	PY
	wait_for mix.err "waiting for a new writer"
	run -0 "$OVL_SOURCE" --output "tcp:127.0.0.1:$(cat port)" web "$SAMPLES/web/web-0.jsonl"
	wait "$mix"
	cmp got.fr m.fr
}

@test "rank streams served to trainer hosts (--trainer-hosts, the plan's hosts trainers=): a peer from another host is refused and logged" {
	rank_refs
	# rank 0 is for the trainer host 127.0.0.3, rank 1 for 127.0.0.1
	# (loopback addresses: this machine has every one of 127/8)
	echo 'hosts trainers=127.0.0.3,127.0.0.1' >> one.plan
	"$OVL_CKPT" -v --dir ck -p "tcp-listen:127.0.0.1:0,port-file=port.%d" \
	    one.plan < c.fr 2> ckpt.err 3>&- &
	ckpt=$!
	wait_for port.0
	# from 127.0.0.1 to rank 0: refused before any handshake, logged
	# (the connecting side sees a closed connection and retries, until
	# its --connect-timeout)
	OVL_CONNECT_TIMEOUT=1 run -1 "$OVL_TEST_TOOL" net-cat "tcp:127.0.0.1:$(cat port.0)" bad
	wait_for ckpt.err "not from 127.0.0.3"
	[ ! -s bad ]
	# from 127.0.0.3: the stream of rank 0
	python3 - "$(cat port.0)" "$OVL_SRCDIR/python/overlord/net.py" 3>&- <<-'PY' &
	import importlib.util, socket, sys
	spec = importlib.util.spec_from_file_location("net", sys.argv[2])
	net = importlib.util.module_from_spec(spec)
	spec.loader.exec_module(net)
	s = socket.socket()
	s.bind(("127.0.0.3", 0))
	s.connect(("127.0.0.1", int(sys.argv[1])))
	net.handshake(s, net.load_secret(None, None), role=b"R")
	with open("got0", "wb") as f:
	    while True:
	        b = s.recv(1 << 16)
	        if not b:
	            break
	        f.write(b)
	PY
	r0=$!
	wait_for port.1
	run -0 "$OVL_TEST_TOOL" net-cat "tcp:127.0.0.1:$(cat port.1)" got1
	wait "$r0"
	wait "$ckpt"
	cmp got0 ref/rank0
	cmp got1 ref/rank1
	grep -q "refused peer 127.0.0.1:[0-9]*: not from 127.0.0.3 (from=)" ckpt.err
	# the option says the same; it is for tcp-listen: rank streams only
	run -2 "$OVL_CKPT" --dir ck2 -p 'r%d' --trainer-hosts a,b one.plan < c.fr
	grep -q "trainer-hosts is for rank streams" <<< "$output"
	run -2 "$OVL_CKPT" --dir ck2 -p 'tcp-listen::0' --trainer-hosts 'a,,b' one.plan < c.fr
}
