#!/usr/bin/env python3
"""Read what ovl-ckpt writes, as a trainer would: batches of packed sequences.

Needs numpy only. Three inputs:

  frames FILE|FIFO   a frame stream (ovl-ckpt stdout or --per-rank rankN):
                     one batch per step, the rank's micro-batches
  npy PREFIX         PREFIX.{tokens,positions,cu_seqlens,seqs}.npy:
                     one batch per (step, rank)
  megatron PREFIX    PREFIX.bin and PREFIX.idx (Megatron-LM's indexed
                     dataset, read from its documented layout): batches of
                     --batch-size sequences

Every sequence is a dict: step, rank, mb, tokens, positions, cu_seqlens
(numpy arrays; cu_seqlens marks the documents packed in it, from 0).

  python3 reader.py [--rank R] [--batch-size N] [--tokens] KIND PATH

prints one line per batch ("step 3 rank 1 seqs 2 tokens 4096") and, with
--tokens, the token ids of every sequence. Exit status 0, 1 on a malformed
input (with the byte offset), 2 on a usage error.
"""

import signal
import struct
import sys

import numpy as np

MAGIC = b"\x89OVL\r\n\x1a\n"
KIND_META, KIND_SEQ, KIND_END = 1, 4, 7
# frame header flags (ovl-frame(5), minor 2): 16-bit tokens, 16-bit
# positions, no positions (they restart at 0 at every document piece)
FL_U16, FL_POS16, FL_NOPOS = 0x01, 0x02, 0x04


class FormatError(Exception):
    pass


def iter_frames(path):
    """Yield the SEQ frames of a frame stream as sequence dicts."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 16 or data[:8] != MAGIC:
        raise FormatError("%s: not an overlord stream (byte offset 0)" % path)
    major = struct.unpack_from("<H", data, 8)[0]
    if major != 1:
        raise FormatError("%s: unknown major version %d" % (path, major))
    off, nframes, ended = 16, 0, False
    while off < len(data):
        if len(data) - off < 12:
            raise FormatError("%s: truncated frame at byte offset %d" % (path, off))
        length, kind, flags = struct.unpack_from("<IBB", data, off)
        if off + 12 + length > len(data):
            raise FormatError("%s: truncated frame at byte offset %d" % (path, off))
        p = off + 12
        if kind == KIND_SEQ:
            step, rank, mb, ntok, npieces = struct.unpack_from("<QIIII", data, p)
            # arrays of 2 or 4 bytes an id, each padded to 4 bytes
            tw = 2 if flags & FL_U16 else 4
            pw = 2 if flags & FL_POS16 else 0 if flags & FL_NOPOS else 4
            tokens = np.frombuffer(data, np.uint16 if tw == 2 else np.uint32,
                                   ntok, p + 32)
            at = p + 32 + ((tw * ntok + 3) & ~3)
            if pw:
                positions = np.frombuffer(data, np.uint16 if pw == 2 else np.uint32,
                                          ntok, at)
                at += (pw * ntok + 3) & ~3
            cu = np.frombuffer(data, np.uint32, npieces + 1, at)
            if not pw:
                positions = np.zeros(ntok, np.uint32)
                for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
                    positions[a:b] = np.arange(b - a, dtype=np.uint32)
            yield {"step": step, "rank": rank, "mb": mb, "tokens": tokens,
                   "positions": positions, "cu_seqlens": cu}
        elif kind == KIND_END:
            count = struct.unpack_from("<Q", data, p)[0]
            if count != nframes:
                raise FormatError("%s: END counts %d frames, read %d (byte offset %d)"
                                  % (path, count, nframes, off))
            ended = True
            break
        nframes += 1
        off = p + length
    if not ended:
        raise FormatError("%s: no END frame: the stream is incomplete" % path)


def load_npy(prefix):
    arrays = {k: np.load("%s.%s.npy" % (prefix, k), mmap_mode="r")
              for k in ("tokens", "positions", "cu_seqlens", "seqs")}
    if arrays["tokens"].shape != arrays["positions"].shape:
        raise FormatError("%s: tokens and positions differ in length" % prefix)
    return arrays


def iter_npy(prefix):
    """Yield the sequences of an npy output, in output order."""
    a = load_npy(prefix)
    cu = a["cu_seqlens"]
    for step, rank, mb, off, ntok, seg, nseg in a["seqs"]:
        bounds = np.asarray(cu[seg:seg + nseg + 1], dtype=np.int64) - off
        yield {
            "step": int(step), "rank": int(rank), "mb": int(mb),
            "tokens": np.asarray(a["tokens"][off:off + ntok]),
            "positions": np.asarray(a["positions"][off:off + ntok]),
            "cu_seqlens": bounds,
        }


MEGATRON_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32,
                   5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}


def read_megatron_index(prefix):
    """Parse PREFIX.idx: (dtype, sizes, pointers, document_indices)."""
    idx = open(prefix + ".idx", "rb").read()
    if idx[:9] != b"MMIDIDX\x00\x00":
        raise FormatError("%s.idx: bad header (byte offset 0)" % prefix)
    version, code, nseq, ndoc = struct.unpack_from("<QBQQ", idx, 9)
    if version != 1 or code not in MEGATRON_DTYPES:
        raise FormatError("%s.idx: version %d, dtype code %d not supported"
                          % (prefix, version, code))
    off = 34
    if len(idx) != off + nseq * 4 + nseq * 8 + ndoc * 8:
        raise FormatError("%s.idx: %d bytes, not what %d sequences need"
                          % (prefix, len(idx), nseq))
    sizes = np.frombuffer(idx, np.int32, nseq, off)
    pointers = np.frombuffer(idx, np.int64, nseq, off + 4 * nseq)
    docs = np.frombuffer(idx, np.int64, ndoc, off + 12 * nseq)
    dtype = MEGATRON_DTYPES[code]
    item = np.dtype(dtype).itemsize
    expect = np.concatenate(([0], np.cumsum(sizes.astype(np.int64) * item)[:-1])) \
        if nseq else np.zeros(0, np.int64)
    if not np.array_equal(pointers, expect):
        raise FormatError("%s.idx: pointers do not follow the sizes" % prefix)
    if ndoc < 1 or docs[0] != 0 or docs[-1] != nseq or np.any(np.diff(docs) < 0):
        raise FormatError("%s.idx: bad document indices" % prefix)
    return dtype, sizes, pointers, docs


def iter_megatron(prefix):
    """Yield the sequences of a Megatron .bin/.idx pair (tokens only)."""
    dtype, sizes, pointers, _ = read_megatron_index(prefix)
    data = np.memmap(prefix + ".bin", dtype=np.uint8, mode="r")
    item = np.dtype(dtype).itemsize
    if len(sizes) and pointers[-1] + sizes[-1] * item != len(data):
        raise FormatError("%s.bin: %d bytes, the index says %d"
                          % (prefix, len(data), pointers[-1] + sizes[-1] * item))
    for i, (n, ptr) in enumerate(zip(sizes, pointers)):
        toks = np.frombuffer(data, dtype, int(n), int(ptr))
        yield {"step": None, "rank": None, "mb": i, "tokens": toks,
               "positions": None, "cu_seqlens": None}


def batches(kind, path, rank=None, batch_size=8):
    """Group sequences into batches: per step (and rank), or by count."""
    if kind == "megatron":
        batch = []
        for s in iter_megatron(path):
            batch.append(s)
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch
        return
    it = iter_frames(path) if kind == "frames" else iter_npy(path)
    batch, key = [], None
    for s in it:
        if rank is not None and s["rank"] != rank:
            continue
        k = (s["step"], s["rank"]) if kind == "npy" else s["step"]
        if batch and k != key:
            yield batch
            batch = []
        key = k
        batch.append(s)
    if batch:
        yield batch


def main(argv):
    rank, size, show = None, 8, False
    args = list(argv)
    try:
        while args and args[0].startswith("--"):
            opt = args.pop(0)
            if opt == "--rank":
                rank = int(args.pop(0))
            elif opt == "--batch-size":
                size = int(args.pop(0))
            elif opt == "--tokens":
                show = True
            else:
                raise ValueError(opt)
        kind, path = args
        if kind not in ("frames", "npy", "megatron") or size < 1:
            raise ValueError(kind)
    except (ValueError, IndexError):
        sys.stderr.write("usage: reader.py [--rank R] [--batch-size N] [--tokens] "
                         "frames|npy|megatron PATH\n")
        return 2
    try:
        for b in batches(kind, path, rank, size):
            head = b[0]
            where = "batch" if head["step"] is None else \
                "step %d rank %d" % (head["step"], head["rank"])
            print("%s seqs %d tokens %d" % (where, len(b),
                                            sum(len(s["tokens"]) for s in b)))
            if show:
                for s in b:
                    print(" ".join(str(t) for t in s["tokens"].tolist()))
    except (FormatError, OSError, ValueError) as e:
        sys.stderr.write("reader.py: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends us quietly
    sys.exit(main(sys.argv[1:]))
