#!/usr/bin/python3
"""Check the images of per-rank (or frame) streams against the shards they
came from, through python/overlord's reader.

  image-payloads.py TOKEN SHARDS STREAM...

SHARDS is a comma-separated list of tar files. Every image of every
sequence must be a run of TOKEN inside one piece of its sequence (never
cut; a run longer than a sequence begins its piece), its bytes (inline, or read back through its reference) the shard
member's bytes, a reference's offset the member's data offset in its tar
(as Python's tarfile finds it); every image member of the shards comes out
exactly once (--some: at most once). Prints what it saw.
"""
import collections
import hashlib
import sys
import tarfile

import numpy as np

import overlord


def main():
    args = sys.argv[1:]
    some = args[0] == "--some"
    if some:
        args = args[1:]
    token, shards, streams = int(args[0]), args[1].split(","), args[2:]
    want = collections.Counter()
    where = {}
    for path in shards:
        with tarfile.open(path) as t:
            for m in t.getmembers():
                if m.name.rsplit(".", 1)[-1] in ("png", "jpg", "webp"):
                    data = t.extractfile(m).read()
                    h = hashlib.sha256(data).hexdigest()
                    want[(m.name, h)] += 1
                    where[(path, m.name)] = (m.offset_data, m.size, h)
    got = collections.Counter()
    nref = ninl = longer = 0
    fmts = collections.Counter()
    for s in streams:
        for it in overlord.read(s):
            if not isinstance(it, overlord.Seq):
                continue
            cu = it.cu_seqlens.tolist()
            for im in it.images:
                a, b = im.seq_pos, im.seq_pos + im.ntokens
                if im.ntokens > it.seq_len:     # no sequence holds it
                    b = cu[im.piece + 1]
                    longer += 1
                assert cu[im.piece] <= a and b <= cu[im.piece + 1], \
                    ("run cut", s, it, im, cu)
                assert (it.tokens[a:b] == token).all(), ("not the run", it, im)
                assert a == cu[im.piece] or it.tokens[a - 1] != token or \
                    im.index > 0, ("run starts late", it, im)
                data = im.read()
                assert len(data) == im.length
                h = hashlib.sha256(data).hexdigest()
                if im.ref:
                    nref += 1
                    off, size, hh = where[(im.path, im.member)]
                    assert (off, size, hh) == (im.offset, im.length, h), \
                        ("bad reference", im, off, size)
                else:
                    ninl += 1
                got[(im.member, h)] += 1
                fmts[im.format] += 1
    extra = got - want
    assert not extra, ("images that are no shard member", list(extra)[:3])
    if not some:
        missing = want - got
        assert not missing, ("images never sent", list(missing)[:3])
    print("images %d inline %d ref %d longer-than-a-sequence %d %s" % (
        sum(got.values()), ninl, nref, longer, dict(sorted(fmts.items()))))


if __name__ == "__main__":
    main()
