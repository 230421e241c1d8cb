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
