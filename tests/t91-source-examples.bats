#!/usr/bin/env bats
# The EXAMPLES of ovl-source(1) and ovl(7), taken from the pages themselves
# (every .Bd -literal block), run against samples/: each must succeed and
# print or write something.

load test_helper

setup() {
	T=$BATS_TEST_TMPDIR
	ln -s "$SAMPLES" "$T/samples"
	PATH="$OVL_BUILDDIR:$PATH"
}

# examples PAGE: write the page's example blocks to $T/ex.N.sh, print N.
examples() {
	python3 - "$1" "$T" <<'EOF'
import sys
lines = open(sys.argv[1]).read().split("\n")
out, n, block, inex = sys.argv[2], 0, None, False
for l in lines:
    if l.startswith(".Sh "):
        inex = l == ".Sh EXAMPLES"
    elif inex and l.startswith(".Bd -literal"):
        block = []
    elif inex and l == ".Ed" and block is not None:
        n += 1
        open("%s/ex.%d.sh" % (out, n), "w").write(
            "\n".join(block).replace("\\e", "\\").replace("\\&", "") + "\n")
        block = None
    elif block is not None:
        block.append(l)
print(n)
EOF
}

# run_examples PAGE MIN: run every block; at least MIN of them.
run_examples() {
	local n i
	n=$(examples "$1")
	[ "$n" -ge "$2" ] || { echo "only $n examples in $1"; return 1; }
	for ((i = 1; i <= n; i++)); do
		rm -rf "$T/w" && mkdir "$T/w" && ln -s "$SAMPLES" "$T/w/samples"
		(cd "$T/w" && bash -e "$T/ex.$i.sh" > "$T/out.$i" 2> "$T/err.$i") ||
			{ echo "example $i of $1 failed:"; cat "$T/ex.$i.sh" "$T/err.$i"; return 1; }
		# output on stdout, or files written
		if [ ! -s "$T/out.$i" ] && [ -z "$(find "$T/w" -type f -size +0)" ]; then
			echo "example $i of $1 produced nothing:"; cat "$T/ex.$i.sh"; return 1
		fi
		if [ -s "$T/err.$i" ]; then
			echo "example $i of $1 wrote to stderr:"; cat "$T/ex.$i.sh" "$T/err.$i"; return 1
		fi
	done
}

@test "ovl-source(1) EXAMPLES run against samples/" {
	run_examples "$OVL_SRCDIR/man/ovl-source.1" 6
	# the resume example continues after the fifth document
	grep -q '"pos":\[0,0,5\]' "$T/out.5"
	[ "$(wc -l < "$T/out.5")" -eq 295 ]
}

@test "ovl(7) EXAMPLES run against samples/" {
	[ -x "$OVL_CONSTRUCT" ] && [ -x "$OVL_MIX" ] || skip "ovl-construct or ovl-mix not built"
	run_examples "$OVL_SRCDIR/man/ovl.7" 4
}
