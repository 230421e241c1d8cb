#!/usr/bin/env bats
# Streams over TCP (src/lib/net.c, ovl-frame(5)): a pipeline with TCP links
# writes the bytes of the pipe pipeline; nobody without the run's secret,
# of another run, or speaking anything else gets a byte to a reader; a
# listener without a peer and a connection that never comes end with a
# clear error; a peer killed mid-stream is an error naming it, and the
# checkpoint rules still hold over TCP.

load test_helper

setup() {
	cd "$BATS_TEST_TMPDIR"
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > secret
	chmod 600 secret
	export OVL_SECRET_FILE=$PWD/secret OVL_RUN_ID=t60-$BATS_TEST_NUMBER
	export OVL_CONNECT_TIMEOUT=30
	unset OVL_SECRET OVL_KEEPALIVE OVL_SEND_TIMEOUT OVL_SOCKBUF
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
		sleep 0.05
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
	printf 'source web path=%s\nranks 2\nseq-len 256\ncheckpoint every=4\n' \
	    "$SAMPLES/web/web-0.jsonl" > one.plan
	"$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" > s.fr
	"$OVL_MIX" one.plan web=s.fr > m.fr
	"$OVL_CONSTRUCT" one.plan < m.fr > c.fr
	"$OVL_CKPT" --dir ref -p ref/rank%d one.plan < c.fr
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
