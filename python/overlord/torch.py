"""PyTorch on top of overlord.frames (optional: needs torch).

``RankDataset`` is an IterableDataset over one rank's stream (an ovl-ckpt
per-rank FIFO or file). It yields one item per step, in step order:

    {"step": S, "micro_batches": [mb, ...]}

where each micro-batch is a dict of tensors for one packed sequence:
``input_ids`` and ``position_ids`` (int64, the sequence's tokens and their
positions, restarting at 0 per document piece), ``cu_seqlens`` (int32, the
piece boundaries, for varlen attention) and ``labels`` (int64: the next
token, and -100 where the next token belongs to another document, at the
end and on padding, so no loss crosses a document boundary). With
``dtype=torch.int32``, input_ids and position_ids are int32 (embeddings
take int32 indices; labels stay int64, as cross_entropy needs). The
tensors are the micro-batch's own memory (the frames are walked in C,
python/overlord/_fast.c in libovlcrc.so: the CRC, then ids, positions,
labels and cu_seqlens written in one pass each), so they hold nothing of
the stream. Without the C library (or for a sequence with images) they are
made in numpy: input_ids and position_ids with dtype torch.int32 and
cu_seqlens are then views of the bytes read (a view holds its block of the
stream until it goes). Either way they stay valid as long as they are
held.

A sequence with images (a vision-language stream: IMAGE frames, see
ovl-frame(5)) has two more entries: ``images``, its images in order (bytes
by default; decoded ``PIL.Image`` objects with ``images="pil"``, which
needs Pillow; the ``overlord.frames.Image`` records themselves with
``images="frames"``, for a reference's shard, member and offset), and
``image_positions`` (int64, one row ``[seq_pos, ntokens]`` per image:
where its run of placeholder tokens begins in input_ids, and its length).
A sequence without images has neither.

A step whose STEP frame says the rank got nothing gives an empty list: the
rank still steps with the others (a DDP job must call its collective
operations every step; train on nothing, or skip the optimizer step on
every rank together). The stream is read ahead on a thread (up to
``prefetch`` reads of 256 KiB, more for a larger frame, 16 by default: 4
MiB, so a live stream's writer is not held back by a trainer busy with its
step; blocks of 256 KiB rather than 4 MiB stay in the CPU's cache until
they are walked); the frames are checked and the
tensors made as the loop asks for the steps.

``state_dict()`` holds the next step the trainer needs; save it with the
trainer's checkpoint. After a crash, resume the loader with
``ovl-run --resume --resume-step S`` (S = that step) and build the dataset
again: the stream starts at step S, nothing replayed and nothing lost.
Over a socket (src ``"unix:PATH"`` or ``"tcp:HOST:PORT"``, a per-rank
``unix-listen:``/``tcp-listen:`` output) the dataset announces that step
itself when it connects, and a loader run with ``ovl-run --resume-step
from-readers`` restores at or before it and starts there.
``agree_step`` makes every data-parallel rank agree on that step.

A plan with context parallelism (``cp N``: the stream's META has ``cp``
and ``cp-pad``, see overlord.cp) gives every micro-batch in its padded
layout (input_ids, position_ids and labels; padding has the run's pad
id, label ``ignore_index``) with two more entries: ``cu_seqlens_padded``
(int32) and ``max_seqlen`` (an int, the longest padded document), and
``cu_seqlens`` keeps the documents' true lengths. That is the whole
micro-batch, which Megatron-LM slices itself; with ``cp_rank=r`` the
dataset gives context-parallel rank r's slice of input_ids, position_ids
and labels (Megatron's per-document zigzag: chunks r and 2N-1-r of every
document, or of the whole sequence with ``cp-pad sequence`` or ``none``),
with the global cu_seqlens, cu_seqlens_padded and max_seqlen.

A plan with ``cp-balance hybrid`` gives each sequence its own group of
CP ranks (overlord.cp, Megatron-LM's hybrid context parallelism): every
micro-batch has ``local_cp_size`` and ``cp_first`` (ints: its group's
size and first CP rank) and is padded for its own size; with
``cp_rank=c`` the dataset gives only the micro-batches whose group holds
c, each split per sequence over its local_cp_size ranks (rank c -
cp_first of the group), in the stream's order, which every CP rank of a
group shares (``overlord.megatron.hybrid_batch`` makes Megatron's
schedule of a step).

A restarted loader is a pause, not an error. Over a FIFO or an endpoint
the dataset reopens the FIFO or reconnects when the stream breaks (its
writing ovl-ckpt died: end of file or a reset without END, or a frame cut
short), announcing the step it needs, takes the restarted writer's new
stream (see ovl-frame(5), "A restarted writer"), drops the steps it gave
already, and goes on with exactly the tensors of an uninterrupted run. A
new stream that would skip steps raises FrameError naming them.
``reconnect_timeout`` (seconds, default 300; 0 raises at the first
break; None reads as before, any break an error) bounds how long the
loader may be gone: past it ``overlord.LoaderGone`` is raised, naming what
broke the stream. A stream that ends with END ends the iteration. A
trainer that finished calls ``close()`` between steps: the stream is let
go, and the loader sees its reader gone at a step boundary.
"""

from __future__ import annotations

import collections
import threading

from typing import Any, Iterator, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import IterableDataset

from . import cp as _cp
from . import frames

IGNORE = -100
RECONNECT_TIMEOUT = 300.0   # RankDataset's default: the seconds a loader may be gone


def _is_endpoint(src):
    return isinstance(src, str) and src.startswith(("tcp:", "unix:"))


IMAGE_MODES = ("bytes", "pil", "frames")


def micro_batch(seq: frames.Seq, ignore_index: int = IGNORE,
                dtype: Optional[torch.dtype] = None,
                images: str = "bytes") -> dict:
    """The tensors of one overlord.Seq (see the module's docstring; what
    RankDataset makes without its C walk): three
    numpy passes (input_ids, position_ids and labels as int64), cu_seqlens
    a view of the bytes read (int32, no copy), then wrapped without copies
    (torch.from_numpy). With dtype torch.int32, input_ids and
    position_ids are views of the bytes read too (no copy). A sequence
    with images gets them too, as images says (bytes, pil, frames)."""
    tok = seq.tokens
    if dtype == torch.int32:
        # 16-bit arrays (ovl-frame(5) minor 2) are widened: one copy
        mb = _tensors(tok, _int32(tok), _int32(seq.positions),
                      seq.cu_seqlens, ignore_index)
    else:
        mb = _tensors(tok, tok.astype(np.int64), seq.positions_as(np.int64),
                      seq.cu_seqlens, ignore_index)
    if seq.images:
        ims = seq.images
        if images == "pil":
            mb["images"] = [im.pil() for im in ims]
        elif images == "frames":
            mb["images"] = list(ims)
        else:
            mb["images"] = [im.read() for im in ims]
        mb["image_positions"] = torch.tensor(
            [[im.seq_pos, im.ntokens] for im in ims], dtype=torch.int64)
    return mb


def _int32(a):
    """a as int32: a view of uint32 bytes, a copy of uint16 ones."""
    return a.view(np.int32) if a.dtype.itemsize == 4 else a.astype(np.int32)


def micro_batches(seqs: Sequence[frames.Seq], ignore_index: int = IGNORE,
                  dtype: Optional[torch.dtype] = None,
                  images: str = "bytes") -> list:
    """[micro_batch(s) for s in seqs]. (One int64 pass over all of a
    step's sequences, their tensors views of it, was measured slower: an
    array of megabytes is fresh pages every time, while one sequence's
    copies come from memory malloc reuses.)"""
    return [micro_batch(s, ignore_index, dtype, images) for s in seqs]


def _tensors(tok, ids, pos, cu, ignore_index):
    """The micro-batch of a sequence: tok its uint32 (or uint16) tokens,
    ids and pos their int64 copies, cu its cu_seqlens (uint32)."""
    n = tok.shape[0]
    lab = np.empty(n, np.int64)
    if n:
        lab[:-1] = tok[1:]      # from uint32: an int64 to int64 copy
        #                         between shifted slices is 10x slower
        # the last token of every piece predicts nothing (the next is
        # another document's)
        ends = cu[1:]
        if len(ends) <= 16:
            for e in ends.tolist():
                if e:
                    lab[e - 1] = ignore_index
        else:   # a piece ending at 0 (malformed) wraps: numpy refuses it
            lab[ends - 1] = ignore_index
        lab[-1] = ignore_index
        real = int(cu[-1])
        if real < n:    # padding after the real tokens predicts nothing
            lab[max(real - 1, 0):] = ignore_index
    return {"input_ids": torch.from_numpy(ids),
            "position_ids": torch.from_numpy(pos),
            "cu_seqlens": torch.from_numpy(cu.view(np.int32)),
            "labels": torch.from_numpy(lab)}


class _Ahead:
    """What the reading thread read, for the consumer: each item as it
    comes (the consumer takes all there are at once), at most limit
    waiting. The last one (None at the end, or an exception) always gets
    in."""

    def __init__(self, limit):
        self.cond = threading.Condition(threading.Lock())
        self.items = collections.deque()
        self.limit = max(int(limit), 1)

    def put(self, item, stop, last=False):
        """False when stop was set while the items were too many."""
        with self.cond:
            while len(self.items) >= self.limit and not last:
                if stop.is_set():
                    return False
                self.cond.wait(0.1)
            self.items.append(item)
            self.cond.notify()
        return True

    def __iter__(self):
        """The items in order, up to the end (None, not yielded); an
        exception is raised here."""
        while True:
            with self.cond:
                while not self.items:
                    self.cond.wait()
                batch = list(self.items)
                self.items.clear()
                self.cond.notify()
            for item in batch:
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item


class RankDataset(IterableDataset):
    """One rank's steps from its stream; see the module docstring. Under a
    DataLoader, use num_workers=0 or 1 and batch_size=None (its items are
    steps): more workers would each open the one stream, and are refused
    with a RuntimeError."""

    def __init__(self, src: frames.Source, prefetch: int = 16,
                 ignore_index: int = IGNORE, check_crc: bool = True,
                 dtype: torch.dtype = torch.int64, images: str = "bytes",
                 reconnect_timeout: Optional[float] = RECONNECT_TIMEOUT,
                 cp_rank: Optional[int] = None) -> None:
        super().__init__()
        if cp_rank is not None and not int(cp_rank) >= 0:
            raise ValueError("cp_rank: a context-parallel rank (>= 0) or None, "
                             "not %r" % (cp_rank,))
        self.cp_rank = cp_rank
        if reconnect_timeout is not None and not reconnect_timeout >= 0:
            raise ValueError("reconnect_timeout: seconds (>= 0) or None, not %r"
                             % (reconnect_timeout,))
        self.reconnect_timeout = reconnect_timeout
        if dtype not in (torch.int64, torch.int32):
            raise ValueError("dtype: torch.int64 or torch.int32, not %r" % (dtype,))
        if images not in IMAGE_MODES:
            raise ValueError("images: one of %s, not %r" % (IMAGE_MODES, images))
        if images == "pil":
            import PIL.Image  # noqa: F401  (asked for: fail here, not mid-run)
        self.images = images
        self.dtype = dtype
        self.src = src
        self.prefetch = prefetch
        self.ignore_index = ignore_index
        self.check_crc = check_crc
        self.next_step = 0

    def state_dict(self) -> dict:
        """{"step": the next step this trainer needs}."""
        return {"step": self.next_step}

    def load_state_dict(self, state: dict) -> None:
        self.next_step = int(state["step"])

    def _produce(self, ch, stop):
        """The reading thread: opens the stream (a FIFO or a socket may
        wait for its writer), hands the reader over, then reads ahead: the
        blocks of whole frames as they arrive (the first half of reading;
        the consumer checks the frames and makes the tensors: one hand-over
        per block read rather than per step, which made RankDataset twice
        as slow, the consumer and the reader passing the GIL back and forth
        at every step)."""
        try:
            # over a socket the reader announces the step it needs (the
            # resume handshake, at every reconnection too); a writer that
            # does not ask ignores it
            r = frames.Reader(self.src, check_crc=self.check_crc, chunk=_CHUNK,
                              spare=2 * self.prefetch + 8,
                              next_step=lambda: self.next_step,
                              reconnect_timeout=self.reconnect_timeout, stop=stop)
            try:
                if not ch.put(r, stop):
                    return
                for span in r.spans():
                    if stop.is_set() or not ch.put(span, stop):
                        return
            finally:
                r.close()
            ch.put(None, stop, last=True)
        except BaseException as e:  # handed to the consumer, raised there
            ch.put(e, stop, last=True)

    def __iter__(self) -> Iterator[list]:
        info = torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            # each worker would open the rank's one stream
            raise RuntimeError(
                "RankDataset reads one rank's stream, which one process "
                "reads: DataLoader(num_workers=%d) would open it in every "
                "worker; use num_workers=0 or 1 (the dataset reads ahead on "
                "a thread of its own), with batch_size=None" % info.num_workers)
        # the reader starts at once (not at the first next()): every rank's
        # stream is opened and read ahead as soon as its iterator exists
        ch = _Ahead(self.prefetch)
        stop = threading.Event()
        t = threading.Thread(target=self._produce, args=(ch, stop), daemon=True)
        t.start()
        self._reader = (stop, t)
        return self._items(ch, stop, t)

    def close(self, timeout: float = 30) -> None:
        """End reading: the way a trainer that finished says so. Call it
        between steps (after the last step it trains on): the reading
        thread lets go of the stream (a FIFO's read end, a socket) and
        ends, and the loader sees its reader gone at a step boundary
        (ovl-ckpt: stopped by the readers). A FIFO or an endpoint read
        with reconnecting on (reconnect_timeout, the default) is let go
        within 0.2 s; any other stream once a read that waits returns (a
        live stream must end or fail). Waits up to timeout seconds: True
        when the stream was let go."""
        if getattr(self, "_reader", None) is None:
            return True
        stop, t = self._reader
        stop.set()
        t.join(timeout)
        return not t.is_alive()

    def _items(self, ch, stop, t):
        try:
            spans = iter(ch)
            r = next(spans, None)
            if r is None:
                return
            for step, mbs in _steps_of(self, r, spans):
                if step < self.next_step:
                    raise frames.FrameError(
                        "the stream gave step %d, the trainer needs step %d: "
                        "resume the loader with --resume-step %d"
                        % (step, self.next_step, self.next_step))
                self.next_step = step + 1
                cp, policy = _cp.from_meta(r.meta)
                if cp and _cp.hybrid(r.meta):
                    mbs = [_hybrid_micro_batch(mb, cp, policy, r.meta, self)
                           for mb in mbs]
                    mbs = [mb for mb in mbs if mb is not None]
                elif cp:
                    mbs = [_cp_micro_batch(mb, cp, policy, r.meta, self)
                           for mb in mbs]
                elif self.cp_rank is not None:
                    raise frames.FrameError(
                        "cp_rank=%d, but the stream's plan has no cp" % self.cp_rank)
                yield {"step": step, "micro_batches": mbs}
        finally:
            # a consumer that stops early: the reader stops at its next step
            # (a live stream that stalls leaves a daemon thread behind)
            stop.set()
            t.join(1.0)


def _steps_of(ds, r, spans):
    """(step, micro-batches) of the frames of spans (reader r): runs of SEQ
    and STEP frames walked and made into tensors in C (see _run), the
    other frames (a SEQ with images, say) one by one as frames.items
    gives them."""
    ign, dtype, images = ds.ignore_index, ds.dtype, ds.images
    fill = frames.walk_fill()
    pending = []        # (step, rank, micro-batch) of the step under way
    seq, step_end, run, STEP = frames.Seq, frames.StepEnd, frames.Run, frames.STEP
    # a walked row's words (frames.WalkRow)
    STP, KIND, RANK, SEQS = (frames.ROW_STEP, frames.ROW_KIND, frames.ROW_RANK,
                             frames.ROW_SEQS)
    take = frames.take_step
    for item in frames.items(r, r.scan(spans, walk=fill is not None), runs=True,
                             next_step=ds.next_step):
        kind = type(item)
        if kind is run:
            rows = item.rows.tolist()
            grp = _cp.hybrid(r.meta)
            i = 0       # the first row of the SEQs not made yet
            for j, row in enumerate(rows):
                if row[KIND] != STEP:
                    continue
                st, rk = row[STP], row[RANK]
                if not pending and j == i and not row[SEQS]:
                    yield st, []        # an empty step
                    i = j + 1
                    continue
                if not pending and j - i == row[SEQS]:
                    # the step's SEQs, all of them in this run (the rule)
                    for q in rows[i:j]:
                        if q[STP] != st or q[RANK] != rk:
                            break
                    else:
                        yield st, _run(fill, item, rows, i, j, ign, dtype, grp)
                        i = j + 1
                        continue
                if j > i:
                    pending += [(q[STP], q[RANK], mb) for q, mb in
                                zip(rows[i:j], _run(fill, item, rows, i, j, ign, dtype, grp))]
                i = j + 1
                yield st, take(pending, st, rk, row[SEQS])
            if i < len(rows):
                pending += [(q[STP], q[RANK], mb) for q, mb in
                            zip(rows[i:], _run(fill, item, rows, i, len(rows), ign, dtype, grp))]
        elif kind is seq:
            mb = micro_batch(item, ign, dtype, images)
            if _cp.hybrid(r.meta):
                mb["_flags"] = item.flags
            pending.append((item.step, item.rank, mb))
        elif kind is step_end:
            yield item.step, take(pending, item.step, item.rank, item.seqs)
    frames.check_no_pending(pending)


_CHUNK = 256 << 10      # the reading thread's blocks (see the module's docstring)
_NP = {torch.int64: (np.int64, 64), torch.int32: (np.int32, 32)}
_ROW = 8 * frames.ROW_WORDS


def _run(fill, run, rows, i, j, ign, dtype, grp=False):
    """The micro-batches of the SEQ rows i..j-1 of a walked run: each
    one's four arrays (input_ids and position_ids in dtype, labels int64,
    cu_seqlens int32) filled in one C call. Arrays of one sequence rather
    than of a step: malloc hands a sequence's sizes back warm, while a
    step's (eight micro-batches of 4096 tokens: 256 KiB an array) came
    back as fresh pages (RankDataset at 224 M tokens/s instead of 400).
    numpy's arrays wrapped by torch.from_numpy cost less than torch's own
    (torch.empty) or its slices or split: measured. With grp, each gets
    its SEQ's flags word too (``_flags``: a hybrid plan's CP group)."""
    npdt, bits = _NP[dtype]
    NTOK, NPIECES = frames.ROW_NTOKENS, frames.ROW_NPIECES
    fn, empty, i32, i64 = torch.from_numpy, np.empty, np.int32, np.int64
    addr, raddr = run.addr, run.raddr + i * _ROW
    out = []
    words = run.buf.view(np.uint8) if grp else None
    for r in rows[i:j]:
        n = r[NTOK]
        t0, t1 = fn(empty(n, npdt)), fn(empty(n, npdt))
        t2, t3 = fn(empty(r[NPIECES] + 1, i32)), fn(empty(n, i64))
        fill(addr, raddr, 1, bits, t0.data_ptr(), t1.data_ptr(), t3.data_ptr(),
             t2.data_ptr(), ign)
        raddr += _ROW
        mb = {"input_ids": t0, "position_ids": t1, "cu_seqlens": t2, "labels": t3}
        if grp:     # the SEQ's flags word: its CP group (cp-balance hybrid)
            at = r[frames.ROW_OFFSET] + frames.SEQ_FLAGS_AT
            mb["_flags"] = int.from_bytes(words[at:at + 4], "little")
        out.append(mb)
    return out


def _cp_micro_batch(mb, cp, policy, meta, ds, rank=None, split=None):
    """A micro-batch of a cp plan: laid out padded (overlord.cp.expand),
    then, with ds.cp_rank, that rank's slice (rank, split: a hybrid
    group's rank and how it splits)."""
    pad = int(meta.get("pad-id", meta.get("eod", ["0"]))[-1])
    ids, pos, lab, cup, m = _cp.expand(
        mb["input_ids"].numpy(), mb["position_ids"].numpy(), mb["labels"].numpy(),
        mb["cu_seqlens"].numpy(), cp, policy, pad, ds.ignore_index)
    if rank is None and ds.cp_rank is not None:
        if ds.cp_rank >= cp:
            raise ValueError("cp_rank %d: the plan has cp %d" % (ds.cp_rank, cp))
        rank, split = ds.cp_rank, policy
    if rank is not None:
        idx = _cp.index(cup, len(ids), cp, rank, split)
        ids, pos, lab = ids[idx], pos[idx], lab[idx]
    out = dict(mb)
    out.pop("_flags", None)
    out.update(input_ids=torch.from_numpy(np.ascontiguousarray(ids)),
               position_ids=torch.from_numpy(np.ascontiguousarray(pos)),
               labels=torch.from_numpy(np.ascontiguousarray(lab)),
               cu_seqlens_padded=torch.from_numpy(cup), max_seqlen=m)
    return out


def _hybrid_micro_batch(mb, cp, policy, meta, ds):
    """A micro-batch of a cp-balance hybrid plan: padded for its own CP
    size; with ds.cp_rank, None unless its group holds that rank, else
    that rank's slice, split per sequence over the group."""
    k, first = _cp.group(mb["_flags"])
    if ds.cp_rank is not None and ds.cp_rank >= cp:
        raise ValueError("cp_rank %d: the plan has cp %d" % (ds.cp_rank, cp))
    rank = None
    if ds.cp_rank is not None:
        if not first <= ds.cp_rank < first + k:
            return None
        rank = ds.cp_rank - first
    out = _cp_micro_batch(mb, k, policy, meta, ds, rank, "sequence")
    out.update(local_cp_size=k, cp_first=first)
    return out


def agree_step(step: int, group: Any = None) -> int:
    """The step every data-parallel rank can resume from: the smallest of
    their steps (torch.distributed must be initialized; without it, step)."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return int(step)
    t = torch.tensor([int(step)], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group)
    return int(t.item())


def split_dataset(src: str, split: str, **kw) -> RankDataset:
    """A ``RankDataset`` over a held-out split's stream of a plan with a
    ``split`` key: ``src`` is the rank's stream as the plan names it
    (``train``'s), the split's is ``SRC.SPLIT`` (``ovl-run --split``,
    ``offline.split_path``); ``kw`` go to ``RankDataset``."""
    from .offline import split_path
    return RankDataset(split_path(src, split), **kw)
