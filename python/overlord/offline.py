"""Step-ordered readers of ovl-ckpt's offline outputs, so a plain PyTorch or
Megatron-LM job trains in the loader's order (step by step, rank by rank,
micro-batch by micro-batch, as written), not reshuffled.

``npy(prefix)`` reads ``PREFIX.{tokens,positions,cu_seqlens,seqs}.npy``
(memory-mapped) and ``megatron(prefix)`` reads ``PREFIX.{bin,idx}`` (one
sequence per entry); both yield ``OfflineSeq`` objects with step, rank, mb
(npy only; Megatron's index does not keep them), tokens, positions and
cu_seqlens as numpy arrays, and ``by_step`` groups them per step.
``OfflineSeq.labels`` (and ``next_token_labels``) gives a sequence's
labels and loss mask as every reader makes them: padding never predicts
and is never predicted. ``split_path(prefix, "validation")`` names a
held-out split's outputs (plan key ``split``, ``ovl-run --split``).
"""

from __future__ import annotations

import os

import struct

from typing import Iterable, Iterator, Optional

import numpy as np


SPLITS = ("train", "validation", "test")


def split_path(path: str, split: str) -> str:
    """Where ``ovl-run --split SPLIT`` writes a held-out split of a plan
    with a ``split`` key (ovl-plan(5)): ``path`` (an output prefix, a
    per-rank pattern or path, a checkpoint directory) as the plan says it
    for ``train``, ``PATH.SPLIT`` for ``validation`` and ``test``."""
    if split not in SPLITS:
        raise ValueError("split %r: expected one of %s" % (split, ", ".join(SPLITS)))
    return path if split == "train" else "%s.%s" % (path, split)


def next_token_labels(tokens, cu_seqlens=None, eod: Optional[int] = None,
                      pad: Optional[int] = None) -> tuple:
    """(labels, loss_mask) of one sequence: labels (int64) the next token,
    loss_mask (float32) 0 where that must not be learnt: at every piece's
    last token (from ``cu_seqlens``, or, without them, at every ``eod``:
    the next token is another document's), at the sequence's last, and
    from the last real token on. Padding is, with ``pad`` given, the last
    segment of cu_seqlens when all its ids are pad (ovl-ckpt's npy output
    makes the padding a segment of its own), or without cu_seqlens (a
    Megatron output) the trailing run of pad ids; when pad is the eod, the
    first of that run may be a document's own end, which then predicts
    nothing either. So padding never has a loss, nor is it ever the label
    of a real token with a loss."""
    t = np.asarray(tokens, dtype=np.int64)
    n = len(t)
    labels = np.empty(n, dtype=np.int64)
    mask = np.ones(n, dtype=np.float32)
    if n == 0:
        return labels, mask
    labels[:-1] = t[1:]
    labels[-1] = t[-1] if pad is None else pad
    mask[-1] = 0.0
    real = n
    if cu_seqlens is not None:
        cu = np.asarray(cu_seqlens, dtype=np.int64)
        ends = cu[1:]
        mask[ends[(ends > 0) & (ends <= n)] - 1] = 0.0
        if pad is not None and len(cu) > 1 and (t[int(cu[-2]):] == pad).all():
            real = int(cu[-2])
    else:
        if eod is not None:
            mask[t == eod] = 0.0
        if pad is not None:
            nz = np.nonzero(t != pad)[0]
            real = int(nz[-1]) + 1 if len(nz) else 0
    if real < n:
        mask[max(real - 1, 0):] = 0.0
    return labels, mask


class OfflineSeq:
    """A sequence of an offline output. ``cu_seqlens_padded`` and
    ``max_seqlen`` are set for an npy output of a plan with ``cp``
    (overlord.cp: the bounds of the sequence's padded layout, from 0),
    else None; ``local_cp_size`` and ``cp_first`` (its CP group: its size
    and first CP rank) for one of ``cp-balance hybrid``, else None."""
    __slots__ = ("step", "rank", "mb", "tokens", "positions", "cu_seqlens",
                 "cu_seqlens_padded", "max_seqlen", "local_cp_size", "cp_first")

    def __init__(self, step: int, rank: int, mb: int, tokens: np.ndarray,
                 positions: np.ndarray, cu_seqlens: np.ndarray,
                 cu_seqlens_padded: Optional[np.ndarray] = None,
                 max_seqlen: Optional[int] = None,
                 local_cp_size: Optional[int] = None,
                 cp_first: Optional[int] = None) -> None:
        self.step, self.rank, self.mb = step, rank, mb
        self.tokens, self.positions, self.cu_seqlens = tokens, positions, cu_seqlens
        self.cu_seqlens_padded, self.max_seqlen = cu_seqlens_padded, max_seqlen
        self.local_cp_size, self.cp_first = local_cp_size, cp_first

    def labels(self, eod: int, pad: Optional[int] = None) -> tuple:
        """(labels, loss_mask): ``next_token_labels`` of this sequence, its
        pieces from its cu_seqlens (npy) or its ``eod`` ids (Megatron),
        its padding the ``pad`` ids (ovl-construct's --pad-id; default the
        eod, as ovl-construct's)."""
        return next_token_labels(self.tokens, self.cu_seqlens, eod,
                                 eod if pad is None else pad)


def npy(prefix: str) -> Iterator[OfflineSeq]:
    """The sequences of an npy output, in the order written."""
    tok = np.load(prefix + ".tokens.npy", mmap_mode="r")
    pos = np.load(prefix + ".positions.npy", mmap_mode="r")
    cu = np.load(prefix + ".cu_seqlens.npy", mmap_mode="r")
    seqs = np.load(prefix + ".seqs.npy", mmap_mode="r")
    cup = mx = lcp = cpf = None
    if os.path.exists(prefix + ".cu_seqlens_padded.npy"):     # a cp plan's
        cup = np.load(prefix + ".cu_seqlens_padded.npy", mmap_mode="r")
        mx = np.load(prefix + ".max_seqlen.npy", mmap_mode="r")
    if os.path.exists(prefix + ".local_cp_size.npy"):         # hybrid's
        lcp = np.load(prefix + ".local_cp_size.npy", mmap_mode="r")
        cpf = np.load(prefix + ".cp_first.npy", mmap_mode="r")
    for i, (step, rank, mb, first, n, seg0, nseg) in enumerate(seqs):
        c = np.asarray(cu[seg0:seg0 + nseg + 1], dtype=np.int64) - first
        p = m = None
        if cup is not None:
            p = np.asarray(cup[seg0:seg0 + nseg + 1], dtype=np.int64)
            p, m = (p - p[0]).astype(np.uint32), int(mx[i])
        yield OfflineSeq(int(step), int(rank), int(mb), tok[first:first + n],
                         pos[first:first + n], c.astype(np.uint32), p, m,
                         None if lcp is None else int(lcp[i]),
                         None if cpf is None else int(cpf[i]))


_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64,
           6: np.float64, 7: np.float32, 8: np.uint16}


def megatron(prefix: str) -> Iterator[OfflineSeq]:
    """The sequences of a Megatron indexed dataset written by ovl-ckpt, in
    the order written (Megatron's own GPTDataset would reshuffle them)."""
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    if idx[:9] != b"MMIDIDX\x00\x00":
        raise ValueError("%s.idx: not a Megatron index" % prefix)
    version, code, n, ndocs = struct.unpack_from("<QBQQ", idx, 9)
    dtype = _DTYPES[code]
    off = 9 + 8 + 1 + 8 + 8
    sizes = np.frombuffer(idx, np.int32, n, off)
    pointers = np.frombuffer(idx, np.int64, n, off + 4 * n)
    data = np.memmap(prefix + ".bin", dtype=dtype, mode="r")
    item = np.dtype(dtype).itemsize
    for i in range(n):
        start = int(pointers[i]) // item
        tokens = data[start:start + int(sizes[i])]
        yield OfflineSeq(None, None, None, tokens, None, None)


def by_step(seqs: Iterable[OfflineSeq]) -> Iterator[tuple[int, list]]:
    """(step, [seq, ...]) for consecutive sequences of the same step."""
    cur, group = None, []
    for s in seqs:
        if group and s.step != cur:
            yield cur, group
            group = []
        cur = s.step
        group.append(s)
    if group:
        yield cur, group
