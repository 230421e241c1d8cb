#!/usr/bin/env python3
"""construct-check: an independent checker of ovl-construct's output.

Reads the binary frames itself (ovl-frame(5)); shares no code with the C
tools. Subcommands:

  check IN OUT --ranks R --micro-batches M --seq-len SCHED
        [--step-tokens N] [--uniform] [--window K]
      every input token exactly once, in document order (by step) within
      each document; pieces are the cut of src/lib/step.h's rule,
      recomputed here; each step within its budget; sequences no longer
      than their seq-len; cu_seqlens and position ids consistent; frames in
      (step, rank, micro-batch) order; every piece of a sequence but its
      last ends with the end token, as Megatron's reset attention mask
      needs (pieces that continue each other are one piece).
  state FILE N      print the construct STATE text of checkpoint N
  barriers FILE     print the checkpoint numbers, one per line
  after FILE N      raw bytes of every frame after BARRIER N (not END)
  body FILE         raw bytes of every frame except META and END
  cuts FILE DIR     for every checkpoint N of FILE: DIR/st.N (state N) and
                    DIR/after.N (after N); prints the numbers, one a line
  bodies FILE...    body of each FILE into FILE.body
  checks FILE       check with the arguments of each line of FILE (words
                    split at spaces), each input read once; exit 1 when
                    any fails
"""
import struct
import sys

META, DOC, CHUNK_END, SEQ, BARRIER, STATE, END = 1, 2, 3, 4, 5, 6, 7
FL_U16, FL_POS16, FL_NOPOS = 0x01, 0x02, 0x04   # ovl-frame(5) minor 2


def ids(p, o, n, wide):
    """n ids at offset o of p (uint32 when wide, else uint16), and the
    offset after them (a 16-bit array is padded to 4 bytes)."""
    if wide:
        return struct.unpack_from("<%dI" % n, p, o), o + 4 * n
    return struct.unpack_from("<%dH" % n, p, o), o + ((2 * n + 3) & ~3)


class Payload(bytes):
    """A frame's payload bytes, with the frame header's flags."""

    def __new__(cls, b, flags):
        o = super().__new__(cls, b)
        o.flags = flags
        return o


def frames(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89OVL\r\n\x1a\n":
        sys.exit("%s: not an overlord stream" % path)
    off = 16
    while off < len(data):
        ln, kind, fl = struct.unpack_from("<IBB", data, off)
        # the frame flags ride along as the payload's attribute
        yield kind, Payload(data[off + 12:off + 12 + ln], fl), data[off:off + 12 + ln]
        off += 12 + ln


def docs(path):
    out, arrival = [], 0
    for kind, p, _ in frames(path):
        if kind != DOC:
            continue
        source, flags = struct.unpack_from("<II", p, 0)
        mix_pos, = struct.unpack_from("<Q", p, 48)
        ntok, = struct.unpack_from("<I", p, 64)
        pos = mix_pos if flags & 2 else arrival
        arrival += 1
        out.append((pos, source, list(ids(p, 80, ntok, not p.flags & FL_U16)[0])))
    return out


def eod_of(path):
    for kind, p, _ in frames(path):
        if kind == META:
            tl, = struct.unpack_from("<I", p, 0)
            for line in p[8:8 + tl].decode().splitlines():
                k, _, v = line.partition(" ")
                if k == "eod":
                    return int(v)
            return None
    return None


def seqs(path):
    out = []
    for kind, p, _ in frames(path):
        if kind != SEQ:
            continue
        step, rank, mb, ntok, npc, seq_len, flags = struct.unpack_from("<QIIIIII", p, 0)
        toks, o = ids(p, 32, ntok, not p.flags & FL_U16)
        if not p.flags & FL_NOPOS:
            pos, o = ids(p, o, ntok, not p.flags & FL_POS16)
        cu = struct.unpack_from("<%dI" % (npc + 1), p, o)
        if p.flags & FL_NOPOS:  # restart at every piece, 0 in the padding
            pos = [k - cu[i] for i in range(npc) for k in range(cu[i], cu[i + 1])]
            pos += [0] * (ntok - cu[npc])
        o += 4 * (npc + 1)
        pieces = []
        for i in range(npc):
            src, ep, ch, poff, rec, mpos, ln = struct.unpack_from("<IIIIQQI", p, o + 40 * i)
            pieces.append((src, mpos, poff, ln))
        out.append(dict(step=step, rank=rank, mb=mb, ntok=ntok, seq_len=seq_len,
                        tokens=toks, positions=pos, cu=cu, pieces=pieces))
    return out


def schedule(s):
    st = []
    for part in s.split(","):
        if "@" in part:
            ln, at = part.split("@")
            st.append((int(at), int(ln)))
        else:
            st.append((0, int(part)))
    return st


def seq_len_at(st, start):
    sl = st[0][1]
    for at, ln in st:
        if at <= start:
            sl = ln
    return sl


def cut(dl, st, nseq, step_tokens, exact=False):
    """The step rule, written again: {(pos, offset): (step, length, seq_len,
    budget)}. exact: a step takes exactly its budget, the piece crossing it
    being cut there (fixed shapes, --uniform)."""
    step, start, used = 0, 0, 0
    sl = seq_len_at(st, 0)
    budget = max(step_tokens or nseq * sl, sl)
    pieces = {}
    for pos, _, toks in dl:
        off = 0
        while off < len(toks):
            left = len(toks) - off
            ln = min(left, sl)
            if (used >= budget) if exact else (used > 0 and used + ln > budget):
                start += used
                step += 1
                used = 0
                sl = seq_len_at(st, start)
                budget = max(step_tokens or nseq * sl, sl)
                ln = min(left, sl)
            if exact and used + ln > budget:
                ln = budget - used
            used += ln
            pieces[(pos, off)] = (step, ln, sl, budget)
            off += ln
    return pieces


def check(args):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--micro-batches", type=int, required=True)
    ap.add_argument("--seq-len", required=True)
    ap.add_argument("--step-tokens", type=int, default=0)
    ap.add_argument("--uniform", action="store_true")
    ap.add_argument("--window", type=int, default=1)
    a = ap.parse_args(args)
    errors = []

    def err(msg):
        if len(errors) < 20:
            errors.append(msg)

    dl = docs(a.inp)
    eod = eod_of(a.inp)
    byid = {pos: toks for pos, _, toks in dl}
    want = cut(dl, schedule(a.seq_len), a.ranks * a.micro_batches, a.step_tokens,
               exact=a.uniform)
    # uniform shapes may cut a piece again at a sequence boundary: look a
    # piece up as the cut piece that holds it
    import bisect
    starts = {}
    for (pos, off) in want:
        starts.setdefault(pos, []).append(off)
    for v in starts.values():
        v.sort()

    def holder(mpos, poff, ln):
        offs = starts.get(mpos)
        if not offs:
            return None
        i = bisect.bisect_right(offs, poff) - 1
        if i < 0:
            return None
        w = want[(mpos, offs[i])]
        if not a.uniform and offs[i] != poff:
            return None
        if not a.uniform and ln != w[1]:
            return None
        # fixed shapes: cut pieces that meet in a sequence are one piece
        # (of one step, or moved next to each other by a window)
        end, j = offs[i] + w[1], i
        while poff + ln > end:
            j += 1
            if j >= len(offs) or offs[j] != end or (
                    a.window == 1 and want[(mpos, end)][0] != w[0]):
                return None
            end += want[(mpos, end)][1]
        return w
    sq = seqs(a.out)
    seen = {}
    step_tokens = {}
    last = None
    for k, s in enumerate(sq):
        key = (s["step"], s["rank"], s["mb"])
        if last is not None:
            if key <= last:
                err("seq %d: %r after %r" % (k, key, last))
            elif key[:2] == last[:2] and key[2] != last[2] + 1:
                err("seq %d: micro-batch %d after %d" % (k, key[2], last[2]))
            elif key[:2] != last[:2] and key[2] != 0:
                err("seq %d: first micro-batch is %d" % (k, key[2]))
        elif key[2] != 0:
            err("seq 0: first micro-batch is %d" % key[2])
        last = key
        if s["rank"] >= a.ranks:
            err("seq %d: rank %d" % (k, s["rank"]))
        cu, pos, toks = s["cu"], s["positions"], s["tokens"]
        real = cu[-1]
        if cu[0] != 0 or any(cu[i + 1] <= cu[i] for i in range(len(cu) - 1)):
            err("seq %d: cu_seqlens %r" % (k, cu[:8]))
        if s["ntok"] > s["seq_len"]:
            err("seq %d: %d tokens over seq-len %d" % (k, s["ntok"], s["seq_len"]))
        if a.uniform and s["ntok"] != s["seq_len"]:
            err("seq %d: uniform but %d tokens" % (k, s["ntok"]))
        if not a.uniform and s["ntok"] != real:
            err("seq %d: padded without --uniform" % k)
        for j, (src, mpos, poff, ln) in enumerate(s["pieces"]):
            a0, a1 = cu[j], cu[j + 1]
            if a1 - a0 != ln:
                err("seq %d piece %d: length %d, cu says %d" % (k, j, ln, a1 - a0))
            if list(pos[a0:a1]) != list(range(ln)):
                err("seq %d piece %d: positions do not restart" % (k, j))
            if j + 1 < len(s["pieces"]) and eod is not None and toks[a1 - 1] != eod:
                err("seq %d piece %d: not the last, and no end token: a reader "
                    "that sees document ends only there (Megatron) joins it to "
                    "the next" % (k, j))
            doc = byid.get(mpos)
            if doc is None:
                err("seq %d: unknown document %d" % (k, mpos))
                continue
            if list(toks[a0:a1]) != doc[poff:poff + ln]:
                err("seq %d piece %d: tokens differ from document %d at %d" % (k, j, mpos, poff))
            if (mpos, poff) in seen:
                err("document %d offset %d twice" % (mpos, poff))
            seen[(mpos, poff)] = (s["step"], ln)
            w = holder(mpos, poff, ln)
            if w is None:
                err("document %d offset %d length %d is not a piece of the cut" % (mpos, poff, ln))
                continue
            if w[2] != s["seq_len"] and a.window == 1:
                err("seq %d: seq-len %d, the schedule says %d" % (k, s["seq_len"], w[2]))
            if a.window == 1 and w[0] != s["step"]:
                err("document %d offset %d in step %d, cut into step %d" % (mpos, poff, s["step"], w[0]))
            if a.window > 1 and abs(w[0] - s["step"]) >= a.window:
                err("document %d offset %d moved from step %d to %d" % (mpos, poff, w[0], s["step"]))
            step_tokens[s["step"]] = step_tokens.get(s["step"], 0) + ln
            budget = w[3]
            if step_tokens[s["step"]] > budget:
                err("step %d over its budget %d" % (s["step"], budget))
    # a window keeps every step's token budget: at most the budget, at
    # least what the cut guarantees (more than budget - seq-len, or what
    # the step had as cut); with fixed shapes exactly as cut
    if a.window > 1:
        cut_tokens, info = {}, {}
        for (st_, ln, sl, budget) in want.values():
            cut_tokens[st_] = cut_tokens.get(st_, 0) + ln
            info[st_] = (sl, budget)
        for st_, ct in cut_tokens.items():
            got = step_tokens.get(st_, 0)
            sl, budget = info[st_]
            low = ct if a.uniform else min(ct, budget - sl + 1)
            high = ct if a.uniform else budget
            if not low <= got <= high:
                err("step %d: %d tokens, cut %d, allowed %d..%d" % (st_, got, ct, low, high))
    # every token exactly once, pieces of a document in order by step
    for pos, _, toks in dl:
        off, prev = 0, -1
        while off < len(toks):
            got = seen.pop((pos, off), None)
            if got is None:
                err("document %d: tokens from %d missing" % (pos, off))
                break
            if got[0] < prev:
                err("document %d: piece at %d in step %d before step %d" % (pos, off, got[0], prev))
            prev = got[0]
            off += got[1]
    if seen:
        err("%d pieces of no document" % len(seen))
    if a.uniform:
        per = {}
        for s in sq:
            per.setdefault(s["step"], {}).setdefault(s["rank"], 0)
            per[s["step"]][s["rank"]] += 1
        for st, ranks in per.items():
            if len(ranks) != a.ranks or len(set(ranks.values())) != 1:
                err("step %d: ranks hold %r micro-batches" % (st, ranks))
        # exact steps: padding only in the stream's last step
        if not a.step_tokens:
            last = max(per) if per else 0
            for s in sq:
                if s["step"] != last and s["cu"][-1] != s["seq_len"]:
                    err("step %d rank %d mb %d: %d pad tokens before the last step" % (
                        s["step"], s["rank"], s["mb"], s["seq_len"] - s["cu"][-1]))
    ntok = sum(len(t) for _, _, t in dl)
    if errors:
        for e in errors:
            print(e, file=sys.stderr)
        sys.exit(1)
    print("ok %d documents %d tokens %d sequences %d steps" % (
        len(dl), ntok, len(sq), len(set(s["step"] for s in sq))))


def state(path, n):
    """The construct STATE text of checkpoint n in path, or None."""
    for kind, p, _ in frames(path):
        if kind == STATE:
            stage, tl, m = struct.unpack_from("<IIQ", p, 0)
            if stage == 2 and m == n:
                return p[16:16 + tl].decode()
    return None


def after(path, n, out):
    """Raw bytes of every frame after BARRIER n (not END) to out."""
    on = False
    for kind, p, raw in frames(path):
        if on and kind != END:
            out.write(raw)
        if kind == BARRIER and struct.unpack_from("<Q", p, 0)[0] == n:
            on = True


def body(path, out):
    """Raw bytes of every frame except META and END to out."""
    for kind, p, raw in frames(path):
        if kind not in (META, END):
            out.write(raw)


def barriers(path):
    return [struct.unpack_from("<Q", p, 0)[0]
            for kind, p, _ in frames(path) if kind == BARRIER]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "check":
        check(args)
    elif cmd == "state":
        st = state(args[0], int(args[1]))
        if st is None:
            sys.exit("no construct state %s" % args[1])
        sys.stdout.write(st)
    elif cmd == "barriers":
        for n in barriers(args[0]):
            print(n)
    elif cmd == "after":
        after(args[0], int(args[1]), sys.stdout.buffer)
    elif cmd == "body":
        body(args[0], sys.stdout.buffer)
    elif cmd == "cuts":
        for n in barriers(args[0]):
            st = state(args[0], n)
            if st is None:
                sys.exit("no construct state %d" % n)
            with open("%s/st.%d" % (args[1], n), "w") as f:
                f.write(st)
            with open("%s/after.%d" % (args[1], n), "wb") as f:
                after(args[0], n, f)
            print(n)
    elif cmd == "checks":
        import functools
        global docs, eod_of
        docs = functools.lru_cache(maxsize=None)(docs)
        eod_of = functools.lru_cache(maxsize=None)(eod_of)
        bad = 0
        for line in open(args[0]):
            try:
                check(line.split())
            except SystemExit as e:
                if e.code:
                    print("failed: check %s" % line.strip(), file=sys.stderr)
                    bad += 1
        sys.exit(1 if bad else 0)
    elif cmd == "bodies":
        for a in args:
            with open(a + ".body", "wb") as f:
                body(a, f)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
