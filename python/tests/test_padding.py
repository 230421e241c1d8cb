"""Labels never teach padding: in a fixed-shape run whose last step is
padded (the pad id is the end token), every reader (LoaderOrderDataset,
RankDataset's micro-batches, the offline readers) gives padding no loss
and never a real token's label with a loss."""

import os
import struct
import subprocess

import numpy as np
import pytest

import overlord
from overlord import megatron, offline

EOD = 256


@pytest.fixture()
def padded(tmp_path, tools, samples):
    """A uniform run of 2 ranks x 1 micro-batch whose last step is
    padded, written as Megatron, npy and per-rank frame outputs."""
    book = os.path.join(samples, "books", "book-00.txt")
    plan = tmp_path / "p.plan"
    plan.write_text("source b path=%s doc-per=blank-line\nranks 2\n"
                    "micro-batches 1\nuniform yes\nseq-len 64\n" % book)
    src = subprocess.run([tools("ovl-source"), "--doc-per", "blank-line", "b", book],
                         check=True, capture_output=True).stdout
    mix = subprocess.run([tools("ovl-mix"), str(plan), "b=-"], input=src,
                         check=True, capture_output=True).stdout
    con = subprocess.run([tools("ovl-construct"), str(plan)], input=mix,
                         check=True, capture_output=True).stdout
    out = {}
    for fmt in ("megatron", "npy"):
        extra = ["-p", str(tmp_path / "r%d")] if fmt == "npy" else []
        subprocess.run([tools("ovl-ckpt"), "--dir", str(tmp_path / ("ck-" + fmt)),
                        "--format", fmt, "-o", str(tmp_path / fmt)] + extra + [str(plan)],
                       input=con, check=True, capture_output=True)
        out[fmt] = str(tmp_path / fmt)
    out["ranks"] = [str(tmp_path / "r0"), str(tmp_path / "r1")]
    npy = list(offline.npy(out["npy"]))
    # the run is padded, and some padding follows a document cut there
    real = [real_of(s) for s in npy]
    assert any(r < 64 for r in real)
    assert any(r < 64 and s.tokens[r - 1] != EOD for s, r in zip(npy, real))
    return out


def real_of(s):
    """The real tokens of an npy sequence: its padding is a segment of its
    own, the last, all pad ids (ovl-ckpt(1))."""
    cu = s.cu_seqlens
    if len(cu) > 1 and (s.tokens[int(cu[-2]):] == EOD).all():
        return int(cu[-2])
    return len(s.tokens)


def no_padding_taught(tokens, labels, mask, real):
    n = len(tokens)
    assert (mask[max(real - 1, 0):] == 0).all()
    # with a loss: real tokens, whose label is a real token
    for k in np.nonzero(mask)[0]:
        assert k + 1 < real and labels[k] == tokens[k + 1]


def test_loader_order_dataset(padded):
    ds = megatron.LoaderOrderDataset(padded["megatron"], seq_length=64, eod=EOD,
                                     ranks=2, micro_batches=1)
    npy = list(offline.npy(padded["npy"]))
    seen = 0
    for i in range(len(ds)):
        want = npy[ds.index(i)]
        smp = ds[i]
        assert np.array_equal(smp["tokens"], want.tokens)
        real = real_of(want)
        no_padding_taught(smp["tokens"], smp["labels"], smp["loss_mask"], real)
        seen += real < 64
        # inside the real tokens, every piece's tokens but its last teach
        for a, b in zip(want.cu_seqlens[:-1], want.cu_seqlens[1:]):
            if b < real:
                assert smp["loss_mask"][a:b - 1].all()
    assert seen > 0


def test_loader_order_dataset_issue_example(tmp_path):
    # tokens [105 108 116 256 256]: a cut document, then padding
    seq = np.array([105, 108, 116, 256, 256], dtype=np.uint16)
    (tmp_path / "x.bin").write_bytes(seq.tobytes())
    (tmp_path / "x.idx").write_bytes(
        b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, 1, 2) +
        struct.pack("<i", 5) + struct.pack("<q", 0) + struct.pack("<2q", 0, 1))
    smp = megatron.LoaderOrderDataset(str(tmp_path / "x"), seq_length=5, eod=256)[0]
    assert smp["loss_mask"].tolist() == [1, 1, 0, 0, 0]
    assert smp["labels"][:2].tolist() == [108, 116]


def test_rank_dataset_micro_batches(padded):
    torch = pytest.importorskip("torch")
    del torch
    from overlord import torch as otorch
    seen = 0
    for path in padded["ranks"]:
        for item in otorch.RankDataset(path):
            for mb in item["micro_batches"]:
                ids = mb["input_ids"].numpy()
                lab = mb["labels"].numpy()
                real = int(mb["cu_seqlens"][-1])
                no_padding_taught(ids, lab, (lab != -100).astype(np.float32), real)
                seen += real < len(ids)
    assert seen > 0


def test_offline_readers(padded):
    npy = list(offline.npy(padded["npy"]))
    meg = list(offline.megatron(padded["megatron"]))
    assert len(npy) == len(meg)
    for a, b in zip(npy, meg):
        real = real_of(a)
        lab, mask = a.labels(EOD)
        no_padding_taught(a.tokens, lab, mask, real)
        # Megatron's output keeps no pieces: the end tokens and the
        # trailing pad ids tell them
        lab, mask = b.labels(EOD)
        no_padding_taught(b.tokens, lab, mask, real)
