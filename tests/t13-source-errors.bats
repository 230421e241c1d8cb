#!/usr/bin/env bats
# ovl-source and bad input: a message with the file and line (or byte
# offset, or member), a documented status, no crash, no hang, no silent
# loss; --on-error=skip skips, counts and reports.

load test_helper

setup() {
	D=$BATS_TEST_TMPDIR
}

# ndocs FILE: documents in --json output
ndocs() {
	wc -l < "$1" | tr -d ' '
}

@test "a missing file, a directory, a glob matching nothing: status 1 at startup, nothing on stdout" {
	run -1 --separate-stderr "$OVL_SOURCE" web "$SAMPLES/web/web-0.jsonl" "$D/nope.jsonl"
	[ "$stderr" = "ovl-source: cannot open '$D/nope.jsonl': No such file or directory" ]
	[ -z "$output" ]
	mkdir "$D/dir.jsonl"
	run -1 "$OVL_SOURCE" --json web "$D/dir.jsonl"
	[[ "$output" == *"'$D/dir.jsonl' is a directory"* ]]
	run -1 "$OVL_SOURCE" --json web "$D/none-*.jsonl"
	[[ "$output" == *"no file matches '$D/none-*.jsonl'"* ]]
}

@test "an unreadable file: status 1 at startup" {
	[ "$(id -u)" -ne 0 ] || skip "root reads any file"
	cp "$SAMPLES/web/web-0.jsonl" "$D/secret.jsonl"
	chmod 000 "$D/secret.jsonl"
	run -1 "$OVL_SOURCE" --json web "$D/secret.jsonl"
	[[ "$output" == *"cannot open '$D/secret.jsonl': Permission denied"* ]]
}

@test "an empty file is a valid chunk without documents" {
	: > "$D/empty.jsonl"
	"$OVL_SOURCE" web "$D/empty.jsonl" "$SAMPLES/web/web-0.jsonl" > "$D/f"
	"$OVL_TEST_TOOL" dump "$D/f" | cut -d' ' -f1 > "$D/kinds"
	[ "$(head -n 3 "$D/kinds" | tr '\n' ' ')" = "META CHUNK_END DOC " ]
	[ "$(grep -c '^DOC$' "$D/kinds")" -eq 110 ]
	[ "$(tail -n 2 "$D/kinds" | tr '\n' ' ')" = "CHUNK_END END " ]
	: > "$D/empty.txt.gz"
	gzip -c < /dev/null > "$D/empty2.txt.gz"
	zstd -q -c < /dev/null > "$D/empty3.jsonl.zst"
	: > "$D/empty.tar"
	run -0 "$OVL_SOURCE" --json lines "$D/empty2.txt.gz"
	[ -z "$output" ]
	run -0 "$OVL_SOURCE" --json web "$D/empty3.jsonl.zst"
	[ -z "$output" ]
	run -0 "$OVL_SOURCE" --json --format tar t "$D/empty.tar"
	[ -z "$output" ]
}

@test "truncated zstd: status 1 naming the file; with skip, the documents before it and a count" {
	head -c 30000 "$SAMPLES/web/web-2.jsonl.zst" > "$D/t.jsonl.zst"
	run -1 --separate-stderr "$OVL_SOURCE" --json web "$D/t.jsonl.zst"
	[[ "$stderr" == "ovl-source: '$D/t.jsonl.zst': line "*": truncated zstd input" ]]
	run -0 --separate-stderr "$OVL_SOURCE" --json --on-error skip web "$D/t.jsonl.zst" "$SAMPLES/web/web-0.jsonl"
	[ "$stderr" = "ovl-source: web: skipped 1 bad record (1 unreadable or corrupt input)" ]
	# every complete line before the cut is there, then all of web-0
	n=$(zstd -dc < "$D/t.jsonl.zst" 2>/dev/null | wc -l)
	[ "${#lines[@]}" -eq $((n + 110)) ]
	# a corrupt frame (flipped bytes) is an error too, never silent
	python3 -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read())
for i in range(2000, 2040): b[i] ^= 0x5a
open(sys.argv[2], "wb").write(b)' "$SAMPLES/web/web-2.jsonl.zst" "$D/c.jsonl.zst"
	run -1 "$OVL_SOURCE" --json web "$D/c.jsonl.zst"
	[[ "$output" == *"'$D/c.jsonl.zst': "* ]]
}

@test "truncated gzip: status 1 naming the file" {
	head -c 10000 "$SAMPLES/lines.txt.gz" > "$D/t.txt.gz"
	run -1 --separate-stderr "$OVL_SOURCE" --json lines "$D/t.txt.gz"
	[[ "$stderr" == "ovl-source: '$D/t.txt.gz'"*"truncated gzip input"* ]]
	run -0 --separate-stderr "$OVL_SOURCE" --json --on-error skip lines "$D/t.txt.gz" "$SAMPLES/lines.txt.gz"
	[[ "$stderr" == *"skipped 1 bad record"* ]]
	[ "${#lines[@]}" -ge 300 ]
}

@test "gzip is verified: a changed byte fails the CRC-32, a changed length fails ISIZE; members read one after another" {
	python3 -c '
import gzip, struct, sys
d = bytearray(gzip.compress(b"{\"text\":\"doc 5\"}\n", 0))
d[d.find(b"5")] = 55                      # stored block: the text itself
open(sys.argv[1], "wb").write(d)
e = bytearray(gzip.compress(b"{\"text\":\"doc 5\"}\n"))
e[-4:] = struct.pack("<I", 99)            # ISIZE
open(sys.argv[2], "wb").write(e)' "$D/crc.jsonl.gz" "$D/len.jsonl.gz"
	run -1 --separate-stderr "$OVL_SOURCE" --json web "$D/crc.jsonl.gz"
	[ "$stderr" = "ovl-source: '$D/crc.jsonl.gz': line 1: corrupt gzip data (incorrect data check) near compressed byte offset 36" ]
	[ -z "$output" ]
	run -1 --separate-stderr "$OVL_SOURCE" --json web "$D/len.jsonl.gz"
	[[ "$stderr" == *"'$D/len.jsonl.gz': line 1: corrupt gzip data (incorrect length check)"* ]]
	run -0 --separate-stderr "$OVL_SOURCE" --json --on-error skip web "$D/crc.jsonl.gz"
	[ "$stderr" = "ovl-source: web: skipped 1 bad record (1 unreadable or corrupt input)" ]
	# two members (gzip -c a >> f): both are read, as gzip -d reads them
	printf '{"text":"a"}\n' | gzip > "$D/m.jsonl.gz"
	printf '{"text":"b"}\n' | gzip >> "$D/m.jsonl.gz"
	run -0 "$OVL_SOURCE" --json --text web "$D/m.jsonl.gz"
	[ "${#lines[@]}" -eq 2 ]
	[[ "${lines[1]}" == *'"text":"b"}' ]]
	# garbage after the last member is an error, not ignored
	printf 'junk' >> "$D/m.jsonl.gz"
	run -1 "$OVL_SOURCE" --json web "$D/m.jsonl.gz"
	[[ "$output" == *"corrupt gzip data"* ]]
	# a tar.gz goes through the same checked decoder
	mkdir "$D/t" && echo hello > "$D/t/a.txt" && tar czf "$D/a.tar.gz" -C "$D/t" a.txt
	python3 -c '
import sys
d = bytearray(open(sys.argv[1], "rb").read()); d[-6] ^= 1   # inside the CRC-32
open(sys.argv[2], "wb").write(d)' "$D/a.tar.gz" "$D/b.tar.gz"
	run -0 "$OVL_SOURCE" --json --text --member-ext .txt t "$D/a.tar.gz"
	[[ "$output" == *'"text":"hello\n"}' ]]
	run -1 --separate-stderr "$OVL_SOURCE" --json --member-ext .txt t "$D/b.tar.gz"
	[[ "$stderr" == *"'$D/b.tar.gz'"*"corrupt gzip data (incorrect data check)"* ]]
}

@test "xz and bzip2 damage: status 1 with a plain message; corrupt inputs count as corrupt, not unopenable" {
	for i in $(seq 1 3000); do printf '{"text":"line %d of the xz test"}\n' "$i"; done > "$D/x.jsonl"
	xz -c "$D/x.jsonl" > "$D/x.jsonl.xz"
	bzip2 -c "$D/x.jsonl" > "$D/x.jsonl.bz2"
	for f in x.jsonl.xz x.jsonl.bz2; do
		head -c 60 "$D/$f" > "$D/cut-$f"
		run -1 --separate-stderr "$OVL_SOURCE" --json web "$D/cut-$f"
		[[ "$stderr" == "ovl-source: '$D/cut-$f'"*"corrupt or truncated"* ]]
		[[ "$stderr" != *"(null)"* ]]
		run -0 --separate-stderr "$OVL_SOURCE" --json --on-error skip web "$D/cut-$f"
		[[ "$stderr" == *"(1 unreadable or corrupt input)" ]]
	done
	# a tar whose first header is damaged: the file and byte offset 0
	tar cf "$D/c.tar" -C "$SAMPLES" books/book-00.txt
	python3 -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[148:156] = b"garbage!"
open(sys.argv[1], "wb").write(b)' "$D/c.tar"
	run -1 --separate-stderr "$OVL_SOURCE" --json --format tar t "$D/c.tar"
	[ "$stderr" = "ovl-source: '$D/c.tar': not a tar archive, or a damaged tar header at byte offset 0 (Unrecognized archive format)" ]
	# a missing tokenizer file is named as missing
	run -2 --separate-stderr "$OVL_SOURCE" --tokenizer "tiktoken:$D/nope.tiktoken" web "$SAMPLES/web/web-0.jsonl"
	[ "$stderr" = "ovl-source: cannot open '$D/nope.tiktoken': No such file or directory" ]
}

@test "corrupt tar: status 1 naming the archive and the member; skip resynchronizes" {
	python3 -c '
import sys, tarfile
t = tarfile.open(sys.argv[1])
m = t.getmembers()[5]
b = bytearray(open(sys.argv[1], "rb").read())
b[m.offset + 148: m.offset + 156] = b"99999999"   # header checksum
open(sys.argv[2], "wb").write(b)' "$SAMPLES/wds/shard-000000.tar" "$D/s.tar"
	run -1 --separate-stderr "$OVL_SOURCE" --json --format wds w "$D/s.tar"
	[ "$stderr" = "ovl-source: '$D/s.tar': member '000001.txt' (group 1): damaged tar header near byte offset 5632 after this member: Damaged tar archive" ]
	[ "${#lines[@]}" -eq 1 ]
	run -0 --separate-stderr "$OVL_SOURCE" --json --format wds --on-error skip w "$D/s.tar"
	[[ "$stderr" == *"skipped"*"unreadable or corrupt input"* ]]
	# garbage that is no tar at all
	head -c 5000 /dev/urandom > "$D/g.tar"
	run -1 "$OVL_SOURCE" --json t "$D/g.tar"
	[[ "$output" == "ovl-source: '$D/g.tar'"* ]]
	# a tar cut in the middle of a member
	head -c 3000 "$SAMPLES/wds/shard-000000.tar" > "$D/cut.tar"
	run -1 "$OVL_SOURCE" --json --format wds w "$D/cut.tar"
	[[ "$output" == *"'$D/cut.tar': member "* ]]
}

@test "jsonl: broken line, missing field, not a string, invalid UTF-8: file:line and status 1" {
	{
		echo '{"text": "good one"}'
		echo '{"text": "broken'
		echo '{"title": "no text"}'
		echo '{"text": 42}'
		printf '{"text": "bad \xff byte"}\n'
		echo '{"text": ["a"]}'
		echo '{"text": "good two"}'
	} > "$D/bad.jsonl"
	run -1 --separate-stderr "$OVL_SOURCE" --json web "$D/bad.jsonl"
	[ "$stderr" = "ovl-source: '$D/bad.jsonl': line 2: invalid JSON at column 10: premature end of input in a string" ]
	[ "${#lines[@]}" -eq 1 ]
	sed -i 2d "$D/bad.jsonl"
	run -1 --separate-stderr "$OVL_SOURCE" --json web "$D/bad.jsonl"
	[ "$stderr" = "ovl-source: '$D/bad.jsonl': line 2: no field 'text'" ]
	sed -i 2d "$D/bad.jsonl"
	run -1 --separate-stderr "$OVL_SOURCE" --json web "$D/bad.jsonl"
	[ "$stderr" = "ovl-source: '$D/bad.jsonl': line 2: field 'text' is a number, not a string" ]
	sed -i 2d "$D/bad.jsonl"
	run -1 --separate-stderr "$OVL_SOURCE" --json web "$D/bad.jsonl"
	[ "$stderr" = "ovl-source: '$D/bad.jsonl': line 2: invalid JSON at column 15: invalid UTF-8" ]
	# the jansson parser fails on the same line with the same status
	run -1 --separate-stderr "$OVL_SOURCE" --json --json-parser jansson web "$D/bad.jsonl"
	[[ "$stderr" == "ovl-source: '$D/bad.jsonl': line 2: invalid JSON"* ]]
}

@test "jsonl --on-error skip: good lines pass, bad ones are counted by reason" {
	{
		echo '{"text": "good one"}'
		echo '{"text": "broken'
		echo '{"title": "no text"}'
		echo '{"text": 42}'
		printf '{"text": "bad \xff byte"}\n'
		echo
		echo '{"text": "good two"}'
	} > "$D/bad.jsonl"
	for parser in fast jansson; do
		run -0 --separate-stderr "$OVL_SOURCE" --json --text --json-parser $parser \
		    --on-error skip web "$D/bad.jsonl"
		[ "$stderr" = "ovl-source: web: skipped 4 bad records (2 invalid JSON, 1 missing field, 1 field not a string)" ]
		[ "${#lines[@]}" -eq 2 ]
		[[ "${lines[1]}" == *'"pos":[0,0,5],"cursor":"0:0:117:6"'*'"text":"good two"}' ]]
	done
}

@test "text: invalid UTF-8 names the line; a CRLF file loses its CRs" {
	printf 'fine line\r\nbad \xc3\x28 here\r\n' > "$D/u.txt"
	run -1 --separate-stderr "$OVL_SOURCE" --json u "$D/u.txt"
	[ "$stderr" = "ovl-source: '$D/u.txt': line 2: invalid UTF-8 at byte 4 of the record" ]
	run -0 --separate-stderr "$OVL_SOURCE" --json --text --on-error skip u "$D/u.txt"
	[[ "$output" == *'"text":"fine line"}' ]]
}

# long_line FILE BYTES: a jsonl file whose second line is a record of
# exactly BYTES bytes, between two short ones
long_line() {
	{
		echo '{"text": "before"}'
		printf '{"text": "'
		head -c $(($2 - 12)) /dev/zero | tr '\0' a
		echo '"}'
		echo '{"text": "after"}'
	} > "$1"
	[ "$(sed -n 2p "$1" | wc -c)" -eq $(($2 + 1)) ]
}

@test "a line over --max-doc-bytes: file:line, status 1; skip streams past a line three times the limit" {
	# the limit is the record's bytes: 1Mi is read, 1Mi + 1 is not
	long_line "$D/edge.jsonl" $((1024 * 1024))
	"$OVL_SOURCE" --json --max-doc-bytes 1Mi web "$D/edge.jsonl" > "$D/edge.out"
	[ "$(wc -l < "$D/edge.out")" -eq 3 ]
	long_line "$D/edge.jsonl" $((1024 * 1024 + 1))
	run -1 --separate-stderr "$OVL_SOURCE" --json --max-doc-bytes 1Mi web "$D/edge.jsonl"
	[ "${#lines[@]}" -eq 1 ]
	long_line "$D/long.jsonl" 3000000
	run -1 --separate-stderr "$OVL_SOURCE" --json --max-doc-bytes 1Mi web "$D/long.jsonl"
	[ "$stderr" = "ovl-source: '$D/long.jsonl': line 2: record longer than --max-doc-bytes (1048576)" ]
	[ "${#lines[@]}" -eq 1 ]
	run -0 --separate-stderr "$OVL_SOURCE" --json --text --max-doc-bytes 1Mi --on-error skip \
	    web "$D/long.jsonl"
	[ "$stderr" = "ovl-source: web: skipped 1 bad record (1 too long)" ]
	[ "${#lines[@]}" -eq 2 ]
	[[ "${lines[1]}" == *'"pos":[0,0,2],'*'"text":"after"}' ]]
	# compressed, the same
	zstd -q -1 -c "$D/long.jsonl" > "$D/long.jsonl.zst"
	rm "$D/long.jsonl"
	run -1 --separate-stderr "$OVL_SOURCE" --json --max-doc-bytes 1Mi web "$D/long.jsonl.zst"
	[ "$stderr" = "ovl-source: '$D/long.jsonl.zst': line 2: record longer than --max-doc-bytes (1048576)" ]
	run -0 --separate-stderr "$OVL_SOURCE" --json --text --max-doc-bytes 1Mi --on-error skip \
	    web "$D/long.jsonl.zst"
	[ "${#lines[@]}" -eq 2 ]
	[[ "${lines[1]}" == *'"text":"after"}' ]]
}

@test "long records in the other formats: paragraphs, files, tar members" {
	head -c 3000 /dev/zero | tr '\0' b > "$D/long.txt"
	printf 'short\n\nline two\nline three\n\n' >> "$D/long.txt"
	run -1 "$OVL_SOURCE" --json --doc-per file --max-doc-bytes 1Ki b "$D/long.txt"
	[[ "$output" == *"'$D/long.txt': byte offset 0: document longer than --max-doc-bytes (1024)"* ]]
	run -0 --separate-stderr "$OVL_SOURCE" --json --text --doc-per blank-line --max-doc-bytes 1Ki \
	    --on-error skip b "$D/long.txt"
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" == *'"text":"line two\nline three"}' ]]
	run -1 "$OVL_SOURCE" --json --member-ext .md --max-doc-bytes 100 code "$SAMPLES/code/code.tar.zst"
	[[ "$output" == *"member 'docs/"*".md' (group 2): member longer than --max-doc-bytes (100)"* ]]
}

@test "a reader that goes away ends ovl-source quietly (SIGPIPE), no message" {
	# (--repeat: more than any pipe buffer holds)
	run -0 bash -c '"$1" --repeat web "$2" 2>"$3" | head -c 100 > /dev/null; echo "${PIPESTATUS[0]}"' _ \
	    "$OVL_SOURCE" "$SAMPLES/web/web-1.jsonl" "$D/err"
	[ "$output" = 141 ]
	[ ! -s "$D/err" ]
}

@test "random garbage in every format: a clean status, never a crash" {
	for i in 1 2 3 4 5 6; do
		head -c $((i * 7000)) /dev/urandom > "$D/g$i"
		cp "$D/g$i" "$D/g$i.jsonl"
		for f in jsonl text tar wds; do
			run "$OVL_SOURCE" --json --format $f g "$D/g$i"
			[ "$status" -eq 0 ] || [ "$status" -eq 1 ]
			run "$OVL_SOURCE" --json --on-error skip --format $f g "$D/g$i"
			[ "$status" -eq 0 ]
		done
	done
}
