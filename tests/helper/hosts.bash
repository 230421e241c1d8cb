# Hosts for the multi-host tests, made on this machine: each "host" is a
# Linux network namespace joined to a bridge in the root namespace by a veth
# pair, on a private 10.x.y.0/24 subnet picked at random (the root namespace
# is 10.x.y.1: the mixer host), running its own sshd (Debian openssh-server)
# with a host key and a client key made in HOSTS_DIR. ssh -F "$HOSTS_DIR/ssh_config"
# reaches host hN by its name, as root, BatchMode.
#
#   hosts_up DIR N      make h1..hN (DIR: a directory of the test's); returns
#                       1 with HOSTS_SKIP set when the kernel refuses
#                       namespaces
#   host_kill hN        every process in the namespace, SIGKILL (sshd too)
#   host_link hN up|down
#   host_sshd hN        (re)start the host's sshd and wait until it answers
#   hosts_down          stop everything hosts_up started (teardown)
#
# Names carry the test's pid (o<pid>...), so parallel runs do not collide.

# nap: the tests' sleep without a process (test_helper), else sleep(1)
declare -F nap > /dev/null || nap() { sleep "$1"; }

# kept when set: setup_file makes the hosts, every test loads this file
: "${HOSTS_N:=0}" "${HOSTS_DIR:=}" "${HOSTS_TAG:=}" "${HOSTS_NET:=}"

hosts_up() {
	local dir=$1 n=$2 i ns
	HOSTS_DIR=$dir HOSTS_N=$n HOSTS_TAG=o$(($$ % 100000))
	mkdir -p "$dir"
	printf '%s\n' "$n" >"$dir/n"
	printf '%s\n' "$HOSTS_TAG" >"$dir/tag"
	if ! ip netns add "${HOSTS_TAG}h0probe" 2>"$dir/netns.err"; then
		HOSTS_SKIP="the kernel refuses network namespaces ($(cat "$dir/netns.err"))"
		return 1
	fi
	ip netns del "${HOSTS_TAG}h0probe"
	HOSTS_NET=10.$((RANDOM % 200 + 20)).$((RANDOM % 250))
	printf '%s\n' "$HOSTS_NET" >"$dir/net"
	ip link add "${HOSTS_TAG}br" type bridge || return 1
	ip addr add "$HOSTS_NET.1/24" dev "${HOSTS_TAG}br" || return 1
	ip link set "${HOSTS_TAG}br" up || return 1
	ssh-keygen -q -t ed25519 -N '' -f "$dir/hostkey" || return 1
	ssh-keygen -q -t ed25519 -N '' -f "$dir/id" || return 1
	cp "$dir/id.pub" "$dir/authorized_keys"
	printf '* %s\n' "$(cut -d' ' -f1,2 "$dir/hostkey.pub")" >"$dir/known_hosts"
	: >"$dir/ssh_config"
	for ((i = 1; i <= n; i++)); do
		ns=${HOSTS_TAG}h$i
		ip netns add "$ns" || return 1
		ip link add "${HOSTS_TAG}v$i" type veth peer name eth0 netns "$ns" || return 1
		ip link set "${HOSTS_TAG}v$i" master "${HOSTS_TAG}br" up || return 1
		ip -n "$ns" addr add "$HOSTS_NET.$((10 + i))/24" dev eth0 || return 1
		ip -n "$ns" link set eth0 up || return 1
		ip -n "$ns" link set lo up || return 1
		cat >"$dir/sshd_config.h$i" <<-EOF
		ListenAddress $HOSTS_NET.$((10 + i))
		HostKey $dir/hostkey
		PidFile $dir/sshd.h$i.pid
		AuthorizedKeysFile $dir/authorized_keys
		PermitRootLogin prohibit-password
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		MaxStartups 200
		MaxSessions 200
		LogLevel ERROR
		EOF
		cat >>"$dir/ssh_config" <<-EOF
		Host h$i
		    HostName $HOSTS_NET.$((10 + i))
		EOF
	done
	cat >>"$dir/ssh_config" <<-EOF
	Host *
	    User root
	    IdentityFile $dir/id
	    IdentitiesOnly yes
	    UserKnownHostsFile $dir/known_hosts
	    StrictHostKeyChecking yes
	    LogLevel ERROR
	EOF
	# sshd's privilege separation directory (the package makes it at boot)
	mkdir -p /run/sshd
	for ((i = 1; i <= n; i++)); do
		host_sshd "h$i" || return 1
	done
}

# host_sshd hN: start the host's sshd, wait until it answers (30 s at most)
host_sshd() {
	local k
	ip netns exec "${HOSTS_TAG}$1" /usr/sbin/sshd -f "$HOSTS_DIR/sshd_config.$1" \
		-E "$HOSTS_DIR/sshd.$1.log" 3>&- || return 1
	for ((k = 0; k < 300; k++)); do
		ssh -F "$HOSTS_DIR/ssh_config" -o BatchMode=yes -o ConnectTimeout=2 "$1" true \
			</dev/null 2>/dev/null 3>&- && return 0
		nap 0.1
	done
	echo "sshd on $1 does not answer" >&2
	cat "$HOSTS_DIR/sshd.$1.log" >&2
	return 1
}

host_kill() {
	local p
	p=$(ip netns pids "${HOSTS_TAG}$1" 2>/dev/null) || true
	# (a process may end between the listing and the kill)
	[ -z "$p" ] || kill -9 $p 2>/dev/null || true
	return 0
}

host_link() { ip link set "${HOSTS_TAG}v${1#h}" "$2"; }

# host_pids hN: the number of processes in the host
host_nproc() { ip netns pids "${HOSTS_TAG}$1" | wc -l; }

hosts_down() {
	local i
	[ -n "$HOSTS_TAG" ] || return 0
	# every step whatever the last one did (callers may run with set -e)
	for ((i = 1; i <= HOSTS_N; i++)); do
		host_kill "h$i" || true
		ip netns del "${HOSTS_TAG}h$i" 2>/dev/null || true
		ip link del "${HOSTS_TAG}v$i" 2>/dev/null || true
	done
	ip link del "${HOSTS_TAG}br" 2>/dev/null || true
	return 0
}
