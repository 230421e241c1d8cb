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


def test_fast_paths_give_the_same_tensors(pipeline, tools, tmp_path):
    """RankDataset's tensors (checked and made in the loop from the blocks
    its thread read) equal micro_batch's of each Seq; dtype=torch.int32 gives
    the same values as int32 views; tensors stay valid after the stream
    moved on (the blocks are reused only once nothing refers to them)."""
    plan, fr = pipeline
    subprocess.run([tools("ovl-ckpt"), "--dir", str(tmp_path / "ck"), "-p",
                    str(tmp_path / "r%d"), str(plan)], stdin=open(fr, "rb"), check=True)
    src = str(tmp_path / "r0")
    want = [[otorch.micro_batch(s) for s in seqs] for _, seqs in overlord.steps(src)]
    want = [{k: v.clone() for k, v in mb.items()} for mbs in want for mb in mbs]
    for dtype in (torch.int64, torch.int32):
        # small blocks: many of them, reused while the test holds tensors
        got = [mb for i in otorch.RankDataset(src, dtype=dtype, prefetch=1)
               for mb in i["micro_batches"]]
        assert len(got) == len(want) > 20
        for a, b in zip(want, got):
            assert b["input_ids"].dtype == dtype and b["position_ids"].dtype == dtype
            assert b["labels"].dtype == torch.int64 and b["cu_seqlens"].dtype == torch.int32
            for k in a:
                assert torch.equal(a[k], b[k].to(a[k].dtype)), k
    blocks = [s for s in overlord.read(src, chunk=4096) if isinstance(s, overlord.Seq)]
    again = [s for s in overlord.read(src) if isinstance(s, overlord.Seq)]
    assert [s.tokens.tolist() for s in blocks] == [s.tokens.tolist() for s in again]


def test_data_loader_workers(pipeline, tools, tmp_path):
    """Under DataLoader one worker reads the stream (the same steps as
    without); two workers would each open it: refused, saying why."""
    plan, fr = pipeline
    subprocess.run([tools("ovl-ckpt"), "--dir", str(tmp_path / "ck"), "-p",
                    str(tmp_path / "r%d"), str(plan)], stdin=open(fr, "rb"), check=True)
    src = str(tmp_path / "r0")
    want = [i["step"] for i in otorch.RankDataset(src)]
    dl = torch.utils.data.DataLoader(otorch.RankDataset(src), batch_size=None,
                                     num_workers=1)
    assert [i["step"] for i in dl] == want
    dl = torch.utils.data.DataLoader(otorch.RankDataset(src), batch_size=None,
                                     num_workers=2)
    with pytest.raises(RuntimeError, match=r"DataLoader\(num_workers=2\) would "
                       r"open it in every worker; use num_workers=0 or 1"):
        list(dl)
