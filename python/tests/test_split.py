"""Held-out splits on the trainer's side: a plan with ``split`` run once per
split (ovl-run --split) gives each split's per-rank streams, which
``overlord.torch.split_dataset`` reads, each numbered from step 0."""

import os
import shutil
import subprocess

import pytest

torch = pytest.importorskip("torch")

from overlord import offline, torch as otorch   # noqa: E402


def test_split_dataset_reads_each_splits_own_stream(tmp_path, tools, samples):
    # the data beside the plan: a document's identity (its file relative
    # to the plan) and so its split are the same in every run of the test
    shutil.copy(os.path.join(samples, "web", "web-0.jsonl"), tmp_path)
    plan = tmp_path / "p.plan"
    plan.write_text(
        "seed 1\nsplit 3,1\nsource web path=web-0.jsonl\nranks 2\nseq-len 256\n"
        "checkpoint every=4 dir=%s\noutput format=frames per-rank=%s\n"
        % (tmp_path / "ck", tmp_path / "r%d"))
    for s in ("train", "validation"):
        subprocess.run([tools("ovl-run"), "-q", "--split", s, str(plan)], check=True)
    got = {}
    for s in ("train", "validation"):
        assert os.path.exists(offline.split_path(str(tmp_path / "r1"), s))
        items = list(otorch.split_dataset(str(tmp_path / "r1"), s))
        # each split its own steps, from 0
        assert [i["step"] for i in items] == list(range(len(items)))
        got[s] = [tuple(mb["input_ids"].tolist()) for i in items for mb in i["micro_batches"]]
    assert len(got["train"]) > len(got["validation"]) > 0
    # no sequence of one split in the other (the short remnants of the
    # last step aside: two documents may end in the same few tokens)
    long = {k: {t for t in v if len(t) >= 64} for k, v in got.items()}
    assert long["validation"] and not long["train"] & long["validation"]
