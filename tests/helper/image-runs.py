#!/usr/bin/python3
"""image-runs.py SOURCE.jsonl CONSTRUCT.jsonl SEQ_LEN: every run of the
image placeholder (token 0) of ovl-source --json's documents is found whole
in a piece of ovl-construct --json's sequences (the multisets of run lengths
are equal), and at least three of them straddle a multiple of SEQ_LEN from
their document's start, where cutting without regard to runs would split
them (so the check can fail)."""
import json, sys
from collections import Counter
seq_len, img = int(sys.argv[3]), 0
def runs(t):
    out, n = [], 0
    for x in t:
        if x == img:
            n += 1
        elif n:
            out.append(n); n = 0
    if n:
        out.append(n)
    return out
src = Counter(); naive_split = 0
for l in open(sys.argv[1]):
    d = json.loads(l); t = d["tokens"]
    src.update(runs(t))
    for c in range(seq_len, len(t), seq_len):   # where plain cutting would cut
        if t[c - 1] == img and t[c] == img:
            naive_split += 1
got = Counter()
for l in open(sys.argv[2]):
    s = json.loads(l)
    if s.get("kind") != "seq":
        continue
    t, cu = s["tokens"], s["cu_seqlens"]
    for a, b in zip(cu, cu[1:]):
        got.update(runs(t[a:b]))
assert max(src) <= seq_len, max(src)
assert naive_split >= 3, naive_split
assert got == src, (sorted((got - src).items())[:5], sorted((src - got).items())[:5])
print("runs", sum(src.values()), "kept whole; plain cuts would split", naive_split)
