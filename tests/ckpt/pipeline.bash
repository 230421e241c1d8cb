# Run a whole pipeline, stage by stage, each a process of its own joined by
# FIFOs, so that a test can kill any one of them; restart it from the lines
# of `ovl-ckpt restore`. Sourced by tests/t41-ckpt-pipeline.bats.
#
#   pl_start PLAN CKDIR RESUMEFILE OUTOPT...   start every stage (RESUMEFILE
#                                              "" or restore's output)
#   pl_wait                                    wait for all; PL_RC[role]
#   pl_kill ROLE SIGNAL                        signal one stage
#   pl_killall                                 SIGKILL what still runs
#   pl_restore CKDIR RESUMEFILE                restore; 0 resume, 1 from scratch, 2 done

declare -gA PL_PID PL_RC

pl_opts() {	# pl_opts RESUMEFILE KEY: the options restore printed for KEY
	local line
	PL_OPTS=()
	[ -n "$1" ] && [ -s "$1" ] || return 0
	while IFS= read -r line; do
		if [ "${line%% *}" = "$2" ]; then
			eval "PL_OPTS=(${line#* })"
			return 0
		fi
	done < "$1"
}

# Run a command in the background without the FIFO-holding descriptors.
pl_bg() {
	local fd
	for fd in "${PL_HOLDS[@]}"; do
		exec {fd}>&-
	done
	exec "$@"
}

# pl_ask FILE COMMAND...: COMMAND's output, kept in FILE: the plan's sources
# and their arguments are asked of ovl-mix once per plan and test (files
# under the test's directory, named by the plan's absolute path), not at
# every start
pl_ask() {
	[ -s "$1" ] || "${@:2}" > "$1"
}

pl_start() {
	local plan=$1 ck=$2 resume=$3 name parts p i fd
	local -a list args inputs
	local cache=${BATS_TEST_TMPDIR:-$BATS_FILE_TMPDIR}/.pl-cache abs=$plan
	shift 3
	[[ $abs == /* ]] || abs=$PWD/$abs
	PL_HOLDS=()
	PL_PID=()
	PL_RC=()
	mkdir -p fifo "$cache"
	cache=$cache/${abs//[^A-Za-z0-9]/_}
	pl_ask "$cache.list" "$OVL_MIX" --list-sources "$plan" || return 1
	mapfile -d '' list < "$cache.list"
	for ((i = 0; i < ${#list[@]}; i += 4)); do
		name=${list[i]} parts=${list[i+1]}
		pl_ask "$cache.args.$name" "$OVL_MIX" --source-args "$name" "$plan" || return 1
		mapfile -d '' args < "$cache.args.$name"
		for ((p = 0; p < parts; p++)); do
			[ -p "fifo/$name.$p" ] || mkfifo "fifo/$name.$p"
			exec {fd}<>"fifo/$name.$p"
			PL_HOLDS+=("$fd")
			pl_opts "$resume" "source:$name:$p/$parts"
			pl_bg "$OVL_SOURCE" "${args[@]}" --partition "$p/$parts" \
			    "${PL_OPTS[@]}" > "fifo/$name.$p" 2>> "source.err" 3>&- &
			PL_PID["source:$name:$p/$parts"]=$!
			inputs+=("$name=fifo/$name.$p")
		done
	done
	[ -p fifo/mix ] || mkfifo fifo/mix
	[ -p fifo/construct ] || mkfifo fifo/construct
	pl_opts "$resume" ckpt
	pl_bg "$OVL_CKPT" --dir "$ck" "$@" "${PL_OPTS[@]}" "$plan" \
	    < fifo/construct 2>> ckpt.err 3>&- &
	PL_PID[ckpt]=$!
	pl_opts "$resume" construct
	pl_bg "$OVL_CONSTRUCT" "${PL_OPTS[@]}" "$plan" < fifo/mix > fifo/construct \
	    2>> construct.err 3>&- &
	PL_PID[construct]=$!
	pl_opts "$resume" mix
	pl_bg "$OVL_MIX" "${PL_OPTS[@]}" "$plan" "${inputs[@]}" > fifo/mix \
	    2>> mix.err 3>&- &
	PL_PID[mix]=$!
	# drop the holds once every source has its FIFO open for writing
	for ((i = 0; i < 500; i++)); do
		pl_writers_ready && break
		nap 0.01
	done
	for fd in "${PL_HOLDS[@]}"; do
		exec {fd}>&-
	done
}

# Every source has its FIFO open for writing and ovl-mix has them all open
# for reading (ovl-mix opens its inputs without blocking: until then the
# test holds every FIFO open, and must not drop the hold too early).
pl_writers_ready() {
	local role r name p mixfds
	kill -0 "${PL_PID[mix]}" 2>/dev/null || return 0	# nothing to wait for
	mixfds=$(ls -l "/proc/${PL_PID[mix]}/fd" 2>/dev/null) || return 1
	for role in "${!PL_PID[@]}"; do
		[[ $role == source:* ]] || continue
		r=${role#source:} name=${r%%:*} p=${r#*:} p=${p%%/*}
		# read-only: ovl-mix's own open, not an inherited hold (lrwx)
		grep -q "^lr-x.*/fifo/$name\.$p\$" <<< "$mixfds" || return 1
		kill -0 "${PL_PID[$role]}" 2>/dev/null || continue
		ls -l "/proc/${PL_PID[$role]}/fd" 2>/dev/null |
		    grep -q "^l-wx.*/fifo/$name\.$p\$" || return 1
	done
}

pl_wait() {
	local role
	for role in "${!PL_PID[@]}"; do
		wait "${PL_PID[$role]}" && PL_RC[$role]=0 || PL_RC[$role]=$?
	done
}

# Every stage ended well: 0, or SIGPIPE for a source that repeats (the
# mixer stops reading it at "stop tokens=").
pl_all_ok() {
	local role
	for role in "${!PL_RC[@]}"; do
		case ${PL_RC[$role]} in
		0) ;;
		141) [[ $role == source:* ]] || { echo "$role: 141"; return 1; } ;;
		*) echo "$role: ${PL_RC[$role]}"; return 1 ;;
		esac
	done
}

pl_kill() {
	kill "-$2" "${PL_PID[$1]}" 2>/dev/null || true
}

pl_killall() {
	local role
	for role in "${!PL_PID[@]}"; do
		kill -KILL "${PL_PID[$role]}" 2>/dev/null || true
	done
	pl_wait
}

pl_restore() {
	local rc=0
	"$OVL_CKPT" restore "$1" > "$2" 2> restore.err || rc=$?
	if [ "$rc" -eq 1 ] && grep -q 'no checkpoint' restore.err; then
		: > "$2"
		return 1
	fi
	[ "$rc" -eq 0 ] || { cat restore.err >&2; return 3; }
	[ -s "$2" ] || return 2
	return 0
}
