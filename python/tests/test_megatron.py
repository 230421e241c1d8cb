"""overlord.megatron: Megatron-LM's sequential sampler sees the loader's
order. A fixed-shape run written twice (Megatron and npy outputs, the same
bytes of sequences) tells each sequence's step, rank and micro-batch."""

import os
import subprocess
import sys

import numpy as np
import pytest

from overlord import megatron, offline


@pytest.fixture()
def run(tmp_path, tools, samples):
    web = os.path.join(samples, "web", "web-0.jsonl")
    books = os.path.join(samples, "books", "book-00.txt")
    out = {}
    for fmt in ("megatron", "npy"):
        plan = tmp_path / ("%s.plan" % fmt)
        plan.write_text(
            "source web path=%s\nsource book path=%s doc-per=file\n"
            "ranks 2\nmicro-batches 3\nuniform yes\nseq-len 128\nstop steps=6\n"
            "checkpoint every=2 dir=%s\noutput format=%s path=%s\n"
            % (web, books, tmp_path / ("ck-" + fmt), fmt, tmp_path / fmt / "packed"))
        subprocess.run([tools("ovl-run"), "-q", str(plan)], check=True)
        out[fmt] = str(tmp_path / fmt / "packed")
    return out


def test_megatron_samples_follow_the_loader_order(run):
    ds = megatron.LoaderOrderDataset(run["megatron"], seq_length=128, eod=256,
                                     ranks=2, micro_batches=3)
    npy = list(offline.npy(run["npy"]))
    assert len(ds) == len(npy) == 6 * 2 * 3
    # Megatron's sampler: global batch g, micro-batch k, data-parallel rank r
    # take sample g*6 + k*2 + r: it is the sequence of step g, rank r, mb k
    for i in range(len(ds)):
        g, j = divmod(i, 6)
        k, r = divmod(j, 2)
        want = [s for s in npy if (s.step, s.rank, s.mb) == (g, r, k)]
        assert len(want) == 1
        smp = ds[i]
        n = len(want[0].tokens)
        assert np.array_equal(smp["tokens"][:n], want[0].tokens)
        # labels: the next token; no loss across documents or on padding
        assert np.array_equal(smp["labels"][:n - 1], want[0].tokens[1:])
        assert smp["loss_mask"][n - 1:].sum() == 0
        ends = np.nonzero(want[0].tokens == 256)[0]
        assert (smp["loss_mask"][ends] == 0).all()
        # positions from 0 in every document, as the npy output has them
        cu = want[0].cu_seqlens
        for a, b in zip(cu, cu[1:]):
            assert np.array_equal(smp["position_ids"][a:b], np.arange(b - a))


def test_provider_and_flags(run):
    p = megatron.datasets_provider(run["megatron"], 128, 256, ranks=2, micro_batches=3)
    train, valid, test = p([36, 0, 0])
    assert len(train) == 36 and valid is None and test is None and p.is_distributed
    f = megatron.megatron_flags("bytes", 257, 256, 128, 2, 3)
    assert f[:2] == ["--tokenizer-type", "NullTokenizer"]
    assert f[f.index("--vocab-size") + 1] == "256"        # Megatron's eod is 256
    assert f[f.index("--global-batch-size") + 1] == "6"
    f = megatron.megatron_flags("hf:/m/tokenizer.json", 128256, 128001, 8192, 8, 4)
    assert f[:4] == ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                     "/m/tokenizer.json"]
    with pytest.raises(ValueError):
        megatron.LoaderOrderDataset(run["megatron"], 128, 256, ranks=4, micro_batches=5)


def _indexed_dataset(root):
    """Megatron-LM's own IndexedDataset from the checkout at root. The
    package megatron.core imports distributed checkpointing, which
    Debian's torch lacks (no torch.distributed.checkpoint): then the
    reader module alone is loaded, its packages made without running
    their __init__ and megatron.core.utils given the one function the
    reader takes from it (log_single_rank)."""
    sys.path.insert(0, root)
    try:
        from megatron.core.datasets.indexed_dataset import IndexedDataset
        return IndexedDataset
    except ImportError:
        for k in [k for k in sys.modules if k == "megatron" or k.startswith("megatron.")]:
            del sys.modules[k]
    import types
    for name in ("megatron", "megatron.core", "megatron.core.datasets"):
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(root, *name.split("."))]
        sys.modules[name] = m
    u = types.ModuleType("megatron.core.utils")
    u.log_single_rank = lambda logger, *a, **k: logger.log(*a, **k)
    sys.modules["megatron.core.utils"] = u
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    return IndexedDataset


@pytest.mark.skipif(not os.environ.get("OVL_MEGATRON_LM"),
                    reason="OVL_MEGATRON_LM (a Megatron-LM checkout) is not set: "
                           "the check against Megatron's own IndexedDataset is not run")
def test_megatron_indexed_dataset_reads_the_same(run):
    IndexedDataset = _indexed_dataset(os.environ["OVL_MEGATRON_LM"])
    ds = IndexedDataset(run["megatron"])
    ours = list(offline.megatron(run["megatron"]))
    assert len(ds) == len(ours)
    for i, s in enumerate(ours):
        assert np.array_equal(ds[i], s.tokens)


def test_provider_gives_the_held_out_splits(tmp_path, tools, samples):
    """A plan with ``split``: each split a run of its own (ovl-run --split),
    Megatron's provider returns the three, disjoint, in whole steps."""
    web = os.path.join(samples, "web", "web-0.jsonl")
    plan = tmp_path / "s.plan"
    plan.write_text(
        "seed 2\nsplit 2,1,1\nsource web path=%s\nranks 2\nuniform yes\nseq-len 128\n"
        "checkpoint every=2 dir=%s\noutput format=megatron path=%s\n"
        % (web, tmp_path / "ck", tmp_path / "out" / "packed"))
    for s in offline.SPLITS:
        subprocess.run([tools("ovl-run"), "-q", "--split", s, str(plan)], check=True)
    prefix = str(tmp_path / "out" / "packed")
    assert offline.split_path(prefix, "test") == prefix + ".test"
    train, valid, test = megatron.datasets_provider(prefix, 128, 256, ranks=2)([0, 0, 0])
    assert len(train) > len(valid) > 0 and len(test) > 0
    assert len(train) % 2 == len(valid) % 2 == len(test) % 2 == 0

    def docs(ds):
        toks = np.concatenate([ds[i]["tokens"] for i in range(len(ds))])
        return {bytes(d) for d in np.split(toks, np.nonzero(toks == 256)[0] + 1) if len(d) > 1}
    a, b, c = docs(train), docs(valid), docs(test)
    assert not (a & b) and not (a & c) and not (b & c)
    # None leaves a set out
    assert megatron.datasets_provider(prefix, 128, 256, ranks=2, valid=None,
                                      test=None)([0, 0, 0])[1:] == (None, None)
    with pytest.raises(ValueError):
        offline.split_path(prefix, "dev")
