"""Trainers ride through a restarted loader: RankDataset over per-rank
FIFOs and UNIX sockets written by a real ovl-ckpt, which is SIGKILLed
mid-run and restarted with the options ``ovl-ckpt restore --print0``
prints (its input the resumed pipeline: ovl-source, ovl-mix and
ovl-construct with their restore options). The readers never raise, and
their tensors equal an uninterrupted run's. Then the new stream of a
restarted writer in the same open FIFO right after a partial frame of the
old one, and a new stream that would skip steps (a FrameError naming the
gap)."""

import os
import signal
import subprocess
import threading
import time

import pytest

torch = pytest.importorskip("torch")

import overlord  # noqa: E402
from overlord import frames  # noqa: E402
from overlord import torch as otorch  # noqa: E402

CUT_STEP = 43       # ovl-ckpt is fed the stream up to the first SEQ of it
SECRET = "a secret of this test run, 32 b"


def tensors(items):
    """{step: [micro-batch dicts, cloned]} of RankDataset items."""
    return {i["step"]: [{k: v.clone() for k, v in mb.items()}
                        for mb in i["micro_batches"]] for i in items}


def assert_same(got, want):
    assert sorted(got) == sorted(want)
    for st in want:
        assert len(got[st]) == len(want[st]), st
        for a, b in zip(got[st], want[st]):
            assert a.keys() == b.keys()
            for k in a:
                assert torch.equal(a[k], b[k]), (st, k)


def restore(tools, ck):
    """{stage key: [options]} of ovl-ckpt restore --print0."""
    out = subprocess.run([tools("ovl-ckpt"), "restore", "--print0", str(ck)],
                         check=True, capture_output=True).stdout.decode()
    opts = {}
    for rec in out.split("\0\0"):
        if rec:
            words = rec.split("\0")
            opts[words[0]] = words[1:]
    return opts


def resumed_input(tools, plan, web, opts):
    """The construct stream a restarted ovl-ckpt reads: the pipeline run
    again from the checkpoint with its restore options."""
    (key,) = [k for k in opts if k.startswith("source:web:")]
    src = subprocess.run([tools("ovl-source"), "web", web] + opts[key],
                         check=True, capture_output=True).stdout
    mix = subprocess.run([tools("ovl-mix"), str(plan), "web=-"] + opts["mix"],
                         input=src, check=True, capture_output=True).stdout
    return subprocess.run([tools("ovl-construct"), str(plan)] + opts["construct"],
                          input=mix, check=True, capture_output=True).stdout


def cut_offset(fr, step):
    """The byte offset of the first SEQ frame of step in the stream fr."""
    for f in frames.Reader(str(fr)):
        if f.kind == frames.SEQ and frames._SEQ.unpack_from(f.payload)[0] == step:
            return f.offset
    raise AssertionError("no step %d" % step)


@pytest.fixture()
def run(pipeline, tools, samples, tmp_path):
    """The plan, the construct stream, the source, and the uninterrupted
    run's per-rank tensors (ovl-ckpt to files, read by RankDataset)."""
    plan, fr = pipeline
    ref = tmp_path / "ref"
    ref.mkdir()
    subprocess.run([tools("ovl-ckpt"), "--dir", str(ref / "ck"), "-p",
                    str(ref / "r%d"), str(plan)], stdin=open(fr, "rb"), check=True)
    want = [tensors(otorch.RankDataset(str(ref / ("r%d" % r)))) for r in (0, 1)]
    assert len(want[0]) > CUT_STEP + 20
    return plan, fr, os.path.join(samples, "web", "web-0.jsonl"), want, ref


def take(it, upto):
    """Items of the iterator it up to step upto included."""
    got = []
    for i in it:
        got.append(i)
        if i["step"] == upto:
            return got
    raise AssertionError("the stream ended before step %d" % upto)


def kill_and_restart(tools, plan, fr, web, ck, pattern, dss, *, env=None,
                     restart=True):
    """ovl-ckpt -p pattern fed fr up to CUT_STEP, the readers dss taking
    every step before it; SIGKILLed then (restart: started again from its
    checkpoint). The readers' items, per rank, and the restarted sink."""
    its = [iter(ds) for ds in dss]     # the readers are there first
    sink = subprocess.Popen([tools("ovl-ckpt"), "--dir", str(ck), "-p", pattern,
                             str(plan)], stdin=subprocess.PIPE, env=env)
    data = fr.read_bytes()
    sink.stdin.write(data[:cut_offset(fr, CUT_STEP)])
    sink.stdin.flush()
    got = [take(it, CUT_STEP - 1) for it in its]
    wait_checkpoint(tools, ck, 10)
    sink.kill()
    assert sink.wait() == -signal.SIGKILL
    sink.stdin.close()
    opts = restore(tools, ck)
    # checkpoint 10 (before step 40): the new streams repeat steps 40 to 42
    assert opts["ckpt"] == ["--resume", "10"]
    again = None
    if restart:
        again = subprocess.Popen([tools("ovl-ckpt"), "--dir", str(ck), "-p", pattern,
                                  str(plan)] + opts["ckpt"], stdin=subprocess.PIPE,
                                 env=env)
        threading.Thread(target=feed, args=(again, resumed_input(
            tools, plan, web, opts)), daemon=True).start()
    return its, got, again


def wait_checkpoint(tools, ck, n):
    """Wait until checkpoint n is committed in ck (ovl-ckpt commits it
    after the steps before it went out)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        out = subprocess.run([tools("ovl-ckpt"), "show", "--list", str(ck)],
                             capture_output=True, text=True).stdout.split("\n")
        last = [ln.split()[0] for ln in out if ln[:1].isdigit()]
        if last and int(last[-1]) >= n:
            return
        time.sleep(0.05)
    raise AssertionError("checkpoint %d never committed" % n)


def feed(p, data):
    try:
        p.stdin.write(data)
        p.stdin.close()
    except BrokenPipeError:
        pass



def read_rest(its, got):
    """The rest of every rank's stream, read at the same time: the sink
    writes the ranks' streams step by step, so reading one to its end
    first would leave it waiting on the other's full socket or FIFO."""
    def rest(r):
        got[r] += list(its[r])
    ts = [threading.Thread(target=rest, args=(r,)) for r in range(len(its))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

def test_fifo_sink_killed_and_restarted(run, tools, tmp_path):
    plan, fr, web, want, _ = run
    for r in (0, 1):
        os.mkfifo(tmp_path / ("r%d" % r))
    dss = [otorch.RankDataset(str(tmp_path / ("r%d" % r)), reconnect_timeout=60)
           for r in (0, 1)]
    its, got, again = kill_and_restart(tools, plan, fr, web, tmp_path / "ck",
                                       str(tmp_path / "r%d"), dss)
    read_rest(its, got)
    for r in (0, 1):
        assert_same(tensors(got[r]), want[r])
        assert dss[r].state_dict() == {"step": max(want[r]) + 1}
    assert again.wait(60) == 0


def test_unix_socket_sink_killed_and_restarted(run, tools, tmp_path, monkeypatch):
    plan, fr, web, want, _ = run
    monkeypatch.setenv("OVL_SECRET", SECRET)
    monkeypatch.delenv("OVL_SECRET_FILE", raising=False)
    eps = ["unix:%s/r%d.sock" % (tmp_path, r) for r in (0, 1)]
    dss = [otorch.RankDataset(ep, reconnect_timeout=60) for ep in eps]
    its, got, again = kill_and_restart(
        tools, plan, fr, web, tmp_path / "ck",
        "unix-listen:%s/r%%d.sock" % tmp_path, dss)
    read_rest(its, got)
    for r in (0, 1):
        assert_same(tensors(got[r]), want[r])
    assert again.wait(60) == 0


def test_loader_gone_past_the_timeout(run, tools, tmp_path):
    """A sink that does not come back: the readers raise LoaderGone once
    reconnect_timeout has passed, naming the end of file that broke the
    stream."""
    plan, fr, web, want, _ = run
    for r in (0, 1):
        os.mkfifo(tmp_path / ("r%d" % r))
    dss = [otorch.RankDataset(str(tmp_path / ("r%d" % r)), reconnect_timeout=0.5)
           for r in (0, 1)]
    its, got, _ = kill_and_restart(tools, plan, fr, web, tmp_path / "ck",
                                   str(tmp_path / "r%d"), dss, restart=False)
    for r in (0, 1):
        with pytest.raises(overlord.LoaderGone, match=r"the loader was gone for more "
                           r"than 0.5 s \(reconnect_timeout\): end of file without END"):
            list(its[r])


@pytest.fixture()
def streams(run, tools, tmp_path):
    """Rank 0's per-rank stream, uninterrupted, and the new stream of a
    sink killed at CUT_STEP and restarted (from checkpoint 10: steps 40
    on), as bytes."""
    plan, fr, web, want, ref = run
    ck = tmp_path / "ck"
    f = tmp_path / "k"
    f.mkdir()
    # its FIFOs read into bytes; its input ends without END at CUT_STEP
    # (exit 3), then it is restarted from its checkpoint on the same paths
    for r in (0, 1):
        os.mkfifo(f / ("n%d" % r))
    out = {}

    def drain(r):
        with open(f / ("n%d" % r), "rb") as fh:
            out[r] = fh.read()

    def sink(*extra, data):
        ts = [threading.Thread(target=drain, args=(r,)) for r in (0, 1)]
        for t in ts:
            t.start()
        p = subprocess.run([tools("ovl-ckpt"), "--dir", str(ck), "-p",
                            str(f / "n%d"), str(plan)] + list(extra), input=data)
        for t in ts:
            t.join()
        return p.returncode
    assert sink(data=fr.read_bytes()[:cut_offset(fr, CUT_STEP)]) == 3
    opts = restore(tools, ck)
    assert opts["ckpt"] == ["--resume", "10"]
    assert sink(*opts["ckpt"], data=resumed_input(tools, plan, web, opts)) == 0
    return (ref / "r0").read_bytes(), out[0], want[0]


def frame_offsets(data):
    """(offset, kind, step) of every SEQ and STEP frame of a stream."""
    out = []
    for f in frames.Reader(__import__("io").BytesIO(data)):
        if f.kind in (frames.SEQ, frames.STEP):
            out.append((f.offset, f.kind, int.from_bytes(f.payload[:8], "little")))
    return out


def write_in_one_open(fifo, parts):
    """Write parts to fifo, each by a new writer that opens it before the
    last one closes: the reader sees one stream of bytes, no end of file
    (a restarted writer that came back before the reader noticed)."""
    fds = []
    try:
        for p in parts:
            fds.append(os.open(fifo, os.O_WRONLY))
            if len(fds) > 1:
                os.close(fds.pop(0))
            _write_all(fds[-1], p)
    except BrokenPipeError:     # the reader went first (it refused)
        pass
    for fd in fds:
        os.close(fd)


def _write_all(fd, b):
    mv = memoryview(b)
    while mv:
        mv = mv[os.write(fd, mv):]


@pytest.mark.parametrize("where", ["payload", "header", "boundary", "stream header"])
def test_new_stream_after_a_partial_frame(streams, tmp_path, where):
    """The old stream cut (inside a SEQ's payload, inside a frame header,
    at a frame boundary, inside a stream header), the new one right after
    it in the same open FIFO: the reader takes the new stream from its
    header, drops the steps it has, and gives the uninterrupted tensors."""
    old, new, want = streams
    seqs = [o for o, k, st in frame_offsets(old) if k == frames.SEQ and st == 41]
    cut = {"payload": seqs[0] + 40, "header": seqs[0] + 5,
           "boundary": seqs[0]}.get(where, seqs[0])
    parts = [old[:cut], new]
    if where == "stream header":    # a writer that died in its header
        parts = [old[:cut], new[:11], new]
    fifo = tmp_path / "f0"
    os.mkfifo(fifo)
    ds = otorch.RankDataset(str(fifo), reconnect_timeout=30)
    it = iter(ds)
    w = threading.Thread(target=write_in_one_open, args=(str(fifo), parts))
    w.start()
    got = tensors(it)
    w.join()
    assert_same(got, want)
    # the same bytes read by overlord.read: a NewStream item, no repeats
    fifo = tmp_path / "f1"
    os.mkfifo(fifo)
    items = overlord.read(str(fifo), reconnect_timeout=30)
    w = threading.Thread(target=write_in_one_open, args=(str(fifo), parts))
    w.start()
    items = list(items)
    w.join()
    assert [type(i) for i in items].count(overlord.NewStream) == 1
    st = [i.step for i in items if isinstance(i, overlord.StepEnd)]
    assert st == list(range(len(want)))


def test_a_new_stream_that_skips_steps_is_refused(streams, tmp_path):
    """The reader has steps up to 20, the new stream begins at step 40:
    a FrameError naming the gap, never data skipped silently."""
    old, new, _ = streams
    cut = [o for o, k, st in frame_offsets(old) if k == frames.SEQ and st == 21][0]
    fifo = tmp_path / "f0"
    os.mkfifo(fifo)
    ds = otorch.RankDataset(str(fifo), reconnect_timeout=30)
    it = iter(ds)
    w = threading.Thread(target=write_in_one_open, args=(str(fifo), [old[:cut + 20], new]))
    w.start()
    with pytest.raises(overlord.FrameError, match=r"goes on at step 40, the reader "
                       r"needs step 21 next: steps 21 to 39 would be missing"):
        for _ in it:
            pass
    ds.close()
    w.join()
