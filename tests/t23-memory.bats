#!/usr/bin/env bats
# Bounded memory (issue 18): each stage's peak RSS is bounded by its plan,
# not by the corpus. The same plan runs on a long-tailed corpus and on ten
# times that corpus; every stage's peak (the largest source's, ovl-mix's,
# ovl-construct's, ovl-ckpt's) stays within 10% plus a small slack.
#
# The corpus: 8 sources of lognormal documents, 0.1% of them outliers of
# 256 KiB (1 MiB frames): at 1x only some sources hold one, at 10x all do.
# Buffers that grew to the largest document seen and never shrank (every
# reader of ovl-mix, every source's writer) made the 10x run larger.

load test_helper

NSRC=8
# Under AddressSanitizer freed memory waits in a quarantine (256 MB): the
# figure would be the sanitizer's. Without it, ASan still checks every
# access here (the other tests keep the quarantine for use after free).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0"

# corpus X DOCS: $X/sN.jsonl for every source
corpus() {
	local i
	mkdir -p "$1"
	for ((i = 0; i < NSRC; i++)); do
		"$OVL_BUILDDIR/scripts/ovl-gendocs" --jsonl --docs "$2" \
		    --seed $((i + 1)) --median 400 --sigma 1 --tail 0.1 \
		    --tail-min 256K --tail-max 256K > "$1/s$i.jsonl"
	done
}

# peak OUT CMD...: run CMD (stdin and stdout its own), write its peak RSS
# in KiB (ru_maxrss of wait4) to OUT; exits with CMD's status
peak() {
	python3 -c '
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, st, ru = os.wait4(pid, 0)
open(sys.argv[1], "w").write("%d\n" % ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(st) & 255)' "$@"
}

# pipeline X: the plan over corpus X, stages started by hand; each stage's
# peak in $X.rss.<stage>, the largest source's in $X.rss.source
pipeline() {
	local x=$1 i args=() pids=() st
	{
		echo "tokenizer bytes"
		for ((i = 0; i < NSRC; i++)); do
			echo "source s$i path=$PWD/$x/s$i.jsonl field=text on-exhaust=drop"
		done
		echo "ranks 2"
		echo "seq-len 2048"
		echo "checkpoint every=8 dir=$PWD/$x.ckpt"
	} > "$x.plan"
	for ((i = 0; i < NSRC; i++)); do
		mkfifo "$x.f$i"
		args+=("s$i=$x.f$i")
		"$OVL_MIX" --source-args "s$i" "$x.plan" > "$x.args.$i"
		mapfile -d '' sa < "$x.args.$i"
		peak "$x.rss.s$i" "$OVL_SOURCE" -q "${sa[@]}" > "$x.f$i" 3>&- &
		pids+=($!)
	done
	peak "$x.rss.mix" "$OVL_MIX" -q "$x.plan" "${args[@]}" |
	    peak "$x.rss.construct" "$OVL_CONSTRUCT" -q "$x.plan" |
	    peak "$x.rss.ckpt" "$OVL_CKPT" -q --dir "$x.ckpt" --format frames \
	    -o "$x.out" "$x.plan"
	st="${PIPESTATUS[*]}"
	for i in "${pids[@]}"; do
		wait "$i" || return 1
	done
	[ "$st" = "0 0 0" ] || return 1
	sort -n "$x".rss.s* | tail -n 1 > "$x.rss.source"
}

@test "10x the corpus: every stage's peak RSS within 10% (plus 3 MiB)" {
	cd "$BATS_TEST_TMPDIR"
	corpus c1 2000
	corpus c10 20000
	run -0 pipeline c1
	run -0 pipeline c10
	# the 10x run read ten times the documents
	[ "$(wc -c < c10.out)" -gt "$(($(wc -c < c1.out) * 9))" ]
	for st in source mix construct ckpt; do
		echo "$st: $(cat "c1.rss.$st") KiB at 1x, $(cat "c10.rss.$st") KiB at 10x"
	done
	for st in source mix construct ckpt; do
		a=$(cat "c1.rss.$st") b=$(cat "c10.rss.$st")
		# 3 MiB: a frame reader keeps up to 4 chunks (256 KiB in
		# ovl-mix) without shrinking, which the longer run's longer
		# documents reach more often (8 inputs: 2 MiB), plus one
		# outlier frame (1 MiB) whose moment depends on scheduling
		[ "$b" -le $((a + a / 10 + 3072)) ]
	done
}

# Optional libraries (lib/dl.h): libcurl, libarchive, libcrypto, libpcre2, the parquet
# codecs (libsnappy, liblz4, libbrotlidec)
# and the SentencePiece shim are loaded by the sources that need them, so
# a source of local jsonl maps none of them (and its RSS has none of their
# pages).
OPTIONAL='libpcre2-8\.so|libcurl\.so|libarchive\.so|libcrypto\.so|libsnappy\.so|liblz4\.so|libbrotlidec\.so|libsentencepiece\.so|ovl-spm\.so'

# maps_running OUT ARGS...: /proc/PID/maps of ovl-source ARGS while it
# runs, written to OUT. The event: its first 8 bytes reach us, written
# once it has read documents (the writer flushes after 256 KiB of frames),
# and it blocks on the FIFO we stop reading (its output is several MiB).
maps_running() {
	local out=$1 pid
	shift
	rm -f src.fifo
	mkfifo src.fifo
	"$OVL_SOURCE" -q "$@" > src.fifo 3>&- &
	pid=$!
	exec 4< src.fifo
	head -c 8 <&4 > src.head
	cat "/proc/$pid/maps" > "$out"
	cat <&4 > /dev/null
	exec 4<&-
	wait "$pid"
	[ "$(wc -c < src.head)" -eq 8 ]
	[ -s "$out" ]
}

@test "a source of local jsonl maps none of the optional libraries; a tar or a sentencepiece source maps its own" {
	cd "$BATS_TEST_TMPDIR"
	"$OVL_BUILDDIR/scripts/ovl-gendocs" --jsonl --docs 4000 --seed 3 \
	    --median 600 --sigma 1 > d.jsonl
	maps_running plain.maps --field text d d.jsonl
	grep -q 'libc\.so' plain.maps
	run -1 grep -E "$OPTIONAL" plain.maps
	# the same check sees what a source needs: libarchive for a tar
	maps_running tar.maps --format wds --epochs 400 w "$SAMPLES"/wds/shard-000000.tar
	grep -q 'libarchive\.so' tar.maps
	run -1 grep -E 'libcurl\.so|libsentencepiece\.so|ovl-spm\.so' tar.maps
	# and the shim with libsentencepiece for a sentencepiece model
	maps_running spm.maps --tokenizer "sentencepiece:$SAMPLES/tokenizers/sample-spm.model" \
	    --field text d d.jsonl
	grep -q 'ovl-spm\.so' spm.maps
	grep -q 'libsentencepiece\.so' spm.maps
	run -1 grep -E 'libcurl\.so|libarchive\.so' spm.maps
}

@test "an optional library that cannot be loaded: an error naming it and what needs it" {
	cd "$BATS_TEST_TMPDIR"
	mkdir lib
	# the loader finds these empty files first (LD_LIBRARY_PATH)
	for l in libarchive libcurl; do
		so=$(ldconfig -p | awk -v l="$l" '$1 ~ "^" l "\\.so\\.[0-9]" { print $1; exit }')
		[ -n "$so" ]
		: > "lib/$so"
	done
	LD_LIBRARY_PATH=$PWD/lib run -1 "$OVL_SOURCE" -q --format wds w "$SAMPLES"/wds/shard-000000.tar
	[[ "$output" == *"cannot load libarchive.so."*"tar and WebDataset shards"*"libarchive13"* ]]
	LD_LIBRARY_PATH=$PWD/lib run -1 "$OVL_SOURCE" -q --field text r http://127.0.0.1:9/d.jsonl
	[[ "$output" == *"'http://127.0.0.1:9/d.jsonl'"*"cannot load libcurl.so."*"http(s):// and s3:// inputs"* ]]
	# no shim: the model's error says so
	echo '{"text":"x"}' > d.jsonl
	OVL_SPM_SHIM=$PWD/lib/none.so run -2 "$OVL_SOURCE" -q \
	    --tokenizer "sentencepiece:$SAMPLES/tokenizers/sample-spm.model" d d.jsonl
	[[ "$output" == *"sample-spm.model"*"cannot load $PWD/lib/none.so (sentencepiece tokenizers"* ]]
}
