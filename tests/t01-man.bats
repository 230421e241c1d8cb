#!/usr/bin/env bats
# Every tool's page against the tool itself, in one loop (as git's t0450
# checks every -h): the SYNOPSIS is the --help usage, --help and --version
# write to standard output only and exit 0, a bad option exits 2 with the
# usage on standard error, and the page has EXAMPLES (run by t29, t9x).

load test_helper

@test "every section 1 page: SYNOPSIS equals --help, --help/--version on stdout, bad options exit 2, EXAMPLES present" {
	local page tool n=0 bad=
	cd "$BATS_TEST_TMPDIR"
	for page in "$OVL_SRCDIR"/man/*.1; do
		page=${page##*/}
		tool=$OVL_BUILDDIR/${page%.1}
		[ -x "$tool" ] || { echo "no tool for $page"; return 1; }
		n=$((n + 1))
		man_synopsis "$page" > man.txt
		help_synopsis "$tool" > help.txt
		[ -s man.txt ] || bad+=" $page:empty-synopsis"
		cmp -s man.txt help.txt || { diff man.txt help.txt; bad+=" $page:synopsis"; }
		run -0 --separate-stderr "$tool" --help
		[ -z "$stderr" ] && [[ "${lines[0]}" == "usage: ${page%.1} "* ]] ||
		    bad+=" $page:help"
		run -0 --separate-stderr "$tool" --version
		[ -z "$stderr" ] && [[ "$output" =~ ^${page%.1}\ [0-9]+\.[0-9]+\.[0-9]+$ ]] ||
		    bad+=" $page:version"
		run -2 --separate-stderr "$tool" --no-such-option
		[ -z "$output" ] && [[ "$stderr" == *"usage: ${page%.1} "* ]] ||
		    bad+=" $page:bad-option"
		[ "$(man_examples "$page" "$BATS_TEST_TMPDIR")" -ge 1 ] ||
		    bad+=" $page:no-examples"
	done
	[ "$n" -eq 7 ]
	[ -z "$bad" ] || { echo "failed:$bad"; return 1; }
}

@test "the helpers themselves: man_examples undoes mdoc escapes, help_synopsis keeps every form" {
	cd "$BATS_TEST_TMPDIR"
	mkdir -p man
	cat > man/t.1 <<'PAGE'
.Sh EXAMPLES
.Dl one \e line
.Bd -literal
echo a \e
    b
printf '%s\en' \&...
.Ed
.Sh SEE ALSO
.Bd -literal
not an example
.Ed
PAGE
	OVL_SRCDIR=$BATS_TEST_TMPDIR run -0 man_examples t.1 "$BATS_TEST_TMPDIR"
	[ "$output" = 2 ]
	[ "$(cat ex.1.sh)" = 'one \ line' ]
	[ "$(cat ex.2.sh)" = "$(printf '%s\n' 'echo a \' '    b' "printf '%s\\n' ...")" ]
	run -0 help_synopsis "$OVL_CKPT"
	[ "${#lines[@]}" -eq 7 ]
	[ "${lines[1]}" = "ovl-ckpt show [--json | --list | --print0] CKPTDIR [--at N ...]" ]
}
