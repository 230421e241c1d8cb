"""A real training run fed live by ovl-run: a tiny causal LM on CPU, two
data-parallel ranks reading their per-rank FIFOs through RankDataset.
Loader and trainer are both killed mid-run and resume through the
handshake (the trainer's checkpoint names the step it needs, ovl-run
--resume --resume-step starts the streams there): the batches each rank
sees equal an uninterrupted run's, and the final weights are bitwise equal.
"""

import copy
import hashlib
import os
import signal
import subprocess

import pytest

torch = pytest.importorskip("torch")

from overlord import torch as otorch  # noqa: E402

STOP = 24       # steps in the plan
KILL_AT = 6     # the trainer's checkpoint: steps before it are trained


class TinyLM(torch.nn.Module):
    """A bigram model: next-token logits from the current token."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(257, 8)
        self.out = torch.nn.Linear(8, 257)

    def forward(self, ids):
        return self.out(self.emb(ids))


def fresh():
    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    return model, opt


def train_step(model, opt, mbs_per_rank):
    """One data-parallel step: the ranks' losses averaged (as DDP averages
    their gradients); a rank without sequences contributes nothing."""
    losses = []
    for mbs in mbs_per_rank:
        rank_loss = torch.zeros(())
        for mb in mbs:
            logits = model(mb["input_ids"])
            rank_loss = rank_loss + torch.nn.functional.cross_entropy(
                logits, mb["labels"], ignore_index=-100, reduction="sum")
        losses.append(rank_loss)
    loss = sum(losses) / len(losses)
    opt.zero_grad()
    if loss.requires_grad:
        loss.backward()
        opt.step()


def digest(mbs):
    h = hashlib.sha1()
    for mb in mbs:
        h.update(mb["input_ids"].numpy().tobytes())
    return h.hexdigest()


def start_run(tools, plan, ck, *extra, fifos=()):
    """ovl-run in the background. A watchdog: when it fails by itself
    (not killed by kill_run) while a reader still waits in open() for a
    writer that will never come, it opens those FIFOs and closes them, so
    the reader sees an empty stream and the test fails with the run's
    messages instead of hanging."""
    import threading
    run = subprocess.Popen([tools("ovl-run"), "-q", "-c", str(ck)] + list(extra)
                           + [str(plan)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, start_new_session=True)
    run.killed = False
    run.t0 = __import__("time").monotonic()

    def watch():
        if run.wait() == 0 or run.killed:
            return
        for f in fifos:
            try:
                fd = os.open(str(f), os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue        # no reader waiting
            os.close(fd)
    threading.Thread(target=watch, daemon=True).start()
    return run


def kill_run(run):
    """SIGKILL ovl-run and its stages, and wait until every one of them is
    gone (a dying sink still holds its FIFOs)."""
    import time
    run.killed = True
    if run.poll() is not None:
        raise AssertionError("the run ended before the kill (status %s, %.1f s after "
                             "its start): %s" % (run.returncode, time.monotonic() - run.t0,
                                                 run.stderr.read().decode()))
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(60)
    for _ in range(3000):
        try:
            os.killpg(run.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise AssertionError("the killed run's stages are still there")


def consume(model, opt, fifos, state, seen, stop_before=None, dss=None):
    """Train from both ranks' streams until they end (or before step
    stop_before); returns the trainer's state after the last step. dss, a
    list, gets the datasets (to close them after a kill)."""
    dss = [] if dss is None else dss
    dss += [otorch.RankDataset(str(f)) for f in fifos]
    for ds in dss:
        ds.load_state_dict(state)
    # every rank's reader opens its FIFO now (the loader waits for all)
    its = [iter(ds) for ds in dss]
    for items in zip(*its):
        step = items[0]["step"]
        assert all(i["step"] == step for i in items), "ranks out of lockstep"
        if stop_before is not None and step >= stop_before:
            break
        train_step(model, opt, [i["micro_batches"] for i in items])
        seen[step] = [digest(i["micro_batches"]) for i in items]
        state = {"step": step + 1}
    return state


@pytest.fixture()
def setup(tmp_path, samples):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    fifos = [tmp_path / "rank0", tmp_path / "rank1"]
    for f in fifos:
        os.mkfifo(f)
    plan = tmp_path / "train.plan"
    plan.write_text(
        # throttled, so the loader is still running when it is killed
        # (else the whole small stream fits in the readers' buffers and
        # the run ends first)
        "source web path=%s throttle=1K\nranks 2\nseq-len 128\ncheckpoint every=4\n"
        "stop steps=%d\noutput format=frames per-rank=%s/rank%%d\n"
        % (os.path.join(samples, "web", "web-0.jsonl"), STOP, tmp_path))
    return tmp_path, plan, fifos


def test_kill_loader_and_trainer_resume_bitwise(setup, tools):
    tmp, plan, fifos = setup

    # the uninterrupted run
    model, opt = fresh()
    ref_seen = {}
    run = start_run(tools, plan, tmp / "ckA", fifos=fifos)
    consume(model, opt, fifos, {"step": 0}, ref_seen)
    assert run.wait(60) == 0, run.stderr.read().decode()
    ref_weights = copy.deepcopy(model.state_dict())
    assert sorted(ref_seen) == list(range(len(ref_seen)))
    assert len(ref_seen) >= STOP

    # the same, killed: the trainer checkpoints before step KILL_AT and
    # dies; the loader is killed (SIGKILL to ovl-run and its stages)
    model, opt = fresh()
    seen = {}
    run = start_run(tools, plan, tmp / "ckB", fifos=fifos)
    dss = []
    state = consume(model, opt, fifos, {"step": 0}, seen, stop_before=KILL_AT,
                    dss=dss)
    saved = copy.deepcopy({"model": model.state_dict(), "opt": opt.state_dict(),
                           "data": state})
    kill_run(run)
    # the dead trainer's readers let go of the FIFOs before the new run
    assert all(ds.close() for ds in dss)
    del model, opt

    # both come back: the trainer from its checkpoint, the loader from
    # the last checkpoint at or before the trainer's step
    model, opt = fresh()
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["opt"])
    assert saved["data"] == {"step": KILL_AT}
    run = start_run(tools, plan, tmp / "ckB", "--resume", "--resume-step",
                    str(saved["data"]["step"]), fifos=fifos)
    consume(model, opt, fifos, saved["data"], seen)
    assert run.wait(60) == 0, run.stderr.read().decode()

    # every step seen once, the same batches on each rank, the same weights
    assert seen == ref_seen
    for k, v in model.state_dict().items():
        assert torch.equal(v, ref_weights[k]), k


def test_resume_with_more_ranks_keeps_every_steps_tokens(tmp_path, tools, samples):
    """Elastic data parallelism under a live run: killed at 2 ranks, resumed
    through the handshake at 4; every step holds the same tokens as the
    uninterrupted 2-rank run, only split over more ranks."""
    import numpy as np
    fifos = [tmp_path / ("rank%d" % r) for r in range(4)]
    for f in fifos:
        os.mkfifo(f)
    text = ("source web path=%s throttle=1K\nranks %%d\nseq-len 128\nstep-tokens 512\n"
            "checkpoint every=4\nstop steps=%d\noutput format=frames per-rank=%s/rank%%%%d\n"
            % (os.path.join(samples, "web", "web-0.jsonl"), STOP, tmp_path))
    plan2, plan4 = tmp_path / "p2.plan", tmp_path / "p4.plan"
    plan2.write_text(text % 2)
    plan4.write_text(text % 4)

    used = set()   # the ranks that got sequences

    opened = []

    def tokens_per_step(ranks, state, stop_before=None):
        dss = [otorch.RankDataset(str(f)) for f in fifos[:ranks]]
        opened.extend(dss)
        for ds in dss:
            ds.load_state_dict(state)
        out = {}
        for items in zip(*[iter(ds) for ds in dss]):
            step = items[0]["step"]
            if stop_before is not None and step >= stop_before:
                break
            toks = [mb["input_ids"].numpy() for i in items for mb in i["micro_batches"]]
            out[step] = np.sort(np.concatenate(toks)) if toks else np.array([])
            used.update(r for r, i in enumerate(items) if i["micro_batches"])
        return out

    run = start_run(tools, plan2, tmp_path / "ckA", fifos=fifos)
    ref = tokens_per_step(2, {"step": 0})
    assert run.wait(60) == 0, run.stderr.read().decode()

    run = start_run(tools, plan2, tmp_path / "ckB", fifos=fifos)
    got = tokens_per_step(2, {"step": 0}, stop_before=KILL_AT)
    kill_run(run)
    # the dead trainer's readers let go of the FIFOs before the new run
    assert all(ds.close() for ds in opened)
    run = start_run(tools, plan4, tmp_path / "ckB", "--resume", "--resume-step",
                    str(KILL_AT), fifos=fifos)
    used.clear()
    got.update(tokens_per_step(4, {"step": KILL_AT}))
    assert run.wait(60) == 0, run.stderr.read().decode()
    assert used == {0, 1, 2, 3}, used   # the steps were split over 4 ranks
    assert sorted(got) == sorted(ref) and len(ref) >= STOP
    for step in ref:
        assert np.array_equal(got[step], ref[step]), step
