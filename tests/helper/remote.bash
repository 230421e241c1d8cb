# remote.bash: start and stop the servers the object-storage tests and
# scripts/bench-remote read from: nginx (Debian) serving a directory with
# ranges, s3rver (npm) as an S3-compatible server, and
# tests/helper/fault-proxy.py in front of either. Sourced by bash.
# Every server writes its port (or pid) to a file the caller waits for
# with a deadline; nothing sleeps for a fixed time.

# nap: the tests' sleep without a process (test_helper), else sleep(1)
declare -F nap > /dev/null || nap() { sleep "$1"; }

# remote_free_port: a TCP port on 127.0.0.1 that nobody listens on now
remote_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# remote_wait_file FILE [SECONDS]: wait until FILE exists (default 30 s)
remote_wait_file() {
	local f=$1 end=$((SECONDS + ${2:-30}))
	until [ -s "$f" ]; do
		[ "$SECONDS" -lt "$end" ] || { echo "timed out waiting for $f" >&2; return 1; }
		nap 0.05
	done
}

# remote_alive PID: the process runs (a zombie, which a container's
# init may never reap, does not count)
remote_alive() {
	[ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# remote_wait_grep PATTERN FILE [SECONDS]: wait until grep -q finds
# PATTERN in FILE (default 60 s)
remote_wait_grep() {
	local end=$((SECONDS + ${3:-60}))
	until grep -q -e "$1" "$2" 2>/dev/null; do
		[ "$SECONDS" -lt "$end" ] || { echo "timed out waiting for '$1' in $2" >&2; return 1; }
		nap 0.05
	done
}

# remote_wait_url URL [SECONDS]: wait until URL answers (any status)
remote_wait_url() {
	local end=$((SECONDS + ${2:-30}))
	until curl -s -o /dev/null --max-time 2 "$1"; do
		[ "$SECONDS" -lt "$end" ] || { echo "timed out waiting for $1" >&2; return 1; }
		nap 0.05
	done
}

remote_nginx_bin() {
	command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; }
}

# remote_nginx_start DIR ROOT [PORT]: nginx on 127.0.0.1:PORT (a free one
# by default) serving ROOT, ROOT also under /slow/ at 1 MB/s; its files
# (config, pid, logs) in DIR; sets NGINX_PORT and NGINX_DIR
remote_nginx_start() {
	local dir=$1 root=$2 user=
	NGINX_PORT=${3:-$(remote_free_port)}
	NGINX_DIR=$dir
	mkdir -p "$dir/tmp"
	[ "$(id -u)" -ne 0 ] || user="user root;"
	cat > "$dir/nginx.conf" <<EOF
$user
daemon on;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path $dir/tmp;
	proxy_temp_path $dir/tmp;
	fastcgi_temp_path $dir/tmp;
	uwsgi_temp_path $dir/tmp;
	scgi_temp_path $dir/tmp;
	sendfile on;
	default_type application/octet-stream;
	server {
		listen 127.0.0.1:$NGINX_PORT;
		root $root;
		location /slow/ { alias $root/; limit_rate 1m; }
	}
}
EOF
	rm -f "$dir/nginx.pid"
	"$(remote_nginx_bin)" -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf" 3>&- ||
		return 1
	remote_wait_file "$dir/nginx.pid" && remote_wait_url "http://127.0.0.1:$NGINX_PORT/"
}

# remote_nginx_kill DIR: SIGKILL nginx's master, then its workers (a
# crash; the master first, or it would start a new worker)
remote_nginx_kill() {
	local pid workers w
	[ -s "$1/nginx.pid" ] || return 0
	pid=$(cat "$1/nginx.pid")
	workers=$(pgrep -P "$pid" || true)
	kill -9 "$pid" 2>/dev/null || true
	while remote_alive "$pid"; do nap 0.05; done
	for w in $workers; do
		kill -9 "$w" 2>/dev/null || true
		while remote_alive "$w"; do nap 0.05; done
	done
	rm -f "$1/nginx.pid"
}

# remote_nginx_stop DIR
remote_nginx_stop() {
	remote_nginx_kill "$1"
}

# remote_s3_start NPMDIR DIR: s3rver on a free port of 127.0.0.1, bucket
# "data", objects kept under DIR/objects; sets S3_PORT and S3_PID.
# (--openssl-legacy-provider: s3rver's continuation tokens use DES.)
remote_s3_start() {
	mkdir -p "$2/objects"
	rm -f "$2/s3.port"
	node --openssl-legacy-provider "$OVL_SRCDIR/tests/helper/s3-server.js" \
		"$1/node_modules" "$2/objects" "$2/s3.port" > "$2/s3.log" 2>&1 3>&- &
	S3_PID=$!
	remote_wait_file "$2/s3.port" && S3_PORT=$(cat "$2/s3.port")
}

# remote_s3_put FILE KEY: upload FILE as s3://data/KEY (curl's SigV4)
remote_s3_put() {
	curl -sS -f --aws-sigv4 "aws:amz:us-east-1:s3" --user S3RVER:S3RVER \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$1" \
		"http://127.0.0.1:$S3_PORT/data/$2" > /dev/null
}

# remote_proxy_start DIR NAME UPSTREAM_PORT [fault-proxy options]: a
# fault proxy; sets PROXY_PORT; its log is DIR/NAME.log, pid DIR/NAME.pid
remote_proxy_start() {
	local dir=$1 name=$2 up=$3
	shift 3
	rm -f "$dir/$name.port" "$dir/$name.log"
	python3 "$OVL_SRCDIR/tests/helper/fault-proxy.py" --upstream "$up" \
		--port-file "$dir/$name.port" --log "$dir/$name.log" "$@" \
		2> "$dir/$name.err" 3>&- &
	echo $! > "$dir/$name.pid"
	remote_wait_file "$dir/$name.port" && PROXY_PORT=$(cat "$dir/$name.port")
}

# remote_pid_stop PIDFILE: end the process it names, if any
remote_pid_stop() {
	local pid
	[ -s "$1" ] || return 0
	pid=$(cat "$1")
	kill "$pid" 2>/dev/null || true
	while remote_alive "$pid"; do nap 0.05; done
	rm -f "$1"
}

# remote_nometa IN OUT: the frame stream IN without its META frame (which
# names the files: local paths or URLs), into OUT
remote_nometa() {
	local n
	# the first frame's payload length: 4 bytes little-endian at byte 16
	n=$(od -An -tu4 --endian=little -j 16 -N 4 "$1") || return 1
	{ head -c 16 "$1" && tail -c +$((29 + n)) "$1"; } > "$2"
}
