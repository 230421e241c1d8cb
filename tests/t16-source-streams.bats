#!/usr/bin/env bats
# Streams as inputs: stdin ("-"), FIFOs and devices are read exactly once
# (never opened twice, never lost), in any compression; what a stream cannot
# do (more than one epoch, stdin in several partitions) is refused clearly.

load test_helper

setup() {
	D=$BATS_TEST_TMPDIR
	for i in 1 2 3 4 5; do printf '{"text":"doc %d"}\n' "$i"; done > "$D/good.jsonl"
	"$OVL_SOURCE" --json --text web "$D/good.jsonl" | nofile > "$D/want"
}

# nofile: the documents without their "file" (the path each was read from)
nofile() {
	sed 's/,"file":"[^"]*"//'
}

@test "a FIFO whose writer has finished before ovl-source reads it: every document, no hang" {
	mkfifo "$D/p.jsonl"
	# the writer blocks in open until the one reader opens: it finishes
	# writing while ovl-source reads, never between two opens
	cat "$D/good.jsonl" > "$D/p.jsonl" 3>&- &
	run -0 timeout 20 "$OVL_SOURCE" --json --text web "$D/p.jsonl"
	[[ "${lines[0]}" == *',"file":"'"$D"'/p.jsonl",'* ]]
	printf '%s\n' "${lines[@]}" | nofile > "$D/got"
	cmp "$D/want" "$D/got"
	wait
	# a FIFO among regular files, and listed (ovl-mix --check) without opening it
	cat "$D/good.jsonl" > "$D/p.jsonl" 3>&- &
	run -0 timeout 20 "$OVL_SOURCE" --json --text web "$D/good.jsonl" "$D/p.jsonl"
	[ "${#lines[@]}" -eq 10 ]
	wait
}

@test "stdin: plain, zstd, gzip and xz, sniffed by magic; a tar.gz on stdin" {
	for z in cat "zstd -q -c" "gzip -c" "xz -c"; do
		$z < "$D/good.jsonl" > "$D/in"
		run -0 --separate-stderr "$OVL_SOURCE" --json --text --format jsonl web - < "$D/in"
		[[ "${lines[0]}" == *',"file":"-",'* ]]
		printf '%s\n' "${lines[@]}" | nofile > "$D/got"
		cmp "$D/want" "$D/got"
	done
	tar czf "$D/b.tar.gz" -C "$SAMPLES" books/book-00.txt books/book-01.txt
	"$OVL_SOURCE" --json --format tar b "$D/b.tar.gz" > "$D/want.tar"
	run -0 "$OVL_SOURCE" --json --format tar b - < "$D/b.tar.gz"
	[ "${#lines[@]}" -eq 2 ]
	# the same documents, named by the path given ('-' instead of the file)
	sed 's/"source":"b"/X/' "$D/want.tar" | nofile | cut -d, -f3- > "$D/a"
	printf '%s\n' "${lines[@]}" | nofile | cut -d, -f3- > "$D/b"
	cmp "$D/a" "$D/b"
}

@test "a resume inside a stream skips records as it reads (no seeking)" {
	run -0 "$OVL_SOURCE" --json --text --format jsonl --resume 0:0:34:2 web - < "$D/good.jsonl"
	[ "${#lines[@]}" -eq 3 ]
	[ "$(printf '%s\n' "${lines[0]}" | nofile)" = "$(sed -n 3p "$D/want")" ]
	zstd -q -c "$D/good.jsonl" > "$D/g.zst"
	run -0 "$OVL_SOURCE" --json --text --format jsonl --resume 0:0:68:4 web - < "$D/g.zst"
	[ "${#lines[@]}" -eq 1 ]
	[ "$(printf '%s\n' "${lines[0]}" | nofile)" = "$(sed -n 5p "$D/want")" ]
}

@test "what a stream cannot do is refused with status 2: stdin in two partitions, a second epoch" {
	run -2 --separate-stderr "$OVL_SOURCE" --partition 0/2 --format jsonl web - < "$D/good.jsonl"
	[ "$stderr" = "ovl-source: '-': standard input is read once, by one process: it cannot be split into 2 partitions" ]
	run -2 --separate-stderr "$OVL_SOURCE" --repeat --format jsonl web - < "$D/good.jsonl"
	[ "$stderr" = "ovl-source: '-' is a stream, read once: it cannot be read for more than one epoch" ]
	mkfifo "$D/p.jsonl"
	run -2 --separate-stderr "$OVL_SOURCE" --epochs 2 web "$D/p.jsonl"
	[ "$stderr" = "ovl-source: '$D/p.jsonl' is a stream, read once: it cannot be read for more than one epoch" ]
	# without a format to guess from, '-' asks for one
	run -2 --separate-stderr "$OVL_SOURCE" web - < "$D/good.jsonl"
	[[ "$stderr" == "ovl-source: cannot guess the format of '-': use --format"* ]]
}
