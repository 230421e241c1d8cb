#!/usr/bin/env bats
# Object storage: ovl-source reads http:// and s3:// paths (src/lib/remote.c)
# from real servers on loopback: nginx (Debian) with ranges, and s3rver
# (npm, installed once per machine: npm_ref s3). A fault
# proxy (tests/helper/fault-proxy.py) resets connections, answers 503 and
# 429, cuts bodies short and checks SigV4 signatures with code of its own;
# nginx is also killed mid-file and restarted. Every output equals the
# local run's, frame for frame (the META frame names the files, so it is
# left out of the comparison). Without nginx, or without npm and network
# for s3rver, the tests that need them skip, saying so.

load test_helper
source "$OVL_SRCDIR/tests/helper/remote.bash"

NPM_S3="$OVL_NPM_CACHE/npm-s3"

setup_file() {
	local d=$BATS_FILE_TMPDIR w f
	w=$d/www
	mkdir -p "$w/web" "$w/books" "$w/code" "$w/wds" "$w/big" "$w/parquet"
	cp "$SAMPLES"/web/* "$w/web/"
	cp "$SAMPLES"/parquet/*.parquet "$w/parquet/"
	cp "$SAMPLES"/books/book-0[0-3].txt "$w/books/"
	cp "$SAMPLES"/code/code.tar.zst "$w/code/"
	cp "$SAMPLES"/wds/*.tar "$w/wds/"
	cp "$SAMPLES"/lines.txt.gz "$w/"
	# a larger plain file: cut into chunks, long enough to kill a server
	# in the middle of it at 1 MB/s
	for f in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do
		cat "$SAMPLES"/web/web-0.jsonl "$SAMPLES"/web/web-1.jsonl
	done > "$w/big/big.jsonl"
	if [ -n "$(remote_nginx_bin)" ] && command -v curl >/dev/null 2>&1; then
		remote_nginx_start "$d/nginx" "$w" || echo "nginx did not start" > "$d/nginx.failed"
	fi
	if command -v node >/dev/null 2>&1 && npm_ref s3 s3rver@3 >/dev/null &&
	    remote_s3_start "$NPM_S3" "$d/s3"; then
		echo "$S3_PID" > "$d/s3.pid"
		for f in web/web-0.jsonl web/web-1.jsonl web/web-2.jsonl.zst \
		    books/book-00.txt books/book-01.txt books/book-02.txt \
		    books/book-03.txt code/code.tar.zst parquet/web-1.parquet; do
			remote_s3_put "$w/$f" "$f" || echo "upload $f" > "$d/s3.failed"
		done
	fi
	export NGINX_PORT S3_PORT
}

teardown_file() {
	remote_nginx_stop "$BATS_FILE_TMPDIR/nginx"
	remote_pid_stop "$BATS_FILE_TMPDIR/s3.pid"
}

setup() {
	W=$BATS_FILE_TMPDIR/www
	T=$BATS_TEST_TMPDIR
	unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE \
	    AWS_SHARED_CREDENTIALS_FILE AWS_ENDPOINT_URL AWS_REGION AWS_DEFAULT_REGION \
	    OVL_REMOTE_RETRIES OVL_REMOTE_RETRY_WAIT OVL_REMOTE_TIMEOUT OVL_S3_MAX_KEYS
	export HOME=$T
}

teardown() {
	local p
	for p in "$T"/*.pid; do
		[ -e "$p" ] && remote_pid_stop "$p"
	done
	# a test that killed nginx brings it back for the next one
	if [ -s "$BATS_FILE_TMPDIR/nginx/nginx.conf" ] &&
	    [ ! -s "$BATS_FILE_TMPDIR/nginx/nginx.pid" ]; then
		remote_nginx_start "$BATS_FILE_TMPDIR/nginx" "$W" "$NGINX_PORT"
	fi
	return 0
}

need_nginx() {
	[ -n "$(remote_nginx_bin)" ] ||
		skip "nginx not found: install the Debian package nginx (scripts/bootstrap) to test http:// paths"
	[ ! -e "$BATS_FILE_TMPDIR/nginx.failed" ] && [ -n "$NGINX_PORT" ] || {
		cat "$BATS_FILE_TMPDIR/nginx/error.log" >&2
		return 1
	}
	H=http://127.0.0.1:$NGINX_PORT
}

need_s3() {
	[ -f "$NPM_S3/node_modules/s3rver/package.json" ] ||
		skip "s3rver could not be installed into $NPM_S3 (no npm, or no network): s3:// NOT tested"
	[ ! -e "$BATS_FILE_TMPDIR/s3.failed" ] && [ -n "$S3_PORT" ]
	export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
	export AWS_ENDPOINT_URL=http://127.0.0.1:$S3_PORT
}

# samej LOCAL REMOTE: two --json outputs equal but for their "file" names
samej() {
	sed 's/,"file":"[^"]*"//' "$1" > "$1.nf"
	sed 's/,"file":"[^"]*"//' "$2" > "$2.nf"
	[ -s "$1.nf" ] && cmp "$1.nf" "$2.nf"
}

# same LOCAL REMOTE: two frame streams equal but for their META frames
same() {
	remote_nometa "$1" "$1.nm"
	remote_nometa "$2" "$2.nm"
	cmp "$1.nm" "$2.nm"
}

@test "remote: http files read as the same files read locally (jsonl, jsonl.zst, gzip, text, tar, wds)" {
	need_nginx
	local f fmt k=0
	for f in web/web-0.jsonl web/web-2.jsonl.zst lines.txt.gz books/book-01.txt \
	    code/code.tar.zst wds/shard-000000.tar; do
		k=$((k + 1))
		case $f in
		wds/*) fmt="--format wds" ;;
		*.tar*) fmt="--format tar --member-ext .c --member-ext .h" ;;
		*.txt*) fmt="--format text" ;;
		*) fmt= ;;
		esac
		run -0 "$OVL_SOURCE" $fmt x "$W/$f" --output "$T/l.$k"
		run -0 "$OVL_SOURCE" $fmt x "$H/$f" --output "$T/r.$k"
		[ "$(stat -c %s "$T/l.$k")" -gt 100 ]
		same "$T/l.$k" "$T/r.$k"
		run -0 "$OVL_SOURCE" $fmt --json x "$W/$f" --output "$T/lj.$k"
		run -0 "$OVL_SOURCE" $fmt --json x "$H/$f" --output "$T/rj.$k"
		samej "$T/lj.$k" "$T/rj.$k"
	done
	# the META names the URL where the local run names the path
	run -0 "$OVL_SOURCE" --json x "$H/web/web-0.jsonl"
	run -0 "$OVL_SOURCE" x "$H/web/web-0.jsonl?v=1" --output "$T/q"
	grep -a -q "source.x.chunk.0 0 - $H/web/web-0.jsonl" "$T/r.1"
}

@test "remote: a large plain http file is cut into the local file's chunks; partitions add up" {
	need_nginx
	run -0 "$OVL_SOURCE" --chunk-size 256k x "$W/big/big.jsonl" --output "$T/l"
	run -0 "$OVL_SOURCE" --chunk-size 256k x "$H/big/big.jsonl" --output "$T/r"
	same "$T/l" "$T/r"
	grep -a -o 'source\.x\.chunk\.[0-9]* [0-9]* [0-9]*' "$T/l" > "$T/lc"
	grep -a -o 'source\.x\.chunk\.[0-9]* [0-9]* [0-9]*' "$T/r" > "$T/rc"
	[ "$(wc -l < "$T/lc")" -ge 10 ]
	cmp "$T/lc" "$T/rc"
	for p in 0 1 2; do
		run -0 "$OVL_SOURCE" --chunk-size 256k --partition $p/3 --json x \
		    "$W/big/big.jsonl" --output "$T/lp.$p"
		run -0 "$OVL_SOURCE" --chunk-size 256k --partition $p/3 --json x \
		    "$H/big/big.jsonl" --output "$T/rp.$p"
		samej "$T/lp.$p" "$T/rp.$p"
	done
}

@test "remote: resume over http at several cut points equals the local run, asking from the offset" {
	need_nginx
	local c n k
	remote_proxy_start "$T" proxy "$NGINX_PORT"
	local P=http://127.0.0.1:$PROXY_PORT
	for f in big/big.jsonl web/web-2.jsonl.zst books/book-00.txt; do
		fmt=
		case $f in *.txt) fmt="--format text --doc-per blank-line" ;; esac
		run -0 "$OVL_SOURCE" $fmt --chunk-size 512k --json x "$W/$f" --output "$T/all"
		n=$(wc -l < "$T/all")
		[ "$n" -ge 4 ]
		for k in 1 $((n / 3)) $((n / 2 + 1)) $((n - 1)); do
			c=$(sed -n "${k}p" "$T/all" | grep -o '"cursor":"[^"]*"' | cut -d'"' -f4)
			run -0 "$OVL_SOURCE" $fmt --chunk-size 512k --resume "$c" x "$W/$f" --output "$T/l.$k"
			run -0 "$OVL_SOURCE" $fmt --chunk-size 512k --resume "$c" x "$P/$f" --output "$T/r.$k"
			same "$T/l.$k" "$T/r.$k"
			[ "$(stat -c %s "$T/l.$k.nm")" -gt 16 ]
		done
	done
	# a resumed plain file is asked for from its offset, never from byte 0
	c=$(sed -n 5p <("$OVL_SOURCE" --json x "$W/web/web-0.jsonl") | grep -o '"cursor":"[^"]*"' | cut -d'"' -f4)
	off=$(echo "$c" | cut -d: -f3)
	: > "$T/proxy.log"
	run -0 "$OVL_SOURCE" --resume "$c" x "$P/web/web-0.jsonl" --output "$T/o"
	grep -q "GET /web/web-0.jsonl bytes=$off-" "$T/proxy.log"
	! grep -q "GET /web/web-0.jsonl bytes=0-[0-9]\{3,\}" "$T/proxy.log" || false
}

@test "remote: resets, 503, 429 and bodies cut short are retried, the GET resumed from the byte received" {
	need_nginx
	local f fmt k=0 size a b
	for f in big/big.jsonl web/web-2.jsonl.zst code/code.tar.zst lines.txt.gz; do
		k=$((k + 1))
		case $f in
		*.tar*) fmt="--format tar --member-ext .c --member-ext .h" ;;
		*.txt*) fmt="--format text" ;;
		*) fmt= ;;
		esac
		# requests: HEAD and a probe of the first bytes while listing,
		# then HEAD and the GET of the chunk, which is cut twice
		size=$(stat -c %s "$W/$f")
		a=$((size / 5))
		b=$((size / 4))
		remote_proxy_start "$T" p$k "$NGINX_PORT" \
		    --schedule "reset,503,pass,429,trunc:0,pass,pass,503,trunc:$a,reset,trunc:$b,500"
		run -0 "$OVL_SOURCE" $fmt --retry-wait 0.01 x "$W/$f" --output "$T/l.$k"
		run -0 "$OVL_SOURCE" $fmt --retry-wait 0.01 x "http://127.0.0.1:$PROXY_PORT/$f" \
		    --output "$T/r.$k"
		same "$T/l.$k" "$T/r.$k"
		# each cut-short body went on from where it broke off
		grep -q "^11 trunc:$b GET /$f bytes=$a-" "$T/p$k.log"
		grep -q "^13 pass GET /$f bytes=$((a + b))-" "$T/p$k.log"
		remote_pid_stop "$T/p$k.pid"
	done
}

@test "remote: nginx killed in the middle of a file and restarted: the same output" {
	need_nginx
	remote_proxy_start "$T" proxy "$NGINX_PORT"
	run -0 "$OVL_SOURCE" x "$W/big/big.jsonl" --output "$T/l"
	"$OVL_SOURCE" --retry-wait 0.05 --retries 12 x \
	    "http://127.0.0.1:$PROXY_PORT/slow/big/big.jsonl" --output "$T/r" \
	    2> "$T/err" 3>&- &
	local src=$!
	echo "$src" > "$T/source.pid"
	# the body is on its way at 1 MB/s: kill nginx (master and worker)
	remote_wait_file "$T/proxy.log"
	remote_wait_grep body64k "$T/proxy.log"
	remote_nginx_kill "$BATS_FILE_TMPDIR/nginx"
	# the source's next try finds nobody listening, then nginx comes back
	remote_wait_grep '^error' "$T/proxy.log"
	remote_nginx_start "$BATS_FILE_TMPDIR/nginx" "$W" "$NGINX_PORT"
	wait "$src"
	rm -f "$T/source.pid"
	same "$T/l" "$T/r"
	# it asked again from the middle of the file, not from its start
	grep -E -q "GET /slow/big/big.jsonl bytes=[1-9][0-9]+-" "$T/proxy.log"
}

@test "remote: retries run out: a clear error naming the URL and byte offset, exit 1" {
	need_nginx
	remote_proxy_start "$T" proxy "$NGINX_PORT" \
	    --schedule "pass,pass,pass,trunc:1000,reset,reset,reset,reset"
	run -1 "$OVL_SOURCE" --retries 3 --retry-wait 0.01 x \
	    "http://127.0.0.1:$PROXY_PORT/web/web-0.jsonl?secret=abc"
	[[ $output == *"'http://127.0.0.1:$PROXY_PORT/web/web-0.jsonl': line 1: read error at byte offset 1000:"*"(retries exhausted)"* ]]
	[[ $output != *secret* ]]
	# nobody listening at all
	run -1 "$OVL_SOURCE" --retries 1 --retry-wait 0.01 x "http://127.0.0.1:$(remote_free_port)/a.jsonl"
	[[ $output == *"cannot open 'http://127.0.0.1:"*"/a.jsonl': "*"(retries exhausted)"* ]]
}

@test "remote: 404 is a missing file (exit 1, or skipped and counted with --on-error skip); HTTP globs are refused" {
	need_nginx
	run -1 "$OVL_SOURCE" x "$H/web/nope.jsonl"
	[ "$output" = "ovl-source: cannot open '$H/web/nope.jsonl': HTTP 404" ]
	run -1 "$OVL_SOURCE" x "http://u:pw@127.0.0.1:$NGINX_PORT/web/nope.jsonl"
	[[ $output != *pw* ]]
	run -1 "$OVL_SOURCE" x "$H/web/*.jsonl"
	[[ $output == *"'$H/web/*.jsonl': HTTP cannot list files"* ]]
	# a file that is gone when its chunk is read: listing (HEAD and a
	# probe for each file), the first file (HEAD, GET), then 404
	remote_proxy_start "$T" proxy "$NGINX_PORT" --schedule "pass,pass,pass,pass,pass,pass,404"
	local P=http://127.0.0.1:$PROXY_PORT
	run -0 "$OVL_SOURCE" --on-error skip --json x "$P/web/web-0.jsonl" "$P/web/web-1.jsonl" \
	    --output "$T/o"
	[[ $output == *"skipped 1 bad record (1 unopenable file)"* ]]
	[ "$(grep -c . "$T/o")" -eq "$("$OVL_SOURCE" --json x "$W/web/web-0.jsonl" | grep -c .)" ]
	remote_proxy_start "$T" proxy2 "$NGINX_PORT" --schedule "pass,pass,pass,pass,pass,pass,404"
	run -1 "$OVL_SOURCE" x "http://127.0.0.1:$PROXY_PORT/web/web-0.jsonl" \
	    "http://127.0.0.1:$PROXY_PORT/web/web-1.jsonl" --output "$T/o2"
	[[ $output == *"web-1.jsonl"*"HTTP 404"* ]]
}

@test "remote: s3 globs (ListObjectsV2, continuation tokens) equal local globs, partitions too" {
	need_s3
	# every request through a proxy that checks the SigV4 signature itself
	remote_proxy_start "$T" proxy "$S3_PORT" --sigv4-secret S3RVER
	export AWS_ENDPOINT_URL=http://127.0.0.1:$PROXY_PORT
	export OVL_S3_MAX_KEYS=2
	run -0 "$OVL_SOURCE" --format text x "$W"/books/*.txt --output "$T/l"
	run -0 "$OVL_SOURCE" --format text x 's3://data/books/book-*.txt' --output "$T/r"
	same "$T/l" "$T/r"
	[ "$(grep -c 'continuation-token=' "$T/proxy.log")" -ge 1 ]
	! grep -q 'SignatureDoesNotMatch' "$T/proxy.log" || false
	for p in 0 1; do
		run -0 "$OVL_SOURCE" --format jsonl --partition $p/2 --json x "$W"/web/* --output "$T/lp.$p"
		run -0 "$OVL_SOURCE" --format jsonl --partition $p/2 --json x 's3://data/web/*' \
		    --output "$T/rp.$p"
		samej "$T/lp.$p" "$T/rp.$p"
	done
	run -1 "$OVL_SOURCE" --format jsonl x 's3://data/nothing/*.jsonl'
	[ "$output" = "ovl-source: no file matches 's3://data/nothing/*.jsonl'" ]
	# tar through s3, resumed through s3
	run -0 "$OVL_SOURCE" --format tar --member-ext .c x "$W/code/code.tar.zst" --output "$T/lt"
	run -0 "$OVL_SOURCE" --format tar --member-ext .c x s3://data/code/code.tar.zst --output "$T/rt"
	same "$T/lt" "$T/rt"
	local c
	c=$(sed -n 3p <("$OVL_SOURCE" --json x "$W/web/web-1.jsonl") | grep -o '"cursor":"[^"]*"' | cut -d'"' -f4)
	run -0 "$OVL_SOURCE" --resume "$c" x "$W/web/web-1.jsonl" --output "$T/lr"
	run -0 "$OVL_SOURCE" --resume "$c" x s3://data/web/web-1.jsonl --output "$T/rr"
	same "$T/lr" "$T/rr"
}

@test "remote: s3 credentials from the environment, a profile of the credentials file, --s3-endpoint" {
	need_s3
	remote_proxy_start "$T" proxy "$S3_PORT" --sigv4-secret S3RVER
	local E=http://127.0.0.1:$PROXY_PORT
	unset AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	run -0 "$OVL_SOURCE" --json x "$W/web/web-0.jsonl" --output "$T/l"
	mkdir -p "$T/.aws"
	printf '[default]\naws_access_key_id = NOPE\naws_secret_access_key = x\n\n[test]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n' > "$T/.aws/credentials"
	AWS_PROFILE=test run -0 "$OVL_SOURCE" --s3-endpoint "$E" --json x s3://data/web/web-0.jsonl --output "$T/r1"
	samej "$T/l" "$T/r1"
	mv "$T/.aws/credentials" "$T/creds"
	AWS_SHARED_CREDENTIALS_FILE=$T/creds AWS_PROFILE=test AWS_ENDPOINT_URL=$E \
	    run -0 "$OVL_SOURCE" --json x s3://data/web/web-0.jsonl --output "$T/r2"
	samej "$T/l" "$T/r2"
	AWS_SHARED_CREDENTIALS_FILE=$T/creds AWS_PROFILE=missing run -1 "$OVL_SOURCE" --s3-endpoint "$E" \
	    --json x s3://data/web/web-0.jsonl
	[[ $output == *"AWS profile 'missing' not found in '$T/creds'"* ]]
	# a session token is sent (and signed)
	AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_SESSION_TOKEN=tok123 \
	    run -0 "$OVL_SOURCE" --s3-endpoint "$E" --json x s3://data/web/web-0.jsonl --output "$T/r3"
	samej "$T/l" "$T/r3"
}

@test "remote: wrong s3 credentials are an access error naming the URL, never the secret; exit 1" {
	need_s3
	remote_proxy_start "$T" proxy "$S3_PORT" --sigv4-secret S3RVER
	local E=http://127.0.0.1:$PROXY_PORT
	AWS_SECRET_ACCESS_KEY=wrongsecret run -1 "$OVL_SOURCE" --s3-endpoint "$E" x s3://data/web/web-0.jsonl
	[ "$output" = "ovl-source: cannot open 's3://data/web/web-0.jsonl': HTTP 403 (access denied: check the credentials)" ]
	AWS_ACCESS_KEY_ID=UNKNOWN run -1 "$OVL_SOURCE" --format jsonl x 's3://data/web/*'
	[[ $output == *"cannot list 's3://data/web/*': HTTP 403 (InvalidAccessKeyId)"* ]]
	[[ $output != *S3RVER* ]]
	run -1 "$OVL_SOURCE" x s3://data/web/none.jsonl
	[ "$output" = "ovl-source: cannot open 's3://data/web/none.jsonl': HTTP 404" ]
	run -1 "$OVL_SOURCE" x s3:///web.jsonl
	[[ $output == *"bad S3 URL"* ]]
}

@test "remote: option and environment errors are usage errors (exit 2)" {
	run -2 "$OVL_SOURCE" --retry-wait -1 x "$SAMPLES/web/web-0.jsonl"
	[[ $output == *"bad value for --retry-wait"* ]]
	run -2 "$OVL_SOURCE" --retries x x "$SAMPLES/web/web-0.jsonl"
	run -2 "$OVL_SOURCE" --s3-endpoint ftp://x x "$SAMPLES/web/web-0.jsonl"
	OVL_REMOTE_RETRIES=many run -2 "$OVL_SOURCE" x "$SAMPLES/web/web-0.jsonl"
	[[ $output == *"bad OVL_REMOTE_RETRIES 'many'"* ]]
}

@test "remote: parquet over http and s3: footer and pages by ranged reads, the local documents, resumed and partitioned" {
	need_nginx
	local p
	run -0 "$OVL_SOURCE" --field doc.text x "$W/parquet/web-1.parquet" --output "$T/l"
	run -0 "$OVL_SOURCE" --field doc.text x "$H/parquet/web-1.parquet" --output "$T/r"
	same "$T/l" "$T/r"
	run -0 "$OVL_SOURCE" --json --resume 0:2:5:5 --field doc.text x "$W/parquet/web-1.parquet" --output "$T/lj"
	run -0 "$OVL_SOURCE" --json --resume 0:2:5:5 --field doc.text x "$H/parquet/web-1.parquet" --output "$T/rj"
	samej "$T/lj" "$T/rj"
	for p in 0 1; do
		run -0 "$OVL_SOURCE" --partition $p/2 x "$W/parquet/web-0.parquet" --output "$T/lp$p"
		run -0 "$OVL_SOURCE" --partition $p/2 x "$H/parquet/web-0.parquet" --output "$T/rp$p"
		same "$T/lp$p" "$T/rp$p"
	done
	# a column missing from the remote file is named as from a local one
	run -1 "$OVL_SOURCE" --field nope x "$H/parquet/web-1.parquet"
	[[ "$output" == *"no column 'nope' (columns: id, doc.url, doc.text)"* ]]
	need_s3
	run -0 "$OVL_SOURCE" --field doc.text x "s3://data/parquet/*.parquet" --output "$T/s"
	same "$T/l" "$T/s"
}

@test "remote: a plan's path= takes http and s3 URLs (s3 globs listed, HTTP globs refused at the line); ovl-run supervises them, a killed source restarts, the dataset equals the local plan's" {
	need_nginx
	need_s3
	cd "$T"
	local b web books
	for b in local remote; do
		if [ "$b" = local ]; then
			web="path=$W/web/web-0.jsonl path=$W/web/web-1.jsonl"
			books="path=$W/books/book-0*.txt"
		else
			# throttled: each web partition reads for about 7 s, so it
			# is still there when the first step is out, however
			# loaded the machine (at 300K it could end first)
			web="path=$H/web/web-0.jsonl path=$H/web/web-1.jsonl throttle=20K"
			books="path=s3://data/books/book-0*.txt"
		fi
		cat > "$b.plan" <<EOF
source web $web format=jsonl partitions=2 on-exhaust=drop
source book $books format=text doc-per=file on-exhaust=drop
seq-len 256
ranks 2
checkpoint every=2 dir=ck-$b
output format=npy path=out-$b/s
EOF
	done
	run -0 "$OVL_MIX" --check remote.plan
	[[ "$output" == *" path=s3://data/books/book-00.txt path=s3://data/books/book-01.txt path=s3://data/books/book-02.txt path=s3://data/books/book-03.txt "* ]]
	run -0 "$OVL_RUN" -q local.plan
	"$OVL_RUN" -q --restart 1 remote.plan 3>&- 2> err &
	kill_stage_once $! ck-remote "ovl-source --id 0"
	wait $! || { cat err; false; }
	[ -n "$victim" ]
	grep -q "source:web" err
	for f in tokens seqs; do
		cmp "out-local/s.$f.npy" "out-remote/s.$f.npy"
	done
	printf 'source web path=%s/web/*.jsonl\n' "$H" > g.plan
	run -2 "$OVL_MIX" --check g.plan
	[[ "$output" == *"g.plan:1: source 'web': '$H/web/*.jsonl': HTTP cannot list files: name each URL"* ]]
	printf 'source web path=s3://data/nothing/*.jsonl\n' > n.plan
	run -2 "$OVL_MIX" --check n.plan
	[[ "$output" == *"n.plan:1: source 'web': no file matches 's3://data/nothing/*.jsonl'"* ]]
}
