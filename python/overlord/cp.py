"""Context parallelism: the padded layout of a plan's sequences and one
context-parallel rank's slice of them.

A plan with ``cp N`` (ovl-plan(5)) gives each data-parallel rank's
sequences to N context-parallel (CP) ranks. ovl-construct packs them so
that the padding ``cp-pad`` asks for still fits seq-len, and says so in
its META (``cp N``, ``cp-pad document|sequence|none``); a SEQ frame keeps
its real tokens one after the other, and its padded layout follows from
its ``cu_seqlens`` and those two lines (ovl-frame(5)):

- ``document``: every segment (document piece) starts at
  ``cu_seqlens_padded[i]`` and is padded to a multiple of 2N;
- ``sequence``: the segments as they are, the sequence padded at its end
  to a multiple of 2N;
- ``none``: nothing padded.

``max_seqlen`` is the longest padded segment. ``layout`` computes both,
``expand`` lays a micro-batch out padded (padding: the pad id, labels
ignored, positions going on from the segment's last one, as Megatron-LM's
SFT dataset pads), and ``index`` gives CP rank r's token indices as
Megatron-LM's ``get_batch_on_this_cp_rank`` takes them: per document
(``document``: chunks r and 2N-1-r of 2N equal chunks of every padded
document) or per sequence (chunks r and 2N-1-r of the whole sequence).
``cu_seqlens``, ``cu_seqlens_padded`` and ``max_seqlen`` stay global: a
rank's slice keeps the whole micro-batch's, as Megatron does.

With ``cp-balance hybrid`` (META ``cp-balance hybrid``, ``hybrid``) every
sequence has its own CP group, as Megatron-LM's hybrid context
parallelism runs a sub-sample: ``local_cp_size`` k (a power of two up to
N) and the first of its k CP ranks, both in the SEQ's flags word
(``group``). Its layout is the one above with k for N; CP rank c takes
the sequences whose group holds it, each split per sequence over the k
ranks (``index`` with k, rank c - first), as Megatron's
get_batch_on_this_cp_rank splits a hybrid sub-sample.

>>> import numpy as np
>>> cu = np.array([0, 3, 8], np.int32)
>>> layout(cu, 8, 2, "document")
(array([ 0,  4, 12], dtype=int32), 8)
>>> index(np.array([0, 4, 12], np.int32), 12, 2, 1, "document").tolist()
[1, 2, 6, 7, 8, 9]
"""

from __future__ import annotations

from typing import Optional

import numpy as np

POLICIES = ("document", "sequence", "none")


def from_meta(meta: Optional[dict]) -> tuple:
    """(cp, policy) from a stream's META (a Reader's ``meta``): (0, None)
    without ``cp``."""
    if not meta or "cp" not in meta:
        return 0, None
    cp = int(meta["cp"][-1])
    pad = meta.get("cp-pad", ["document"])[-1]
    if cp < 1 or pad not in POLICIES:
        raise ValueError("META: bad cp %r or cp-pad %r" % (meta["cp"], pad))
    return cp, pad


def hybrid(meta: Optional[dict]) -> bool:
    """Is a stream's META one of ``cp-balance hybrid``?"""
    return bool(meta) and meta.get("cp-balance", ["static"])[-1] == "hybrid"


def group(flags: int) -> tuple:
    """(local_cp_size, first CP rank) of a hybrid SEQ's flags word.

    >>> group(2 | 4 << 16)
    (2, 4)
    """
    return int(flags) & 0xFFFF, int(flags) >> 16


def layout(cu, ntok: int, cp: int, policy: str) -> tuple:
    """(cu_seqlens_padded as int32, max_seqlen) of a sequence of ntok
    tokens (trailing padding included) whose segments are cu."""
    cu = np.asarray(cu, dtype=np.int64)
    g = 2 * int(cp)
    out = cu.copy()
    if policy not in POLICIES:
        raise ValueError("cp-pad: one of %s, not %r" % (POLICIES, policy))
    if len(cu) < 2:     # no segment: padding only
        return out.astype(np.int32), 0
    if policy == "document":
        lens = cu[1:] - cu[:-1]
        out[1:] = np.cumsum((lens + g - 1) // g * g)
    elif policy == "sequence":
        out[-1] = (int(ntok) + g - 1) // g * g
    else:
        out[-1] = int(ntok)
    m = int((out[1:] - out[:-1]).max())
    return out.astype(np.int32), m


def index(cu_padded, total: int, cp: int, cp_rank: int, policy: str) -> np.ndarray:
    """CP rank cp_rank's token indices (int64) in a padded sequence of
    total tokens: per document for ``document``, else per sequence."""
    g, r = 2 * int(cp), int(cp_rank)
    if not 0 <= r < cp:
        raise ValueError("cp_rank %d: not a rank of cp %d" % (r, cp))
    if policy == "document":
        bounds = np.asarray(cu_padded, dtype=np.int64)
        parts = []
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            c = (b - a) // g
            parts.append(np.arange(a + r * c, a + (r + 1) * c))
            parts.append(np.arange(a + (g - 1 - r) * c, a + (g - r) * c))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if total % g:
        raise ValueError("a sequence of %d tokens does not split into 2 x cp = "
                         "%d chunks (cp-pad none)" % (total, g))
    c = total // g
    return np.concatenate([np.arange(r * c, (r + 1) * c),
                           np.arange((g - 1 - r) * c, (g - r) * c)])


def expand(ids, pos, labels, cu, cp: int, policy: str, pad: int,
           ignore_index: int) -> tuple:
    """A micro-batch's input_ids, position_ids and labels (numpy, its
    real tokens' layout) laid out padded: (ids, pos, labels,
    cu_seqlens_padded, max_seqlen)."""
    n, g = len(ids), 2 * int(cp)
    cup, m = layout(cu, n, cp, policy)
    total = (int(cup[-1]) + n - int(cu[-1]) if policy == "document" else
             (n + g - 1) // g * g if policy == "sequence" else n)
    if total == n and (policy != "document" or len(cu) < 2 or
                       (np.asarray(cup) == np.asarray(cu)).all()):
        return ids, pos, labels, cup, m
    oi = np.full(total, pad, dtype=ids.dtype)
    op = np.empty(total, dtype=pos.dtype)
    ol = np.full(total, ignore_index, dtype=labels.dtype)
    if policy == "sequence":
        srcs = [(0, n, 0, total)]
    else:
        c = np.asarray(cu, dtype=np.int64).tolist()
        srcs = [(c[i], c[i + 1], int(cup[i]), int(cup[i + 1]))
                for i in range(len(c) - 1)]
        if n > c[-1]:   # the sequence's own padding (fixed shapes)
            srcs.append((c[-1], n, int(cup[-1]), total))
    for a, b, d, e in srcs:
        k = b - a
        oi[d:d + k] = ids[a:b]
        op[d:d + k] = pos[a:b]
        ol[d:d + k] = labels[a:b]
        nxt = int(pos[b - 1]) + 1 if k else 0
        op[d + k:e] = np.arange(nxt, nxt + e - d - k)
    return oi, op, ol, cup, m
