#!/usr/bin/python3
"""image-runs.py SOURCE.jsonl CONSTRUCT.jsonl SEQ_LEN [RANKS MB]: every run
of the image placeholder (token 0) of ovl-source --json's documents is
found whole in a piece of ovl-construct --json's sequences (the multisets
of run lengths are equal), and at least three of them straddle a multiple
of SEQ_LEN from their document's start, where cutting without regard to
runs would split them (so the check can fail).

With RANKS MB (fixed shapes, --uniform): every sequence holds SEQ_LEN
tokens, every step but the last RANKS x MB sequences (its exact budget,
tokens and padding), and at least three sequences before the last step
end in padding: runs that a boundary would have cut, moved to the next
sequence (so the check can fail). Prints the share of padding."""
import json, sys
from collections import Counter
seq_len, img = int(sys.argv[3]), 0
uniform = len(sys.argv) > 4
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
got = Counter(); per_step = Counter(); padded = Counter(); real = pad = 0
for l in open(sys.argv[2]):
    s = json.loads(l)
    if s.get("kind") != "seq":
        continue
    t, cu = s["tokens"], s["cu_seqlens"]
    for a, b in zip(cu, cu[1:]):
        got.update(runs(t[a:b]))
    per_step[s["step"]] += 1
    real += cu[-1]; pad += len(t) - cu[-1]
    if cu[-1] < len(t):
        padded[s["step"]] += 1
    if uniform:
        assert len(t) == seq_len == s["seq_len"], ("not seq-len", s["step"], len(t))
assert max(src) <= seq_len, max(src)
assert got == src, (sorted((got - src).items())[:5], sorted((src - got).items())[:5])
if uniform:
    ranks, mb, last = int(sys.argv[4]), int(sys.argv[5]), max(per_step)
    bad = [k for k, n in per_step.items() if k != last and n != ranks * mb]
    assert not bad and per_step[last] <= ranks * mb, ("not the budget", bad[:5])
    moved = sum(n for k, n in padded.items() if k != last)
    assert moved >= 3, moved
    print("runs", sum(src.values()), "kept whole; steps", len(per_step),
          "of", ranks * mb, "sequences; sequences padded before a run", moved,
          "padding %.2f%%" % (100.0 * pad / (real + pad)))
else:
    assert naive_split >= 3, naive_split
    print("runs", sum(src.values()), "kept whole; plain cuts would split", naive_split)
