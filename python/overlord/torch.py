"""PyTorch on top of overlord.frames (optional: needs torch).

``RankDataset`` is an IterableDataset over one rank's stream (an ovl-ckpt
per-rank FIFO or file). It yields one item per step, in step order:

    {"step": S, "micro_batches": [mb, ...]}

where each micro-batch is a dict of tensors for one packed sequence:
``input_ids`` and ``position_ids`` (int64, the sequence's tokens and their
positions, restarting at 0 per document piece), ``cu_seqlens`` (int32, the
piece boundaries, for varlen attention) and ``labels`` (int64: the next
token, and -100 where the next token belongs to another document, at the
end and on padding, so no loss crosses a document boundary).

A step whose STEP frame says the rank got nothing gives an empty list: the
rank still steps with the others (a DDP job must call its collective
operations every step; train on nothing, or skip the optimizer step on
every rank together). The stream is read ahead on a thread (``prefetch``
steps).

``state_dict()`` holds the next step the trainer needs; save it with the
trainer's checkpoint. After a crash, resume the loader with
``ovl-run --resume --resume-step S`` (S = that step) and build the dataset
again: the stream starts at step S, nothing replayed and nothing lost.
Over a socket (src ``"unix:PATH"`` or ``"tcp:HOST:PORT"``, a per-rank
``unix-listen:``/``tcp-listen:`` output) the dataset announces that step
itself when it connects, and a loader run with ``ovl-run --resume-step
from-readers`` restores at or before it and starts there.
``agree_step`` makes every data-parallel rank agree on that step.
"""

import queue
import threading

import numpy as np
import torch
from torch.utils.data import IterableDataset

from . import frames

IGNORE = -100


def _is_endpoint(src):
    return isinstance(src, str) and src.startswith(("tcp:", "unix:"))


def micro_batch(seq, ignore_index=IGNORE):
    """The tensors of one overlord.Seq (see the module's docstring). The
    work is done in numpy (a few vectorized passes), then wrapped."""
    tok = seq.tokens.astype(np.int64)
    n = len(tok)
    cu = seq.cu_seqlens
    lab = np.empty_like(tok)
    lab[:-1] = tok[1:]
    if n:
        lab[-1] = ignore_index
    # the last token of every piece predicts nothing (the next is another
    # document's), and padding after the real tokens predicts nothing
    ends = cu[1:].astype(np.int64) - 1
    lab[ends[(ends >= 0) & (ends < n)]] = ignore_index
    real = int(cu[-1]) if len(cu) else 0
    if real < n:
        lab[max(real - 1, 0):] = ignore_index
    return {"input_ids": torch.from_numpy(tok),
            "position_ids": torch.from_numpy(seq.positions.astype(np.int64)),
            "cu_seqlens": torch.from_numpy(cu.astype(np.int32)),
            "labels": torch.from_numpy(lab)}


class RankDataset(IterableDataset):
    """One rank's steps from its stream; see the module docstring."""

    def __init__(self, src, prefetch=4, ignore_index=IGNORE, check_crc=True):
        super().__init__()
        self.src = src
        self.prefetch = prefetch
        self.ignore_index = ignore_index
        self.check_crc = check_crc
        self.next_step = 0

    def state_dict(self):
        """{"step": the next step this trainer needs}."""
        return {"step": self.next_step}

    def load_state_dict(self, state):
        self.next_step = int(state["step"])

    def _produce(self, q, stop):
        try:
            # over a socket the reader announces the step it needs (the
            # resume handshake); a writer that does not ask ignores it
            kw = {"next_step": self.next_step} if _is_endpoint(self.src) else {}
            for step, seqs in frames.steps(self.src, check_crc=self.check_crc, **kw):
                if stop.is_set():
                    return
                item = (step, [micro_batch(s, self.ignore_index) for s in seqs])
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        pass
                if stop.is_set():
                    return
            q.put(None)
        except BaseException as e:  # handed to the consumer, raised there
            if not stop.is_set():
                q.put(e)

    def __iter__(self):
        # the reader starts at once (not at the first next()): every rank's
        # stream is opened and read ahead as soon as its iterator exists
        q = queue.Queue(maxsize=max(self.prefetch, 1))
        stop = threading.Event()
        t = threading.Thread(target=self._produce, args=(q, stop), daemon=True)
        t.start()
        self._reader = (stop, t)
        return self._items(q, stop, t)

    def close(self, timeout=30):
        """Stop reading and wait (up to timeout seconds) until the stream is
        closed: a live stream must have ended or failed (its writer gone)
        for the reader to let go of it. True when it did."""
        if getattr(self, "_reader", None) is None:
            return True
        stop, t = self._reader
        stop.set()
        t.join(timeout)
        return not t.is_alive()

    def _items(self, q, stop, t):
        try:
            while True:
                item = q.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                step, mbs = item
                if step < self.next_step:
                    raise frames.FrameError(
                        "the stream gave step %d, the trainer needs step %d: "
                        "resume the loader with --resume-step %d"
                        % (step, self.next_step, self.next_step))
                self.next_step = step + 1
                yield {"step": step, "micro_batches": mbs}
        finally:
            # a consumer that stops early: the reader stops at its next step
            # (a live stream that stalls leaves a daemon thread behind)
            stop.set()
            t.join(1.0)


def agree_step(step, group=None):
    """The step every data-parallel rank can resume from: the smallest of
    their steps (torch.distributed must be initialized; without it, step)."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return int(step)
    t = torch.tensor([int(step)], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group)
    return int(t.item())
