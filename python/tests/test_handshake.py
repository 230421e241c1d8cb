"""The resume handshake over sockets: ovl-run --resume-step from-readers
with per-rank UNIX socket and TCP outputs. Each rank's RankDataset
announces the step its state_dict holds; the loader restores the last
checkpoint at or before it and starts every stream there. A run killed
mid-way, then resumed at several steps (one before the first checkpoint),
gives each rank exactly the uninterrupted run's steps from that step on."""

import hashlib
import os
import signal
import subprocess
import threading
import time

import pytest

torch = pytest.importorskip("torch")

import overlord  # noqa: E402
from overlord import torch as otorch  # noqa: E402

STOP = 20


def digest(mbs):
    h = hashlib.sha1()
    for mb in mbs:
        for k in ("input_ids", "position_ids", "cu_seqlens", "labels"):
            h.update(mb[k].numpy().tobytes())
    return h.hexdigest()


class Run:
    """ovl-run in the background, its stages in its own process group."""

    def __init__(self, tools, plan, ck, *extra):
        self.p = subprocess.Popen([tools("ovl-run"), "-q", "-c", str(ck)] + list(extra)
                                  + [str(plan)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, start_new_session=True)

    def wait(self):
        assert self.p.wait(60) == 0, self.p.stderr.read().decode()

    def kill(self):
        assert self.p.poll() is None, self.p.stderr.read().decode()
        os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait(60)
        for _ in range(3000):
            try:
                os.killpg(self.p.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.01)
        raise AssertionError("the killed run's stages are still there")


@pytest.fixture(params=["unix", "tcp"])
def kind(request, tmp_path, monkeypatch, samples):
    monkeypatch.setenv("OVL_SECRET", "a secret of this test run, 32 b")
    monkeypatch.delenv("OVL_SECRET_FILE", raising=False)
    monkeypatch.delenv("OVL_RUN_ID", raising=False)
    torch.set_num_threads(1)
    if request.param == "unix":
        out = "unix-listen:%s/r%%d.sock" % tmp_path
    else:
        out = "tcp-listen:127.0.0.1:0,port-file=%s/port.%%d" % tmp_path
    plan = tmp_path / "p.plan"
    plan.write_text("source web path=%s\nranks 2\nseq-len 128\ncheckpoint every=4\n"
                    "stop steps=%d\noutput format=frames per-rank=%s\n"
                    % (os.path.join(samples, "web", "web-0.jsonl"), STOP, out))
    return request.param, tmp_path, plan


def endpoints(kind, tmp, run):
    """Each rank's endpoint once the sink listens (over TCP: its port)."""
    if kind == "unix":
        return ["unix:%s/r%d.sock" % (tmp, r) for r in (0, 1)]
    eps = []
    for r in (0, 1):
        f = tmp / ("port.%d" % r)
        t = time.monotonic() + 60
        while not (f.exists() and f.stat().st_size > 0):
            assert run.p.poll() is None, run.p.stderr.read().decode()
            assert time.monotonic() < t, "no port file"
            time.sleep(0.02)
        eps.append("tcp:127.0.0.1:%d" % int(f.read_text()))
    return eps


def consume(eps, step, seen, stop_before=None):
    """Both ranks from step (announced by RankDataset) until the streams end
    or before stop_before; seen[step] gets each rank's digest."""
    dss = [otorch.RankDataset(ep) for ep in eps]
    for ds in dss:
        ds.load_state_dict({"step": step})
    first = None
    for items in zip(*[iter(ds) for ds in dss]):
        s = items[0]["step"]
        assert all(i["step"] == s for i in items), "ranks out of lockstep"
        first = s if first is None else first
        if stop_before is not None and s >= stop_before:
            break
        seen[s] = [digest(i["micro_batches"]) for i in items]
    assert all(ds.close() for ds in dss)
    return first


def test_resume_from_the_readers_step(kind, tools):
    kind, tmp, plan = kind
    for f in tmp.glob("port.*"):
        f.unlink()

    # the uninterrupted run: fresh readers need step 0
    ref = {}
    run = Run(tools, plan, tmp / "ck", "--resume-step", "from-readers")
    assert consume(endpoints(kind, tmp, run), 0, ref) == 0
    run.wait()
    assert sorted(ref) == list(range(STOP))

    # killed mid-run while the trainer is at step 6; then resumed where the
    # trainer's readers say, several times over (3 is before the first
    # checkpoint, at step 4: the loader starts from the beginning)
    for f in tmp.glob("port.*"):
        f.unlink()
    seen = {}
    run = Run(tools, plan, tmp / "ck2", "--resume-step", "from-readers")
    consume(endpoints(kind, tmp, run), 0, seen, stop_before=6)
    run.kill()
    for step in (6, 3, 13, 19):
        for f in tmp.glob("port.*"):
            f.unlink()
        got = {}
        run = Run(tools, plan, tmp / "ck2", "--resume", "--resume-step", "from-readers")
        assert consume(endpoints(kind, tmp, run), step, got) == step
        run.wait()
        assert got == {s: ref[s] for s in ref if s >= step}, step
    assert {s: seen[s] for s in seen} == {s: ref[s] for s in range(6)}


def test_ranks_that_disagree_are_refused(kind, tools):
    kind, tmp, plan = kind
    run = Run(tools, plan, tmp / "ck", "--resume-step", "from-readers")
    eps = endpoints(kind, tmp, run)
    # the loader refuses and stays gone: past reconnect_timeout the readers
    # raise, naming the stream that closed
    dss = [otorch.RankDataset(ep, reconnect_timeout=1) for ep in eps]
    dss[0].load_state_dict({"step": 4})
    dss[1].load_state_dict({"step": 5})
    errors = []

    def drain(ds):
        try:
            for _ in ds:
                pass
        except Exception as e:
            errors.append(e)
    ts = [threading.Thread(target=drain, args=(ds,)) for ds in dss]
    for t in ts:
        t.start()
    assert run.p.wait(60) == 2
    err = run.p.stderr.read().decode()
    assert "the ranks' readers need different steps: rank0 step 4, rank1 step 5" in err, err
    for t in ts:
        t.join(30)
    assert len(errors) == 2
    for e in errors:
        assert isinstance(e, overlord.LoaderGone), e
        assert "(reconnect_timeout): the connection closed without END" in str(e), e
