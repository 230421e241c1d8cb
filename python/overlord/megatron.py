"""Megatron-LM trains in the loader's order.

Megatron's ``GPTDataset`` reshuffles documents and samples, so the
curriculum, the step order and the rank balance overlord computed are
lost. ``LoaderOrderDataset`` reads the indexed dataset ``ovl-ckpt`` writes
(``output format=megatron``) and hands Megatron's sequential sampler
(``--dataloader-type single``, the default) each sequence where the loader
put it: global batch ``g`` is the loader's step ``g``; within it Megatron
takes micro-batch after micro-batch, each split over the data-parallel
ranks, so sample ``i`` is mapped to the sequence the loader wrote for that
step, micro-batch and rank.

The recipe (the plan, then Megatron's flags)::

    # the plan: fixed shapes, so every rank has micro-batches sequences a step
    ranks R
    micro-batches M
    uniform yes
    output format=megatron path=data/packed

    # pretrain_gpt.py: the provider, and these flags
    from overlord.megatron import datasets_provider
    ...  pretrain(datasets_provider("data/packed", seq_length=S, eod=EOD, ranks=R,
                                    micro_batches=M), ...)
    --micro-batch-size 1 --global-batch-size R*M  (data-parallel size R)
    --seq-length S --eod-mask-loss --reset-position-ids --reset-attention-mask
    --tokenizer-type / --vocab-size as ``megatron_flags`` prints them

Each sample is a dict as ``GPTDataset`` gives it: ``tokens`` and
``labels`` (the next token, never across a document: a document's last
token predicts nothing), ``loss_mask`` (0 there, on padding and on the
last real token before padding: padding is never learnt) and
``position_ids`` (from 0 in every document), as numpy arrays of
``seq_length``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from typing import Optional

import os

from .offline import megatron as _sequences, next_token_labels, split_path


class LoaderOrderDataset:
    """The sequences of ``prefix`` (.bin/.idx by ovl-ckpt) as Megatron
    samples in the loader's step, micro-batch and rank order.

    ``ranks`` and ``micro_batches`` are the plan's; the plan must have
    fixed shapes (``uniform yes``): every step holds ranks x micro_batches
    sequences, which is checked. ``eod`` is the end-of-document id (the
    stream's META ``eod``), ``pad`` the run's padding id (ovl-construct's
    ``--pad-id``; default the eod, as ovl-construct's): the trailing run of
    it in a sequence is padding, and what a short sequence is filled with.
    """

    def __init__(self, prefix: str, seq_length: int, eod: int, ranks: int = 1,
                 micro_batches: int = 1, pad: Optional[int] = None) -> None:
        self.seqs = [s.tokens for s in _sequences(prefix)]
        self.seq_length, self.eod = int(seq_length), int(eod)
        self.pad = self.eod if pad is None else int(pad)
        self.ranks, self.mb = int(ranks), int(micro_batches)
        per = self.ranks * self.mb
        if per < 1 or len(self.seqs) % per != 0:
            raise ValueError(
                "%s: %d sequences are not whole steps of %d ranks x %d micro-batches "
                "(the plan needs uniform yes)" % (prefix, len(self.seqs), self.ranks, self.mb))
        for i, s in enumerate(self.seqs):
            if len(s) > self.seq_length:
                raise ValueError("%s: sequence %d has %d tokens, more than seq_length %d"
                                 % (prefix, i, len(s), self.seq_length))

    def __len__(self) -> int:
        return len(self.seqs)

    def index(self, i: int) -> int:
        """The written sequence of Megatron's sample i: global batch i //
        (R x M) is the step; inside it micro-batch k takes R consecutive
        samples, one per data-parallel rank."""
        per = self.ranks * self.mb
        step, j = divmod(int(i), per)
        mb, rank = divmod(j, self.ranks)
        return step * per + rank * self.mb + mb

    def __getitem__(self, i: int) -> dict:
        if not 0 <= i < len(self.seqs):
            raise IndexError(i)
        t = np.asarray(self.seqs[self.index(i)], dtype=np.int64)
        n, S = len(t), self.seq_length
        tokens = np.full(S, self.pad, dtype=np.int64)
        tokens[:n] = t
        labels = np.full(S, self.pad, dtype=np.int64)
        loss_mask = np.zeros(S, dtype=np.float32)
        # a document's end token predicts the next document, padding and
        # the token before it predict nothing: no loss
        labels[:n], loss_mask[:n] = next_token_labels(t, None, self.eod, self.pad)
        labels[n - 1:] = self.pad
        ends = np.nonzero(t == self.eod)[0]
        position_ids = np.zeros(S, dtype=np.int64)
        start = 0
        for e in list(ends) + [n - 1]:
            e = int(e)
            if e < start:
                continue
            position_ids[start:e + 1] = np.arange(e + 1 - start)
            start = e + 1
        return {"tokens": tokens, "labels": labels, "loss_mask": loss_mask,
                "position_ids": position_ids}


def datasets_provider(prefix: str, seq_length: int, eod: int, ranks: int = 1,
                      micro_batches: int = 1, pad: Optional[int] = None,
                      valid: Optional[str] = "auto",
                      test: Optional[str] = "auto") -> Callable:
    """A ``train_valid_test_datasets_provider`` for Megatron's
    ``pretrain()``: the training set ``prefix`` in the loader's order, and
    the validation and test sets in theirs. With a plan's ``split`` key,
    ``ovl-run --split validation`` and ``--split test`` write them at
    ``PREFIX.validation`` and ``PREFIX.test`` (``offline.split_path``):
    ``valid`` and ``test`` are those prefixes by default ("auto") when
    their ``.idx`` exists, else None; give a prefix, or None for no set.
    Each is a run of its own with the same shapes (``uniform yes``)."""

    def held_out(p, split):
        if p == "auto":
            p = split_path(prefix, split)
            return p if os.path.exists(p + ".idx") else None
        return p

    valid, test = held_out(valid, "validation"), held_out(test, "test")

    def provider(train_val_test_num_samples):
        del train_val_test_num_samples    # the loader decided the samples
        return tuple(None if p is None else
                     LoaderOrderDataset(p, seq_length, eod, ranks, micro_batches, pad)
                     for p in (prefix, valid, test))

    provider.is_distributed = True
    return provider


def megatron_flags(tokenizer: str, vocab: int, eod: int, seq_length: int,
                   ranks: int, micro_batches: int) -> list:
    """The Megatron-LM flags that match a run: its tokenizer (the META
    ``tokenizer`` name and the file it came from), vocabulary, end of
    document and shapes, as a list of arguments."""
    kind, _, path = tokenizer.partition(":")
    if kind == "hf":
        tok = ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", path]
    elif kind == "sentencepiece":
        tok = ["--tokenizer-type", "SentencePieceTokenizer", "--tokenizer-model", path]
    elif kind == "tiktoken":
        tok = ["--tokenizer-type", "TikTokenizer", "--tokenizer-model", path]
    else:
        # Megatron's NullTokenizer has its end of document at vocab-size
        if int(eod) != int(vocab) - 1:
            raise ValueError("NullTokenizer needs the end of document last (eod %d, "
                             "vocab %d)" % (eod, vocab))
        tok = ["--tokenizer-type", "NullTokenizer"]
        vocab = int(vocab) - 1
    return tok + ["--vocab-size", str(vocab), "--seq-length", str(seq_length),
                  "--micro-batch-size", "1",
                  "--global-batch-size", str(ranks * micro_batches),
                  "--eod-mask-loss", "--reset-position-ids", "--reset-attention-mask",
                  "--dataloader-type", "single"]


def packed_seq_params(mb: dict) -> dict:
    """Megatron-Core's ``PackedSeqParams`` fields for the THD format of a
    micro-batch of ``overlord.torch.RankDataset`` (a plan with ``cp``:
    ``cu_seqlens_padded`` and ``max_seqlen``; without, the true lengths
    are the padded ones): ``PackedSeqParams(**packed_seq_params(mb))``.
    The cu_seqlens are the whole micro-batch's (global), as Megatron keeps
    them on every context-parallel rank."""
    cu = mb["cu_seqlens"]
    cup = mb.get("cu_seqlens_padded", cu)
    m = mb.get("max_seqlen")
    if m is None:
        m = int((cup[1:] - cup[:-1]).max()) if len(cup) > 1 else 0
    out = {"qkv_format": "thd", "cu_seqlens_q": cu, "cu_seqlens_kv": cu,
           "cu_seqlens_q_padded": cup, "cu_seqlens_kv_padded": cup,
           "max_seqlen_q": int(m), "max_seqlen_kv": int(m)}
    if "local_cp_size" in mb:   # cp-balance hybrid: the sequence's CP size
        out["local_cp_size"] = int(mb["local_cp_size"])
    return out


def hybrid_batch(item: dict, dp_rank: int, cp: int, dp_size: int) -> tuple:
    """Megatron-LM's hybrid context parallelism (``--hybrid-context-
    parallel``) fed with overlord's schedule: what its
    ``HybridCPDataLoaderWrapper`` gives
    ``hybrid_context_parallel_forward_backward`` for one step, made from
    the step ``item`` of data-parallel rank ``dp_rank``'s
    ``RankDataset`` (whole micro-batches, no ``cp_rank``) of a plan with
    ``cp`` and ``cp-balance hybrid``: (samples, sample_id_groups).

    ``samples`` maps a sample id to its sub-sample (``tokens``,
    ``labels``, ``loss_mask``, ``position_ids`` of shape [1, T], the
    padded layout; ``cu_seqlens``, ``cu_seqlens_padded`` int32 [1, n+1];
    ``max_seqlen``), ``sample_id_groups`` the one group of the step:
    a list for each of the dp_size x cp ranks of the DP x CP group (rank
    dp x cp + c), this DP rank's filled with the ids of the sequences each
    CP rank runs, in the stream's order (the others' empty: overlord keeps
    a sequence's group inside its DP rank). Megatron counts a sample's
    ranks in its group for its ``local_cp_size``, which is overlord's, and
    get_batch_on_this_cp_rank splits it over them."""
    import torch
    samples, groups = {}, [[] for _ in range(int(dp_size) * int(cp))]
    for j, mb in enumerate(item["micro_batches"]):
        sid = int(dp_rank) << 20 | j
        lab = mb["labels"]
        samples[sid] = {
            "tokens": mb["input_ids"].to(torch.int64)[None],
            "labels": torch.where(lab < 0, torch.zeros_like(lab), lab)[None],
            "loss_mask": (lab >= 0).to(torch.float32)[None],
            "position_ids": mb["position_ids"].to(torch.int64)[None],
            "cu_seqlens": mb["cu_seqlens"][None],
            "cu_seqlens_padded": mb["cu_seqlens_padded"][None],
            "max_seqlen": torch.tensor([mb["max_seqlen"]], dtype=torch.int32)}
        k, first = int(mb["local_cp_size"]), int(mb["cp_first"])
        for c in range(first, first + k):
            groups[int(dp_rank) * int(cp) + c].append(sid)
    return samples, [groups]
