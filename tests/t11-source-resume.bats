#!/usr/bin/env bats
# ovl-source --resume: a run cut after any document and resumed from that
# document's cursor gives exactly the uncut run, for every format.

load test_helper

# cursor_of FILE K: the cursor of the K-th document (1-based) of --json output.
cursor_of() {
	sed -n "${2}p" "$1" | sed 's/.*"cursor":"\([^"]*\)".*/\1/'
}

# resume_all ARGS...: cut the --json run of ARGS after many documents (the
# first, the last, every chunk's last, and evenly spread ones) and check
# that prefix + resumed run == the uncut run, byte for byte. The cursors
# are cut from the uncut run in the shell and the resumed run is compared
# with the uncut run's bytes from the next document on (cmp -i): a cut
# point starts two processes, the resumed ovl-source and cmp.
resume_all() {
	local d=$BATS_TEST_TMPDIR n k cur pts step u at
	"$OVL_SOURCE" --json "$@" > "$d/uncut"
	mapfile -t u < "$d/uncut"
	n=${#u[@]}
	[ "$n" -ge 4 ] || { echo "only $n documents"; return 1; }
	# at[K]: the byte offset of document K + 1 (after the first K lines)
	mapfile -t at < <(LC_ALL=C awk '{ print o + 0; o += length($0) + 1 } END { print o + 0 }' "$d/uncut")
	step=$(( n / 9 + 1 ))
	# the last document of every chunk: where the chunk index changes next
	pts=$(sed 's/.*"pos":\[\([0-9]*\),\([0-9]*\),.*/\1:\2/' "$d/uncut" |
	    awk 'NR > 1 && $0 != prev { print NR - 1 } { prev = $0 }')
	for k in $(printf '%s\n' 1 2 $(seq 3 "$step" "$n") $pts $((n - 1)) "$n" | sort -nu); do
		cur=${u[k - 1]#*'"cursor":"'}
		cur=${cur%%'"'*}
		"$OVL_SOURCE" --json --resume "$cur" "$@" > "$d/rest" ||
			{ echo "resume at $k ($cur) failed"; return 1; }
		cmp -s -i "${at[k]}:0" "$d/uncut" "$d/rest" ||
			{ echo "cut after document $k (cursor $cur) differs"; return 1; }
	done
	# the start cursor gives everything
	"$OVL_SOURCE" --json --resume 0:0:0:0 "$@" | cmp -s - "$d/uncut"
}

@test "resume: jsonl, several files, plain and zstd" {
	resume_all web "$SAMPLES"/web/web-0.jsonl "$SAMPLES"/web/web-2.jsonl.zst
}

@test "resume: jsonl cut into byte-range chunks (--chunk-size), seeking into the file" {
	resume_all --chunk-size 20000 web "$SAMPLES"/web/web-1.jsonl
	run -0 grep -c '"pos":\[0,6,' "$BATS_TEST_TMPDIR/uncut"
}

@test "resume: text lines in gzip, with filters leaving records out" {
	resume_all --min-tokens 50 --drop 'e$' lines "$SAMPLES/lines.txt.gz"
}

@test "resume: plain text lines, whole and cut into chunks; gzip jsonl; gzip tar" {
	gzip -dc "$SAMPLES/lines.txt.gz" > "$BATS_TEST_TMPDIR/lines.txt"
	resume_all lines "$BATS_TEST_TMPDIR/lines.txt"
	resume_all --chunk-size 7000 lines "$BATS_TEST_TMPDIR/lines.txt"
	gzip -c "$SAMPLES/web/web-1.jsonl" > "$BATS_TEST_TMPDIR/web-1.jsonl.gz"
	resume_all web "$BATS_TEST_TMPDIR/web-1.jsonl.gz"
	gzip -c "$SAMPLES/wds/shard-000001.tar" > "$BATS_TEST_TMPDIR/shard.tar.gz"
	resume_all --format wds wds "$BATS_TEST_TMPDIR/shard.tar.gz"
}

@test "resume: text paragraphs (blank-line), whole and cut into chunks" {
	resume_all --doc-per blank-line books "$SAMPLES"/books/book-0[5-7].txt
	resume_all --doc-per blank-line --chunk-size 8K books "$SAMPLES"/books/book-0[67].txt
}

@test "resume: text one document per file" {
	resume_all --doc-per file books "$SAMPLES"/books/*.txt
}

@test "resume: tar members (zstd) and WebDataset groups" {
	resume_all --member-ext .c --member-ext .md code "$SAMPLES/code/code.tar.zst"
	resume_all --format wds wds "$SAMPLES"/wds/shard-*.tar
}

@test "resume: across epochs with a shuffled chunk order" {
	resume_all --shuffle-seed 11 --epochs 3 --doc-per file books "$SAMPLES"/books/*.txt
	resume_all --shuffle-seed 3 --epochs 2 --chunk-size 30000 web "$SAMPLES"/web/web-[01].jsonl
}

@test "resume: the frames of cut + resumed runs equal the uncut frames (DOC and CHUNK_END order)" {
	d=$BATS_TEST_TMPDIR
	"$OVL_SOURCE" --text web "$SAMPLES"/web/web-0.jsonl "$SAMPLES"/web/web-2.jsonl.zst > "$d/uncut"
	"$OVL_SOURCE" --json web "$SAMPLES"/web/web-0.jsonl "$SAMPLES"/web/web-2.jsonl.zst > "$d/uncut.json"
	"$OVL_TEST_TOOL" dump "$d/uncut" > "$d/u"
	head -n 1 "$d/u" | grep -q '^META '
	tail -n 1 "$d/u" | grep -q '^END '
	for k in 1 57 110 111 229 230; do
		cur=$(cursor_of "$d/uncut.json" "$k")
		"$OVL_SOURCE" --text --resume "$cur" web "$SAMPLES"/web/web-0.jsonl \
		    "$SAMPLES"/web/web-2.jsonl.zst > "$d/rest"
		# META first and END last in both; after the uncut run's
		# document k, the same frames: DOCs byte for byte (their payload
		# hash), CHUNK_ENDs the same chunk (the document count is each
		# run's own)
		"$OVL_TEST_TOOL" dump "$d/rest" > "$d/r"
		head -n 1 "$d/r" | grep -q '^META '
		tail -n 1 "$d/r" | grep -q '^END '
		at=$(grep -n '^DOC ' "$d/u" | sed -n "${k}p" | cut -d: -f1)
		sed '$d' "$d/u" | tail -n +$((at + 1)) | sed 's/ docs=[0-9]*//' > "$d/want"
		sed '1d;$d' "$d/r" | sed 's/ docs=[0-9]*//' > "$d/got"
		cmp "$d/want" "$d/got"
	done
}

@test "resume at a chunk's end emits that chunk's CHUNK_END; after the last epoch, META and END only" {
	d=$BATS_TEST_TMPDIR
	"$OVL_SOURCE" --json lines "$SAMPLES/lines.txt.gz" > "$d/all"
	last=$(cursor_of "$d/all" 300)
	"$OVL_SOURCE" --resume "$last" lines "$SAMPLES/lines.txt.gz" > "$d/f"
	run -0 "$OVL_TEST_TOOL" dump "$d/f"
	[ "${#lines[@]}" -eq 3 ]
	[[ "${lines[0]}" == "META "* ]]
	[ "${lines[1]}" = "CHUNK_END src=0 epoch=0 chunk=0 nchunks=1 docs=0 bytes=49523" ]
	[ "${lines[2]}" = "END frames=2" ]
	"$OVL_SOURCE" --epochs 2 --resume 2:0:0:0 lines "$SAMPLES/lines.txt.gz" > "$d/g"
	run -0 bash -c '"$1" dump "$2" | cut -d" " -f1 | tr "\n" " "' _ "$OVL_TEST_TOOL" "$d/g"
	[ "$output" = "META END " ]
}

@test "resume: E:NCHUNKS:0:0 (after the last chunk's CHUNK_END) is the start of epoch E+1" {
	"$OVL_SOURCE" --json --epochs 3 --doc-per file books "$SAMPLES"/books/*.txt > "$BATS_TEST_TMPDIR/all"
	"$OVL_SOURCE" --json --epochs 3 --resume 0:8:0:0 --doc-per file books "$SAMPLES"/books/*.txt \
	    > "$BATS_TEST_TMPDIR/rest"
	tail -n +9 "$BATS_TEST_TMPDIR/all" | cmp - "$BATS_TEST_TMPDIR/rest"
	run -0 "$OVL_SOURCE" --json --epochs 3 --resume 2:8:0:0 --doc-per file books "$SAMPLES"/books/*.txt
	[ -z "$output" ]
}

@test "resume: a cursor that does not fit the source is a usage error (2)" {
	run -2 "$OVL_SOURCE" --json --resume 0:5:0:0 web "$SAMPLES/web/web-0.jsonl"
	[[ "$output" == *"out of range"* ]]
	run -2 "$OVL_SOURCE" --json --resume 0:0:17:1 web "$SAMPLES/web/web-0.jsonl"
	[[ "$output" == *"not at a record start"* ]]
	run -2 "$OVL_SOURCE" --json --resume 0:0:99999999:1 web "$SAMPLES/web/web-0.jsonl"
	[[ "$output" == *"beyond the end"* ]]
	run -2 "$OVL_SOURCE" --json --resume 0:0:17:1 lines "$SAMPLES/lines.txt.gz"
	[[ "$output" == *"not at a record start"* ]]
	run -2 "$OVL_SOURCE" --json --resume 0:0:999:1 --format wds wds "$SAMPLES/wds/shard-000000.tar"
	[[ "$output" == *"beyond the last member group"* ]]
}

@test "resume: pre-tokenized jsonl (--field-type ids), chunked" {
	ids_jsonl "$BATS_TEST_TMPDIR/ids.jsonl" "$SAMPLES"/web/web-0.jsonl "$SAMPLES"/web/web-2.jsonl.zst
	resume_all --field ids --field-type ids --chunk-size 20000 \
		--tokenizer "hf:$SAMPLES/tokenizers/sample-tokenizer.json" web "$BATS_TEST_TMPDIR/ids.jsonl"
}

@test "resume: parquet, row groups as chunks, in dictionary pages v1 and plain pages v2, a struct column" {
	resume_all web "$SAMPLES/parquet/web-0.parquet"
	[ "$(grep -c '"pos":\[0,4,' "$BATS_TEST_TMPDIR/uncut")" -eq 10 ]
	resume_all --field doc.text --shuffle-seed 9 --epochs 2 web "$SAMPLES/parquet/web-1.parquet"
	# a cursor past a row group's last row, or a row past its end, is refused
	run -2 "$OVL_SOURCE" --json --resume 0:0:26:26 web "$SAMPLES/parquet/web-0.parquet"
	[[ "$output" == *"--resume offset 26 is beyond the last row"* ]]
}

@test "resume: token files (.npy by end-of-document and by offsets, Megatron .bin/.idx)" {
	local py d=$BATS_TEST_TMPDIR/tok
	py=$(ovl_python_numpy) || skip "no python3 with numpy"
	mkdir -p "$d"
	"$py" "$OVL_SRCDIR/tests/helper/tokfiles.py" "$d" "$SAMPLES/web/web-0.jsonl" "$SAMPLES/web/web-1.jsonl"
	resume_all web "$d/eod16.npy" "$d/eod16b.npy"
	resume_all --doc-per offsets --shuffle-seed 4 --epochs 2 web "$d/off.npy" "$d/offb.npy"
	resume_all web "$d/mega16.bin" "$d/mega16b.bin"
}
