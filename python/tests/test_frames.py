"""overlord.frames against the tools: the reader agrees with ovl-construct
--json, checks every CRC, reads a live FIFO while ovl-ckpt writes it, and
gives each rank its steps, an empty one too."""

import json
import os
import struct
import subprocess
import threading

import numpy as np
import pytest

import overlord
from overlord import frames


def test_crc32c_vector_and_c_path():
    assert overlord.crc32c(b"123456789") == 0xE3069283
    assert overlord.crc32c(b"6789", overlord.crc32c(b"12345")) == 0xE3069283
    assert frames.crc32c.__module__ == "overlord._crc"
    # make check builds the C object: the fast path is in use
    assert overlord.CRC_IN_C


def test_sequences_equal_construct_json(pipeline, tools):
    plan, fr = pipeline
    mixed = (fr.parent / "m.fr").read_bytes()
    js = subprocess.run([tools("ovl-construct"), "--json", str(plan)], input=mixed,
                        capture_output=True, check=True).stdout.decode().splitlines()
    want = [json.loads(l) for l in js]
    want_seqs = [o for o in want if o["kind"] == "seq"]
    got = [x for x in overlord.read(str(fr)) if isinstance(x, overlord.Seq)]
    assert len(got) == len(want_seqs) > 50
    for s, o in zip(got, want_seqs):
        assert (s.step, s.rank, s.mb) == (o["step"], o["rank"], o["mb"])
        # bytes tokenizer, 257 ids: 16-bit arrays (ovl-frame(5) minor 2)
        assert s.tokens.dtype == np.dtype("<u2")
        assert s.tokens.tolist() == o["tokens"]
        assert s.positions.tolist() == o["positions"]
        assert s.cu_seqlens.tolist() == o["cu_seqlens"]
    ends = [x for x in overlord.read(str(fr)) if isinstance(x, overlord.StepEnd)]
    assert len(ends) == len({(o["step"], o["rank"]) for o in want if o["kind"] == "step"})


def test_both_widths_read_the_same(pipeline, tools):
    """The same mixed stream through ovl-construct with 16-bit arrays and
    derived positions, and with minor 1's 32-bit arrays: the reader gives
    the same tokens (uint16 and uint32 views), positions and cu_seqlens."""
    plan, fr = pipeline
    mixed = (fr.parent / "m.fr").read_bytes()
    wide = fr.parent / "c32.fr"
    wide.write_bytes(subprocess.run(
        [tools("ovl-construct"), "--token-bits", "32", str(plan)], input=mixed,
        capture_output=True, check=True).stdout)
    assert wide.stat().st_size > fr.stat().st_size
    narrow = [x for x in overlord.read(str(fr)) if isinstance(x, overlord.Seq)]
    broad = [x for x in overlord.read(str(wide)) if isinstance(x, overlord.Seq)]
    assert len(narrow) == len(broad) > 50
    for a, b in zip(narrow, broad):
        assert a.tokens.dtype == np.dtype("<u2") and b.tokens.dtype == np.dtype("<u4")
        assert (a.step, a.rank, a.mb, a.seq_len) == (b.step, b.rank, b.mb, b.seq_len)
        assert np.array_equal(a.tokens, b.tokens)
        assert np.array_equal(a.positions, b.positions)
        assert np.array_equal(a.cu_seqlens, b.cu_seqlens)
    # a bit flipped in a 16-bit SEQ's flags is caught by its CRC
    data = bytearray(fr.read_bytes())
    off = next(f.offset for f in overlord.Reader(str(fr)) if f.kind == frames.SEQ)
    # 16-bit tokens, positions not sent (they restart at every piece)
    assert data[off + 5] == frames.FL_U16 | frames.FL_NOPOS
    data[off + 5] = 0
    bad = fr.parent / "bad.fr"
    bad.write_bytes(bytes(data))
    with pytest.raises(frames.FrameError, match="bad CRC"):
        list(overlord.read(str(bad)))


def test_meta_and_barriers(pipeline):
    _, fr = pipeline
    r = overlord.Reader(str(fr))
    kinds = [f.name for f in r]
    assert kinds[0] == "META" and kinds[-1] == "END"
    assert r.meta["ranks"] == ["2"] and r.meta["seq-len"] == ["256"]
    assert r.minor == overlord.frames.MINOR == 2
    bars = [x for x in overlord.read(str(fr)) if isinstance(x, overlord.Barrier)]
    assert [b.n for b in bars] == list(range(1, len(bars) + 1)) and len(bars) > 2


def test_bad_crc_truncation_and_header_name_the_offset(pipeline, tmp_path):
    _, fr = pipeline
    data = bytearray(fr.read_bytes())
    # the first SEQ's payload: after the stream header and the META frame
    meta_len = int.from_bytes(data[16:20], "little")
    seq_off = 16 + 12 + meta_len
    bad = tmp_path / "bad.fr"
    data2 = bytearray(data)
    data2[seq_off + 12 + 40] ^= 1
    bad.write_bytes(data2)
    with pytest.raises(overlord.FrameError, match="bad CRC at byte offset %d" % seq_off):
        list(overlord.read(str(bad)))
    cut = tmp_path / "cut.fr"
    cut.write_bytes(data[:len(data) - 8])
    with pytest.raises(overlord.FrameError, match="truncated stream"):
        list(overlord.read(str(cut)))
    notours = tmp_path / "x.fr"
    notours.write_bytes(b"not a stream at all")
    with pytest.raises(overlord.FrameError, match="bad magic"):
        list(overlord.read(str(notours)))


def test_live_fifos_per_rank_steps(pipeline, tools, tmp_path):
    """Two ranks read their FIFOs while ovl-ckpt writes them; each gets its
    steps whole, and the union is the stream's every sequence."""
    plan, fr = pipeline
    fifos = [tmp_path / ("rank%d" % r) for r in (0, 1)]
    for f in fifos:
        os.mkfifo(f)
    ck = subprocess.Popen([tools("ovl-ckpt"), "--dir", str(tmp_path / "ck"),
                           "-p", str(tmp_path / "rank%d"), str(plan)],
                          stdin=open(fr, "rb"))
    got, errors = {}, []

    def rank(r):
        try:
            got[r] = list(overlord.steps(str(fifos[r])))
        except Exception as e:  # reported below, with the rank
            errors.append((r, repr(e)))

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert ck.wait(60) == 0
    all_seqs = [x for x in overlord.read(str(fr)) if isinstance(x, overlord.Seq)]
    for r in (0, 1):
        steps = [s for s, _ in got[r]]
        assert steps == sorted(set(steps)) and len(steps) > 10
        mine = [s for _, seqs in got[r] for s in seqs]
        assert all(s.rank == r for s in mine)
        assert [s.tokens.tolist() for s in mine] == \
            [s.tokens.tolist() for s in all_seqs if s.rank == r]


def test_empty_step_reaches_its_rank(tools, tmp_path):
    gen = subprocess.run([os.path.join(os.environ["OVL_BUILDDIR"], "scripts",
                                       "ovl-gendocs"), "--docs", "3", "--median",
                          "100", "--seed", "1"], capture_output=True, check=True).stdout
    out = subprocess.run([tools("ovl-construct"), "--ranks", "4", "--seq-len", "256"],
                         input=gen, capture_output=True, check=True).stdout
    f = tmp_path / "few.fr"
    f.write_bytes(out)
    ends = [x for x in overlord.read(str(f)) if isinstance(x, overlord.StepEnd)]
    assert [(e.step, e.rank) for e in ends] == [(0, r) for r in range(4)]
    assert [e.seqs for e in ends].count(0) >= 1


def test_offline_npy_and_megatron_in_the_loaders_order(pipeline, tools, tmp_path):
    """The step-ordered readers of the npy and Megatron outputs give the
    sequences of ovl-construct --json, in its order."""
    from overlord import offline
    plan, fr = pipeline
    mixed = (fr.parent / "m.fr").read_bytes()
    want = [json.loads(l) for l in subprocess.run(
        [tools("ovl-construct"), "--json", str(plan)], input=mixed,
        capture_output=True, check=True).stdout.decode().splitlines()]
    want = [o for o in want if o["kind"] == "seq"]
    for fmt in ("npy", "megatron"):
        subprocess.run([tools("ovl-ckpt"), "--dir", str(tmp_path / ("ck" + fmt)),
                        "--format", fmt, "-o", str(tmp_path / fmt / "x"), str(plan)],
                       stdin=open(fr, "rb"), check=True)
    got = list(offline.npy(str(tmp_path / "npy" / "x")))
    assert len(got) == len(want)
    for s, o in zip(got, want):
        assert (s.step, s.rank, s.mb) == (o["step"], o["rank"], o["mb"])
        assert s.tokens.tolist() == o["tokens"]
        assert s.positions.tolist() == o["positions"]
        assert s.cu_seqlens.tolist() == o["cu_seqlens"]
    meg = list(offline.megatron(str(tmp_path / "megatron" / "x")))
    assert [m.tokens.tolist() for m in meg] == [o["tokens"] for o in want]
    steps = [k for k, _ in offline.by_step(got)]
    assert steps == sorted(set(steps))


def test_positions_of_a_seq_sent_without_them():
    """NOPOS: the position ids made from cu_seqlens, in C (libovlcrc.so)
    and in numpy, equal a plain loop's, padding 0; bad cu_seqlens never
    write outside the array."""
    import numpy as np
    from overlord import _crc, frames
    rng = np.random.default_rng(7)
    fns = dict(_crc.positions_at)
    assert fns, "libovlcrc.so has no ovl_py_positions (OVL_CRC_LIB)"
    for _ in range(500):
        ntok = int(rng.integers(1, 300))
        cu = np.concatenate([[0], np.cumsum(rng.integers(1, 60, int(rng.integers(0, 12))))])
        cu = cu[cu <= ntok].astype(np.uint32)
        want = np.zeros(ntok, np.int64)
        for a, b in zip(cu[:-1], cu[1:]):
            want[a:b] = np.arange(b - a)
        for c in (True, False):
            _crc.positions_at.clear()
            if c:
                _crc.positions_at.update(fns)
            try:
                p32 = frames._positions(cu, ntok)
                p64 = frames._positions(cu, ntok, np.int64)
            finally:
                _crc.positions_at.clear()
                _crc.positions_at.update(fns)
            assert p32.dtype == np.uint32 and p64.dtype == np.int64
            assert (p32 == want).all() and (p64 == want).all()
    bad = np.array([0, 50, 20, 400], np.uint32)
    assert len(frames._positions(bad, 100, np.int64)) == 100


def _stream(*frs):
    """A stream of (kind, payload) frames after META, with right CRCs."""
    crc, out = frames.crc32c, bytearray()
    h = frames.MAGIC + struct.pack("<HH", frames.MAJOR, frames.MINOR)
    out += h + struct.pack("<I", crc(h))
    text = b"version x\n"
    meta = struct.pack("<II", len(text), 0) + text + b"\0" * (-len(text) % 4)
    for kind, payload in ((frames.META, meta),) + frs:
        hd = struct.pack("<IBBH", len(payload), kind, 0, 0)
        out += hd + struct.pack("<I", crc(payload, crc(hd))) + payload
    return bytes(out)


@pytest.mark.parametrize("kind,n", [(frames.STEP, 8), (frames.STEP, 12),
                                    (frames.BARRIER, 16), (frames.BARRIER, 36)])
def test_short_step_and_barrier_are_frame_errors(tmp_path, kind, n):
    f = tmp_path / "s.fr"
    end = struct.pack("<QQ", 2, 0)
    f.write_bytes(_stream((kind, b"\0" * n), (frames.END, end)))
    with pytest.raises(overlord.FrameError, match="malformed"):
        list(frames.steps(str(f)))


def test_end_of_another_length_is_refused(tmp_path):
    f = tmp_path / "e.fr"
    f.write_bytes(_stream((frames.END, struct.pack("<Q", 1))))
    with pytest.raises(overlord.FrameError, match="END frame of 8 bytes"):
        list(overlord.read(str(f)))
    f.write_bytes(_stream((frames.END, struct.pack("<QQ", 1, 0))))
    assert [fr.kind for fr in frames.Reader(str(f))][-1] == frames.END
