"""tokfiles.py DIR JSONL...: token files for tests/t15 (and t11, t12).

The byte ids of each jsonl record's text (the bytes tokenizer: ids below
256, end-of-document 256), written as numpy .npy arrays and Megatron
indexed datasets, in several dtypes; the first jsonl into NAME, the rest
into NAMEb, so a source of two files holds every document in order. Also
damaged and wrong files for the error tests.
"""
import json
import sys

import numpy as np

EOD = 256


def docs_of(paths):
    return [list(json.loads(l)["text"].encode()) for p in paths for l in open(p)]


def write_npy(d, name, docs, dtype, offsets=False):
    toks, offs = [], [0]
    for t in docs:
        toks.extend(t + [EOD])
        offs.append(len(toks))
    np.save("%s/%s.npy" % (d, name), np.array(toks, dtype=dtype))
    if offsets:
        np.save("%s/%s.offsets.npy" % (d, name), np.array(offs, dtype=np.int64))
    return len(toks)


def write_megatron(d, name, docs, dtype, code, eod=True):
    """Megatron-LM's MMIDIDX index version 1 and its .bin."""
    arrs = [np.array(t + ([EOD] if eod else []), dtype=dtype) for t in docs]
    sizes = np.array([len(a) for a in arrs], dtype=np.int32)
    ptrs = np.zeros(len(arrs), dtype=np.int64)
    ptrs[1:] = np.cumsum(sizes[:-1].astype(np.int64) * np.dtype(dtype).itemsize)
    with open("%s/%s.bin" % (d, name), "wb") as f:
        for a in arrs:
            f.write(a.tobytes())
    with open("%s/%s.idx" % (d, name), "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(np.array([1], dtype=np.uint64).tobytes())
        f.write(np.array([code], dtype=np.uint8).tobytes())
        f.write(np.array([len(arrs)], dtype=np.uint64).tobytes())
        f.write(np.array([len(arrs) + 1], dtype=np.uint64).tobytes())
        f.write(sizes.tobytes())
        f.write(ptrs.tobytes())
        f.write(np.arange(len(arrs) + 1, dtype=np.int64).tobytes())


def main():
    d, paths = sys.argv[1], sys.argv[2:]
    first, rest = docs_of(paths[:1]), docs_of(paths[1:])
    for suffix, docs in (("", first), ("b", rest)):
        write_npy(d, "eod16" + suffix, docs, np.uint16)
        write_npy(d, "eod32" + suffix, docs, np.int32)
        n = write_npy(d, "off" + suffix, docs, np.int64, offsets=True)
        if suffix == "":
            open(d + "/off.npy.len", "wb").write(b"x" * (n - len(docs) + len(docs)))
        write_megatron(d, "mega16" + suffix, docs, np.uint16, 8)
        write_megatron(d, "mega64" + suffix, docs, np.int64, 5, eod=False)
    # errors
    write_npy(d, "big", [[1, 2], [3, 4, 5, 300]], np.uint16)
    np.save(d + "/twod.npy", np.zeros((2, 3), dtype=np.int32))
    np.save(d + "/float.npy", np.zeros(3, dtype=np.float32))
    write_npy(d, "badoff", [[1, 2], [3]], np.uint16)
    np.save(d + "/badoff.offsets.npy", np.array([0, 2, 9], dtype=np.int64))
    write_megatron(d, "cut", first[:3], np.uint16, 8)
    with open(d + "/cut.bin", "r+b") as f:
        f.truncate(100)
    write_megatron(d, "notidx", first[:3], np.uint16, 8)
    with open(d + "/notidx.idx", "r+b") as f:
        f.write(b"NOTANIDX")


main()
