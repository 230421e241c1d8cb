"""Build overlord with its C walk: libovlcrc.so (the project's CRC-32C,
src/lib/crc32c.c, and overlord/_fast.c) goes into the package, next to
_crc.py, which loads it. Built from the source tree (pip install ./python
in a checkout); when it cannot be built the install goes on and says so
loudly: overlord then checks CRCs and walks frames in pure Python."""

import os
import subprocess
import sys
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.normpath(os.path.join(HERE, "..", "src", "lib"))
SOURCES = [os.path.join(LIB, "crc32c.c"), os.path.join(HERE, "overlord", "_fast.c")]

FALLBACK = """
**********************************************************************
overlord: the C walk (libovlcrc.so) was NOT built: %s.
overlord falls back to CRC-32C and frame walks in pure Python, about a
thousand times slower: a trainer reading more than a few MB/s waits on
it (make bench BENCH_ARGS=python measures both). Install from a
checkout with a C compiler, or build it with make and set OVL_CRC_LIB.
**********************************************************************
"""


def build_walk(out):
    """Compile libovlcrc.so to out; None, or why it could not be built."""
    missing = [s for s in SOURCES if not os.path.exists(s)]
    if missing:
        return "no %s (not a checkout of overlord)" % missing[0]
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cmd = cc.split() + ["-std=c11", "-O3", "-fPIC", "-shared", "-I" + LIB,
                        "-o", out] + SOURCES
    try:
        subprocess.run(cmd, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        return "%s failed (%s)" % (" ".join(cmd), e)
    return None


class BuildWithWalk(build_py):
    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "overlord", "libovlcrc.so")
        why = build_walk(out)
        if why is not None:
            sys.stderr.write(FALLBACK % why)


class PlatformDistribution(Distribution):
    """A wheel with a shared object is for one platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithWalk}, distclass=PlatformDistribution)
