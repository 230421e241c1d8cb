"""Fixtures of the Python tests: the tools of this build and the samples,
as `make check` (scripts/run-tests) names them in the environment."""

import os
import subprocess
import sys

import pytest

BUILD = os.environ.get("OVL_BUILDDIR")
SRC = os.environ.get("OVL_SRCDIR")
if BUILD and "OVL_CRC_LIB" not in os.environ:
    os.environ["OVL_CRC_LIB"] = os.path.join(BUILD, "python", "libovlcrc.so")
if SRC:
    sys.path.insert(0, os.path.join(SRC, "python"))


def tool(name):
    return os.path.join(BUILD, name)


@pytest.fixture(scope="session")
def tools():
    if not BUILD or not SRC:
        pytest.fail("run through make check: OVL_BUILDDIR and OVL_SRCDIR are unset")
    return tool


@pytest.fixture(scope="session")
def samples():
    return os.path.join(SRC, "samples")


@pytest.fixture()
def pipeline(tmp_path, tools, samples):
    """A two-rank plan and the frames ovl-construct writes for it (the
    mixed stream it read is m.fr beside them)."""
    plan = tmp_path / "p.plan"
    web = os.path.join(samples, "web", "web-0.jsonl")
    plan.write_text("source web path=%s\nranks 2\nseq-len 256\ncheckpoint every=4\n" % web)
    src = subprocess.run([tools("ovl-source"), "web", web], check=True,
                         capture_output=True).stdout
    mix = subprocess.run([tools("ovl-mix"), str(plan), "web=-"], input=src,
                         check=True, capture_output=True).stdout
    (tmp_path / "m.fr").write_bytes(mix)
    out = subprocess.run([tools("ovl-construct"), str(plan)], input=mix,
                         check=True, capture_output=True).stdout
    frames = tmp_path / "c.fr"
    frames.write_bytes(out)
    return plan, frames
