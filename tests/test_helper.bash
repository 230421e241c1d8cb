# Loaded by every tests/tNN-*.bats file.
bats_require_minimum_version 1.5.0

: "${OVL_BUILDDIR:?run the tests through make check}"
: "${OVL_SRCDIR:?run the tests through make check}"

OVL_SOURCE="$OVL_BUILDDIR/ovl-source"
OVL_MIX="$OVL_BUILDDIR/ovl-mix"
OVL_CONSTRUCT="$OVL_BUILDDIR/ovl-construct"
OVL_CKPT="$OVL_BUILDDIR/ovl-ckpt"
OVL_RUN="$OVL_BUILDDIR/ovl-run"
OVL_TEST_TOOL="$OVL_BUILDDIR/tests/helper/ovl-test-tool"
SAMPLES="$OVL_SRCDIR/samples"
FIXTURES="$OVL_SRCDIR/tests/fixtures"
export OVL_SOURCE OVL_MIX OVL_CONSTRUCT OVL_CKPT OVL_RUN OVL_TEST_TOOL SAMPLES FIXTURES

# Messages from the tools must not depend on the caller's environment.
unset OVL_VERBOSE OVL_FRAME_MAX

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

# assert_status_ok: every tool's exit must not be a sanitizer report (86/87)
# or a death by signal other than the one a test expects.
ovl_no_crash() {
	[ "$1" -ne 86 ] && [ "$1" -ne 87 ] && { [ "$1" -lt 128 ] || [ "$1" -eq 141 ]; }
}
