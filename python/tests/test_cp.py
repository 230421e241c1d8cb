"""Context parallelism (plan key cp): RankDataset(cp_rank=r) gives exactly
what Megatron-LM's get_batch_on_this_cp_rank makes of the whole
micro-batch on CP rank r, for CP 2, 4 and 8 and documents of every
length, those shorter than 2 x CP included.

The reference below is written from Megatron-LM's megatron/core/utils.py
(read, not copied): with cu_seqlens, _get_batch_on_this_cp_rank_per_
document_balancing index-selects the sequence tensors with Transformer
Engine's thd_get_partitioned_indices over cu_seqlens_padded (every
document cut into 2 x CP equal chunks, rank r taking chunks r and
2CP-1-r, documents in order); _get_batch_on_this_cp_rank_per_sequence_
balancing views a sequence as 2 x CP chunks and takes chunks r and
2CP-1-r. Both leave cu_seqlens, cu_seqlens_padded and max_seqlen alone.
Transformer Engine's kernel does not run here (no CUDA), so the index is
computed in torch as its contract states.
"""

import math
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from overlord import megatron, offline  # noqa: E402
from overlord import torch as otorch  # noqa: E402

LENGTHS = "1,2,3,5,7,8,9,15,16,17,31,33,64,100,129,250,4,511,6"
RANKS = 2


def _run(tmp_path, tools, cp, pad="document", extra=""):
    d = tmp_path / ("cp%d-%s%s" % (cp, pad, "-h" if extra else ""))
    d.mkdir()
    plan = d / "p.plan"
    plan.write_text("source a path=x\nranks %d\nmicro-batches 2\nseq-len 512\n"
                    "cp %d\ncp-pad %s\n%s" % (RANKS, cp, pad, extra))
    docs = subprocess.run([tools("scripts/ovl-gendocs"), "--docs", "120",
                           "--lengths", LENGTHS, "--seed", str(cp)],
                          check=True, capture_output=True).stdout
    con = subprocess.run([tools("ovl-construct"), str(plan)], input=docs,
                         check=True, capture_output=True).stdout
    subprocess.run([tools("ovl-ckpt"), "--dir", str(d / "ck"), "--format", "frames",
                    "-o", str(d / "all.fr"), "-p", str(d / "r%d")],
                   input=con, check=True, capture_output=True)
    subprocess.run([tools("ovl-ckpt"), "--dir", str(d / "ck-npy"), "--format", "npy",
                    "-o", str(d / "npy")], input=con, check=True, capture_output=True)
    return [str(d / ("r%d" % r)) for r in range(RANKS)]


def thd_partitioned_indices(cu_seqlens_padded, total, cp_size, cp_rank):
    """Transformer Engine's thd_get_partitioned_indices as Megatron calls
    it: each document's 2 x CP chunks, chunks cp_rank and
    2CP-1-cp_rank."""
    idx = []
    for a, b in zip(cu_seqlens_padded[:-1].tolist(), cu_seqlens_padded[1:].tolist()):
        chunk = (b - a) // (2 * cp_size)
        for k in (cp_rank, 2 * cp_size - 1 - cp_rank):
            idx.append(torch.arange(a + k * chunk, a + (k + 1) * chunk))
    return torch.cat(idx)


def megatron_cp_slice(batch, cp_size, cp_rank, per_sequence):
    """get_batch_on_this_cp_rank on a batch of one micro-batch ([1, T])."""
    batch = dict(batch)
    if per_sequence:
        for key in ("tokens", "labels", "position_ids"):
            val = batch[key]
            val = val.view(1, 2 * cp_size, val.shape[1] // (2 * cp_size))
            index = torch.tensor([cp_rank, 2 * cp_size - cp_rank - 1])
            batch[key] = val.index_select(1, index).view(1, -1)
        return batch
    index = thd_partitioned_indices(batch["cu_seqlens_padded"][0],
                                    batch["tokens"].size(1), cp_size, cp_rank)
    for key in ("tokens", "labels", "position_ids"):
        batch[key] = batch[key].index_select(1, index)
    return batch


def as_batch(mb):
    return {"tokens": mb["input_ids"][None], "labels": mb["labels"][None],
            "position_ids": mb["position_ids"][None],
            "cu_seqlens": mb["cu_seqlens"][None],
            "cu_seqlens_padded": mb["cu_seqlens_padded"][None],
            "max_seqlen": mb["max_seqlen"]}


def steps(path, **kw):
    return [it["micro_batches"] for it in otorch.RankDataset(path, reconnect_timeout=None, **kw)]


def check_whole(mb, cp):
    """The whole micro-batch: every document at its padded place, padded
    to a multiple of 2 x CP with the pad id and no loss."""
    cu, cup = mb["cu_seqlens"].numpy(), mb["cu_seqlens_padded"].numpy()
    lens, plens = np.diff(cu), np.diff(cup)
    assert (plens % (2 * cp) == 0).all() and (plens >= lens).all()
    assert (plens - lens < 2 * cp).all()
    assert mb["max_seqlen"] == int(plens.max())
    assert len(mb["input_ids"]) == cup[-1] <= 512
    lab = mb["labels"].numpy()
    for a, pa, n, pn in zip(cu[:-1], cup[:-1], lens, plens):
        assert (lab[pa + n - 1:pa + pn] == -100).all()
        assert (mb["input_ids"].numpy()[pa + n:pa + pn] == 0).all()  # pad id: eod
    return lens


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_cp_rank_slices_are_megatrons(tmp_path, tools, cp):
    short = 0
    for path in _run(tmp_path, tools, cp):
        whole = steps(path)
        ranks = [steps(path, cp_rank=r) for r in range(cp)]
        assert sum(len(s) for s in whole) > 0
        for i, mbs in enumerate(whole):
            for j, mb in enumerate(mbs):
                short += int((check_whole(mb, cp) < 2 * cp).sum())
                for r in range(cp):
                    ref = megatron_cp_slice(as_batch(mb), cp, r, False)
                    got = ranks[r][i][j]
                    assert torch.equal(got["input_ids"], ref["tokens"][0])
                    assert torch.equal(got["labels"], ref["labels"][0])
                    assert torch.equal(got["position_ids"], ref["position_ids"][0])
                    # the metadata stays global
                    assert torch.equal(got["cu_seqlens"], mb["cu_seqlens"])
                    assert torch.equal(got["cu_seqlens_padded"], mb["cu_seqlens_padded"])
                    assert got["max_seqlen"] == mb["max_seqlen"]
                    assert len(got["input_ids"]) * cp == len(mb["input_ids"])
                p = megatron.packed_seq_params(mb)
                assert p["qkv_format"] == "thd" and p["max_seqlen_q"] == mb["max_seqlen"]
                assert p["cu_seqlens_q_padded"] is mb["cu_seqlens_padded"]
    assert short > 0    # documents shorter than 2 x CP were split too


def test_cp_pad_sequence_slices_per_sequence(tmp_path, tools):
    cp = 4
    for path in _run(tmp_path, tools, cp, pad="sequence"):
        whole = steps(path)
        r1 = steps(path, cp_rank=1)
        for mbs, mbs1 in zip(whole, r1):
            for mb, got in zip(mbs, mbs1):
                assert len(mb["input_ids"]) % (2 * cp) == 0
                assert mb["cu_seqlens_padded"][-1] == len(mb["input_ids"])
                ref = megatron_cp_slice(as_batch(mb), cp, 1, True)
                assert torch.equal(got["input_ids"], ref["tokens"][0])
                assert torch.equal(got["labels"], ref["labels"][0])


def test_no_cp_plan_refuses_cp_rank(pipeline, tmp_path, tools):
    plan, fr = pipeline
    subprocess.run([tools("ovl-ckpt"), "--dir", str(tmp_path / "ck"), "--format", "frames",
                    "-o", str(tmp_path / "all.fr"), "-p", str(tmp_path / "r%d")],
                   input=fr.read_bytes(), check=True, capture_output=True)
    from overlord import frames
    with pytest.raises(frames.FrameError, match="no cp"):
        steps(str(tmp_path / "r0"), cp_rank=0)


@pytest.mark.parametrize("pad", ["document", "sequence"])
def test_npy_holds_the_same_fields(tmp_path, tools, pad):
    cp = 4
    paths = _run(tmp_path, tools, cp, pad=pad)
    want = {}
    for rank, path in enumerate(paths):
        for it in otorch.RankDataset(path, reconnect_timeout=None):
            for mb, m in enumerate(it["micro_batches"]):
                want[(it["step"], rank, mb)] = m
    got = list(offline.npy(os.path.join(os.path.dirname(paths[0]), "npy")))
    assert len(got) == len(want) > 0
    for s in got:
        m = want[(s.step, s.rank, s.mb)]
        assert s.max_seqlen == m["max_seqlen"]
        assert (s.cu_seqlens_padded.astype(np.int64) ==
                m["cu_seqlens_padded"].numpy()).all()
        assert (s.cu_seqlens.astype(np.int64) == m["cu_seqlens"].numpy()).all()


def gpus_needed(seq_len, max_seq_len_per_rank):
    """Megatron-LM's BalancedCPScheduler.gpus_needed
    (megatron/core/pipeline_parallel/hybrid_cp_schedule.py): the next
    power of two of the length over the tokens a rank holds."""
    return max(1, 2 ** math.ceil(math.log2(seq_len / max_seq_len_per_rank)))


def partner_cp_size(sample_id_groups, group_id, sub_sample_id):
    """hybrid_context_parallel_forward_backward's _get_new_data_iterator:
    a sample's local_cp_size is the count of DP x CP ranks whose list in
    the group holds it."""
    return len([True for ids in sample_id_groups[group_id] if sub_sample_id in ids])


@pytest.mark.parametrize("cp,pad", [(2, "document"), (4, "document"), (8, "document"),
                                    (4, "sequence")])
def test_hybrid_slices_are_megatrons(tmp_path, tools, cp, pad):
    """cp-balance hybrid: every sequence's local_cp_size is Megatron's
    rule (capped at cp), and CP rank c gets exactly the sequences of its
    groups, each split as get_batch_on_this_cp_rank splits a hybrid
    sub-sample (per sequence over local_cp_size ranks, rank c in its
    aligned group), in the stream's order."""
    per = 512 // cp
    sizes = set()
    for dp, path in enumerate(_run(tmp_path, tools, cp, pad, "cp-balance hybrid\n")):
        whole = steps(path)
        ranks = [steps(path, cp_rank=c) for c in range(cp)]
        items = list(otorch.RankDataset(path, reconnect_timeout=None))
        assert sum(len(s) for s in whole) > 0
        for i, mbs in enumerate(whole):
            got = [[] for _ in range(cp)]
            for mb in mbs:
                k, first = mb["local_cp_size"], mb["cp_first"]
                lens = np.diff(mb["cu_seqlens"].numpy())
                sizes.add(k)
                assert first % k == 0 and first + k <= cp
                if k > 1:   # one sub-sample, Megatron's CP size
                    assert len(lens) == 1
                    assert k == min(cp, gpus_needed(int(lens[0]), per))
                else:
                    assert all(gpus_needed(int(n), per) == 1 for n in lens)
                assert len(mb["input_ids"]) % (2 * k) == 0
                assert len(mb["input_ids"]) <= per * k
                for c in range(first, first + k):
                    # Megatron's hybrid group of size k holding DP x CP
                    # rank dp * cp + c, and c's rank in it
                    hdp = dp * cp + c
                    assert hdp // k * k == dp * cp + first
                    ref = (megatron_cp_slice(as_batch(mb), k, hdp % k, True)
                           if k > 1 else as_batch(mb))
                    got[c].append(ref)
            for c in range(cp):
                mine = ranks[c][i]
                assert len(mine) == len(got[c])
                for m, ref in zip(mine, got[c]):
                    assert torch.equal(m["input_ids"], ref["tokens"][0])
                    assert torch.equal(m["labels"], ref["labels"][0])
                    assert torch.equal(m["position_ids"], ref["position_ids"][0])
                    assert torch.equal(m["cu_seqlens_padded"], ref["cu_seqlens_padded"][0])
            # Megatron's schedule of the step: its partner count is ours
            samples, groups = megatron.hybrid_batch(items[i], dp, cp, RANKS)
            assert len(groups[0]) == RANKS * cp
            for j, (sid, smp) in enumerate(samples.items()):
                assert partner_cp_size(groups, 0, sid) == mbs[j]["local_cp_size"]
                assert torch.equal(smp["tokens"][0], mbs[j]["input_ids"])
                p = megatron.packed_seq_params(mbs[j])
                assert p["local_cp_size"] == mbs[j]["local_cp_size"]
    assert 1 in sizes and cp in sizes
    npy = list(offline.npy(os.path.join(os.path.dirname(path), "npy")))
    assert sorted({s.local_cp_size for s in npy}) == sorted(sizes)
