"""The C walk of a block's frames (python/overlord/_fast.c: ovl_py_walk,
ovl_py_fill) against the reader's frame-by-frame path (the one used
without libovlcrc.so): the same items, the same tensors, the same errors
at the same byte offsets, on every layout of ovl-frame(5) minor 2 and on
damaged streams."""

import contextlib
import random
import subprocess

import numpy as np
import pytest

import overlord
from overlord import _crc, frames

torch = pytest.importorskip("torch")
from overlord import torch as otorch  # noqa: E402


@contextlib.contextmanager
def frame_by_frame(crc=False):
    """The reader without its C walk and C positions (numpy), as without
    libovlcrc.so; with crc, the CRC in Python too."""
    walk, pos, at = dict(_crc.walk_at), dict(_crc.positions_at), _crc.crc32c_at
    _crc.walk_at.clear()
    _crc.positions_at.clear()
    if crc:
        _crc.crc32c_at = None
    try:
        yield
    finally:
        _crc.walk_at.update(walk)
        _crc.positions_at.update(pos)
        _crc.crc32c_at = at


def both(fn):
    """fn() with the C walk, then frame by frame."""
    assert _crc.walk_at, "libovlcrc.so has no ovl_py_walk (OVL_CRC_LIB)"
    a = fn()
    with frame_by_frame():
        b = fn()
    return a, b


def items(src, **kw):
    """read's items as plain values (views copied), or the error."""
    out = []
    try:
        for x in overlord.read(src, **kw):
            if isinstance(x, overlord.Seq):
                out.append(("seq", x.step, x.rank, x.mb, x.seq_len, x.flags,
                            x.tokens.dtype.str, x.tokens.tolist(),
                            x.positions.tolist(), x.cu_seqlens.tolist(),
                            [(i.seq_pos, i.ntokens) for i in x.images]))
            elif isinstance(x, overlord.StepEnd):
                out.append(("step", x.step, x.rank, x.seqs))
            else:
                out.append(("barrier", x.n, x.step))
    except Exception as e:  # compared: the same type and message
        out.append(("error", type(e).__name__, str(e)))
    return out


def batches(src, dtype=torch.int64, **kw):
    """RankDataset's steps as plain values, or the error."""
    out = []
    try:
        for it in otorch.RankDataset(src, dtype=dtype, **kw):
            out.append(("step", it["step"]))
            for mb in it["micro_batches"]:
                assert mb["input_ids"].dtype == dtype and mb["position_ids"].dtype == dtype
                assert mb["labels"].dtype == torch.int64
                assert mb["cu_seqlens"].dtype == torch.int32
                out.append(sorted((k, v.tolist() if hasattr(v, "tolist") else v)
                                  for k, v in mb.items()))
    except Exception as e:
        out.append(("error", type(e).__name__, str(e)))
    return out


def per_rank(tools, plan, fr, tmp_path, name):
    subprocess.run([tools("ovl-ckpt"), "--dir", str(tmp_path / ("ck" + name)), "-p",
                    str(tmp_path / (name + "%d")), str(plan)], stdin=open(fr, "rb"),
                   check=True, capture_output=True)
    return [str(tmp_path / (name + "%d" % r)) for r in (0, 1)]


@pytest.fixture()
def layouts(pipeline, tools, tmp_path, samples):
    """Per-rank streams in every array layout: 16-bit ids without
    positions (the default), 32-bit ids and positions (--token-bits 32),
    16-bit positions that go on across pieces (long-docs=split-continue),
    three micro-batches a step (a step's SEQs filled at once), and fixed
    shapes (padding after the last real token)."""
    plan, fr = pipeline
    mixed = (fr.parent / "m.fr").read_bytes()
    out = {"u16": per_rank(tools, plan, fr, tmp_path, "a")}
    wide = tmp_path / "wide.fr"
    wide.write_bytes(subprocess.run([tools("ovl-construct"), "--token-bits", "32", str(plan)],
                                    input=mixed, capture_output=True, check=True).stdout)
    out["u32"] = per_rank(tools, plan, wide, tmp_path, "b")
    web = "%s/web/web-0.jsonl" % samples
    for name, extra in (("pos16", "long-docs split-continue\n"), ("mb3", "micro-batches 3\n"),
                        ("fixed", "uniform yes\nmicro-batches 2\n")):
        p = tmp_path / (name + ".plan")
        p.write_text("source web path=%s\nranks 2\nseq-len 256\ncheckpoint every=4\n%s"
                     % (web, extra))
        src = subprocess.run([tools("ovl-source"), "web", web], check=True,
                             capture_output=True).stdout
        mix = subprocess.run([tools("ovl-mix"), str(p), "web=-"], input=src, check=True,
                             capture_output=True).stdout
        f = tmp_path / (name + ".fr")
        f.write_bytes(subprocess.run([tools("ovl-construct"), str(p)], input=mix,
                                     check=True, capture_output=True).stdout)
        out[name] = per_rank(tools, p, f, tmp_path, name)
    out["all"] = [str(fr)]      # both ranks in one stream
    return out


def test_every_layout_the_same_both_ways(layouts):
    for name, paths in layouts.items():
        for path in paths:
            a, b = both(lambda: items(path))
            assert a == b and len(a) > 20, name
            assert a[-1][0] != "error", (name, a[-1])
            steps_a, steps_b = both(lambda: [(s, [q.tokens.tolist() for q in qs])
                                             for s, qs in overlord.steps(path)])
            assert steps_a == steps_b
            if name == "all":
                continue
            for dtype in (torch.int64, torch.int32):
                a, b = both(lambda: batches(path, dtype))
                assert a == b and len(a) > 20, (name, dtype)
                assert a[-1][0] != "error", (name, a[-1])
    # the layouts are what their names say
    flags = {name: {f.flags for f in frames.Reader(paths[0]) if f.kind == frames.SEQ}
             for name, paths in layouts.items()}
    assert flags["u16"] == {frames.FL_U16 | frames.FL_NOPOS}
    assert flags["u32"] == {0}
    assert frames.FL_U16 | frames.FL_POS16 in flags["pos16"]
    mbs = [len(it["micro_batches"]) for it in otorch.RankDataset(layouts["mb3"][0])]
    assert sum(m >= 3 for m in mbs) > 10


def test_tensors_against_a_plain_loop(layouts):
    """The walked micro-batches hold what a plain Python loop over each
    SEQ's tokens and cu_seqlens makes: ids, positions restarting at every
    piece (or as sent), labels the next token but at piece ends and in the
    padding."""
    padded = 0
    for name, path in [(n, p) for n in ("u16", "u32", "mb3", "pos16", "fixed")
                       for p in layouts[n]]:
        seqs = [s for s in overlord.read(path) if isinstance(s, overlord.Seq)]
        mbs = [mb for it in otorch.RankDataset(path) for mb in it["micro_batches"]]
        assert len(seqs) == len(mbs) > 20
        for s, mb in zip(seqs, mbs):
            tok = [int(t) for t in s.tokens]
            cu = [int(c) for c in s.cu_seqlens]
            n, real = len(tok), cu[-1]
            pos = [0] * n
            lab = [-100] * n
            for a, b in zip(cu, cu[1:]):
                for k in range(a, b):
                    pos[k] = k - a
                    if k + 1 < b:
                        lab[k] = tok[k + 1]
            if name == "pos16":
                pos = [int(p) for p in s.positions]
            assert mb["input_ids"].tolist() == tok
            assert mb["position_ids"].tolist() == pos
            assert mb["labels"].tolist() == lab
            assert mb["cu_seqlens"].tolist() == cu and real <= n
            padded += real < n
    assert padded > 0


def rewrite(data, off, fn):
    """The frame at off of data (a bytearray) with its payload changed by
    fn(payload) and its CRC made again."""
    ln = int.from_bytes(data[off:off + 4], "little")
    p = bytearray(data[off + 12:off + 12 + ln])
    fn(p)
    data[off + 12:off + 12 + ln] = p
    crc = overlord.crc32c(bytes(p), overlord.crc32c(bytes(data[off:off + 8])))
    data[off + 8:off + 12] = crc.to_bytes(4, "little")


def cu_at(payload, flags):
    ntok, npieces = frames._SEQ_COUNTS.unpack_from(payload, 16)
    return frames._seq_layout(ntok, npieces, flags)[3], ntok, npieces


@pytest.mark.parametrize("how", ["down", "past", "start"])
def test_bad_cu_seqlens_name_the_frame(layouts, tmp_path, how):
    """cu_seqlens that go down, end past the tokens or start above 0: the
    reader's error naming the SEQ's byte offset, with the C walk and
    without it (where numpy's repeat used to fail unclearly, and C wrote
    whatever they held)."""
    path, f = next((p, f) for p in layouts["u16"] for f in frames.Reader(p)
                   if f.kind == frames.SEQ and cu_at(f.payload, f.flags)[2] >= 2)
    data = bytearray(open(path, "rb").read())
    at, ntok, npieces = cu_at(f.payload, f.flags)

    def damage(p):
        cu = np.frombuffer(p, "<u4", npieces + 1, at).copy()
        if how == "down":
            assert cu[1] > 0
            cu[2] = cu[1] - 1
        elif how == "past":
            cu[-1] = ntok + 1
        else:
            cu[0] = 1
        p[at:at + 4 * (npieces + 1)] = cu.tobytes()

    rewrite(data, f.offset, damage)
    bad = tmp_path / "bad.fr"
    bad.write_bytes(bytes(data))
    want = "malformed SEQ frame \\(cu_seqlens .* at byte offset %d$" % f.offset
    for crc in (False, True):
        with contextlib.ExitStack() as st:
            if crc:
                st.enter_context(frame_by_frame(crc=True))
            with pytest.raises(overlord.FrameError, match=want):
                list(overlord.read(str(bad)))
            with pytest.raises(overlord.FrameError, match=want):
                list(otorch.RankDataset(str(bad)))
    with frame_by_frame():
        with pytest.raises(overlord.FrameError, match=want):
            list(otorch.RankDataset(str(bad)))


def test_damaged_streams_the_same_both_ways(layouts, tmp_path):
    """Bytes changed at random in SEQ and STEP frames (their CRCs made
    again, so the grammar meets them; and not, so the CRC does): the C
    walk and the frame-by-frame reader give the same items, or the same
    error at the same byte offset."""
    rng = random.Random(11)
    for name in ("u16", "u32", "pos16", "mb3", "fixed"):
        path = layouts[name][0]
        clean = open(path, "rb").read()
        offs = [(f.offset, len(f.payload), f.kind) for f in frames.Reader(path)
                if f.kind in (frames.SEQ, frames.STEP)]
        errors = 0
        for trial in range(40):
            data = bytearray(clean)
            off, ln, kind = offs[rng.randrange(len(offs))]
            # the SEQ header's counts and the arrays' ends are where the
            # checks are; anywhere in the payload otherwise
            where = rng.choice([16, 20, 17, 21, ln - 40 * 1 + 36, ln - 4,
                                rng.randrange(ln)]) if kind == frames.SEQ else rng.randrange(ln)
            where = min(max(where, 0), ln - 1)
            fix = trial % 4 != 0

            def change(p):
                p[where] ^= 1 << rng.randrange(8)

            if fix:
                rewrite(data, off, change)
            else:
                data[off + 12 + where] ^= 0x10
            if trial % 5 == 0:
                data[off + 5] ^= 1 << rng.randrange(3)     # the frame flags
                if fix:
                    rewrite(data, off, lambda p: None)
            bad = tmp_path / ("d%d.fr" % trial)
            bad.write_bytes(bytes(data))
            a, b = both(lambda: items(str(bad)))
            assert a == b, (name, trial, where)
            errors += a[-1][0] == "error"
            a, b = both(lambda: batches(str(bad)))
            assert a == b, (name, trial, where)
        assert errors >= 10, name


def test_without_the_c_library_at_all(pipeline, tools, tmp_path):
    """CRC, positions and tensors in Python and numpy only: the same as
    with libovlcrc.so (a small stream: the Python CRC is slow)."""
    plan, fr = pipeline
    path = per_rank(tools, plan, fr, tmp_path, "s")[1]
    a = items(path)
    b = batches(path)
    with frame_by_frame(crc=True):
        assert items(path) == a
        assert batches(path) == b
    assert a[-1][0] != "error" and b[-1][0] != "error"


def test_an_empty_step_both_ways(tools, tmp_path):
    """A rank with nothing in a step gets the step, with no micro-batch,
    from the C walk as frame by frame."""
    import os
    gen = subprocess.run([os.path.join(os.environ["OVL_BUILDDIR"], "scripts", "ovl-gendocs"),
                          "--docs", "3", "--median", "100", "--seed", "1"],
                         capture_output=True, check=True).stdout
    out = subprocess.run([tools("ovl-construct"), "--ranks", "4", "--seq-len", "256"],
                         input=gen, capture_output=True, check=True).stdout
    subprocess.run([tools("ovl-ckpt"), "--dir", str(tmp_path / "ck"), "-p",
                    str(tmp_path / "r%d")], input=out, capture_output=True, check=True)
    got = []
    for r in range(4):
        a, b = both(lambda: batches(str(tmp_path / ("r%d" % r))))
        assert a == b and a[-1][0] != "error"
        got.append(a)
    assert [("step", 0)] in got         # a rank whose step 0 is empty
    assert any(len(a) > 1 for a in got)
