"""rank-digest.py SRC OUT...: read one rank's stream with overlord.torch's
RankDataset (a FIFO path or an endpoint) and write one line per step to
OUT: the step and a digest of every tensor it holds, so two reads of the
same run compare line by line. With several OUTs, one whole stream after
another (one run each), a fresh RankDataset for each: torch is loaded
once. After each stream, once the stream is let go, OUT.done is made.
Exits 1 on any exception (its message on stderr)."""
import hashlib
import sys

import torch

from overlord import torch as otorch


def digest(item):
    h = hashlib.sha256()
    for key in sorted(item):
        v = item[key]
        h.update(key.encode())
        if isinstance(v, torch.Tensor):
            h.update(str(v.dtype).encode())
            h.update(str(tuple(v.shape)).encode())
            h.update(v.contiguous().numpy().tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


def main():
    src = sys.argv[1]
    for out in sys.argv[2:]:
        with open(out, "w") as f:
            ds = otorch.RankDataset(src, reconnect_timeout=60)
            for item in ds:
                f.write("%s %s\n" % (item["step"], digest(item)))
                f.flush()
            ds.close()
        open(out + ".done", "w").close()


if __name__ == "__main__":
    main()
