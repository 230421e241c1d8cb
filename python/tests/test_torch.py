"""overlord.torch: micro-batch tensors, labels that never cross a document,
the dataset's steps and its state for the resume handshake."""

import subprocess

import pytest

torch = pytest.importorskip("torch")

import overlord  # noqa: E402
from overlord import torch as otorch  # noqa: E402


def test_labels_stop_at_document_ends(pipeline, tools, tmp_path):
    plan, fr = pipeline
    seqs = [x for x in overlord.read(str(fr)) if isinstance(x, overlord.Seq)]
    multi = next(s for s in seqs if s.npieces > 1)
    mb = otorch.micro_batch(multi)
    ids, labels, cu = mb["input_ids"], mb["labels"], mb["cu_seqlens"].tolist()
    assert ids.dtype == torch.int64 and mb["cu_seqlens"].dtype == torch.int32
    for a, b in zip(cu, cu[1:]):
        # inside a piece: the next token; at its last token: nothing
        assert labels[a:b - 1].tolist() == ids[a + 1:b].tolist()
        assert labels[b - 1].item() == -100
    assert mb["position_ids"][cu[1]].item() == 0


def test_rank_dataset_steps_and_state(pipeline, tools, tmp_path):
    plan, fr = pipeline
    subprocess.run([tools("ovl-ckpt"), "--dir", str(tmp_path / "ck"), "-p",
                    str(tmp_path / "r%d"), str(plan)], stdin=open(fr, "rb"), check=True)
    ds = otorch.RankDataset(str(tmp_path / "r1"))
    items = list(ds)
    assert [i["step"] for i in items] == list(range(len(items))) and len(items) > 10
    assert all(mb["input_ids"].numel() > 0 for i in items for mb in i["micro_batches"])
    assert ds.state_dict() == {"step": len(items)}
    # a trainer that needs step 5 next refuses a stream that starts before it
    again = otorch.RankDataset(str(tmp_path / "r1"))
    again.load_state_dict({"step": 5})
    with pytest.raises(overlord.FrameError, match="--resume-step 5"):
        list(again)
    assert otorch.agree_step(7) == 7
