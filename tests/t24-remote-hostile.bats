#!/usr/bin/env bats
# Remote inputs that change or lie (src/lib/remote.c): a small lying HTTP
# server (tests/helper/lying-server.py) serves two versions of one object of
# the same size. Nothing of another version, and no error page, is ever
# taken as data: the run fails naming the URL, exit 1.

load test_helper
source "$OVL_SRCDIR/tests/helper/remote.bash"

setup() {
	T=$BATS_TEST_TMPDIR
	unset OVL_REMOTE_RETRIES OVL_REMOTE_RETRY_WAIT OVL_REMOTE_TIMEOUT
	# two versions of the same size, documents told apart by their text
	for v in 1 2; do
		for i in $(seq 1 400); do
			printf '{"text":"version %d document %03d"}\n' "$v" "$i"
		done > "$T/v$v.jsonl"
	done
}

teardown() {
	remote_pid_stop "$T/srv.pid"
}

lying_start() {
	/usr/bin/python3 "$OVL_SRCDIR/tests/helper/lying-server.py" "$1" \
	    "$T/v1.jsonl" "$T/v2.jsonl" "$T/srv.port" 2> "$T/srv.err" 3>&- &
	echo $! > "$T/srv.pid"
	remote_wait_file "$T/srv.port"
	URL=http://127.0.0.1:$(cat "$T/srv.port")/obj.jsonl
}

@test "remote-hostile: an object that changes between two reads is an error naming the URL, never spliced" {
	lying_start change
	run -1 "$OVL_SOURCE" --json --retry-wait 0.01 x "$URL" --output "$T/out"
	[[ $output == *"'$URL' changed while reading"* ]]
	! grep -q "version 2" "$T/out"
}

@test "remote-hostile: a range request answered by 200 with a short page is refused, not taken as data" {
	lying_start errpage
	run -1 "$OVL_SOURCE" --json --retry-wait 0.01 x "$URL" --output "$T/out"
	[[ $output == *"'$URL': the server answered a range request with"*"not the whole object"* ]]
	! grep -q "Service" "$T/out"
}

@test "remote-hostile: an object of another version at a later chunk's open is an error, not the next version's documents" {
	# 12000 documents (430 KB), chunks of 16K: the run blocks on its
	# FIFO (1 MiB) some chunks in; the object changes then, before the
	# next chunk opens
	for v in 1 2; do
		awk -v v="$v" 'BEGIN { for (i = 1; i <= 12000; i++)
		    printf "{\"text\":\"version %d document %05d\"}\n", v, i }' \
		    > "$T/v$v.jsonl"
	done
	lying_start flip
	mkfifo "$T/fifo"
	"$OVL_SOURCE" --json --text --chunk-size 16K x "$URL" --output "$T/fifo" \
	    2> "$T/err" 3>&- &
	pid=$!
	exec 4< "$T/fifo"
	read -r first <&4
	: > "$T/srv.port.flip"
	cat <&4 > "$T/out"
	exec 4<&-
	run -1 wait "$pid"
	[[ $first == *'"text":"version 1 document 00001"'* ]]
	grep -q "'$URL': .*the object changed (version \"v1\", now \"v2\") since it was listed" "$T/err"
	! grep -q "version 2" "$T/out"
}

@test "remote-hostile: a 206 whose body is shorter than its Content-Range is refused, never spliced" {
	# as text, the page would be documents, exit 0
	lying_start badrange
	run -1 "$OVL_SOURCE" --json --text --format text --retry-wait 0.01 x \
	    "$URL" --output "$T/out"
	[[ $output == *"'$URL': the server answered bytes 0-"*" with 46 bytes"* ]]
	! grep -q "Service" "$T/out"
}

@test "remote-hostile: a HEAD that under-reports the size, with a server that ignores Range, is an error, not a lost document" {
	# as text, 1000 bytes would be lost at the end, exit 0
	lying_start underhead
	run -1 "$OVL_SOURCE" --json --text --format text --retry-wait 0.01 x \
	    "$URL" --output "$T/out"
	[[ $output == *"'$URL': "*"the object is longer than its $(($(stat -c %s "$T/v1.jsonl") - 1000)) bytes (from HEAD)"* ]]
}
