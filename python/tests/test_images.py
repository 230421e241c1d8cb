"""Images through the trainer's edge: per-rank streams with IMAGE frames
(ovl-frame(5) minor 2) read by overlord.frames and RankDataset, bytes and
decoded, equal to the shard members; references read back from the shard."""

import os
import subprocess
import sys
import tarfile

import pytest

import overlord

PIL = pytest.importorskip("PIL.Image")
torch = pytest.importorskip("torch")
from overlord.torch import RankDataset  # noqa: E402


def shard(tmp_path, src):
    """A captioned image-text shard made by tests/helper/images.py, and
    its image members: name -> (bytes, offset of the data in the tar)."""
    out = tmp_path / "s.tar"
    subprocess.run([sys.executable, os.path.join(src, "tests", "helper", "images.py"),
                    "shard", str(out), "40", "21"], check=True, capture_output=True)
    members = {}
    with tarfile.open(out) as t:
        for m in t.getmembers():
            if not m.name.endswith(".txt"):
                members[m.name] = (t.extractfile(m).read(), m.offset_data)
    return out, members


def run(tools, tmp_path, plan_text):
    plan = tmp_path / "p.plan"
    plan.write_text(plan_text)
    args = subprocess.run([tools("ovl-mix"), "--source-args", "cap", str(plan)],
                          check=True, capture_output=True).stdout.split(b"\0")[:-1]
    src = subprocess.run([tools("ovl-source")] + [a.decode() for a in args],
                         check=True, capture_output=True, cwd=tmp_path).stdout
    mix = subprocess.run([tools("ovl-mix"), str(plan), "cap=-"], input=src,
                         check=True, capture_output=True).stdout
    con = subprocess.run([tools("ovl-construct"), str(plan)], input=mix,
                         check=True, capture_output=True).stdout
    subprocess.run([tools("ovl-ckpt"), "-d", str(tmp_path / "ck"), "--per-rank",
                    str(tmp_path / "r%d.fr")], input=con, check=True,
                   capture_output=True)
    return [str(tmp_path / ("r%d.fr" % r)) for r in range(2)]


PLAN = ("source cap path=s.tar format=wds image-cost=patch:16 image-token=0 %s\n"
        "seq-len 2048\nranks 2\nmicro-batches 2\ncheckpoint every=2\n")


def test_rank_dataset_images_bytes_and_pil(tools, tmp_path):
    src = os.environ["OVL_SRCDIR"]
    _, members = shard(tmp_path, src)
    ranks = run(tools, tmp_path, PLAN % "")
    seen = 0
    for path in ranks:
        for item in RankDataset(path):
            for mb in item["micro_batches"]:
                if "images" not in mb:
                    continue
                ids = mb["input_ids"]
                pos = mb["image_positions"]
                assert pos.dtype == torch.int64 and pos.shape == (len(mb["images"]), 2)
                for data, (at, n) in zip(mb["images"], pos.tolist()):
                    assert isinstance(data, bytes)
                    assert (ids[at:at + n] == 0).all()
                    assert any(data == m[0] for m in members.values())
                    seen += 1
        # decoded: the sizes Pillow reads from the members' bytes
        for item in RankDataset(path, images="pil"):
            for mb in item["micro_batches"]:
                for im in mb.get("images", []):
                    assert isinstance(im, PIL.Image)
                    assert im.size[0] > 0 and im.size[1] > 0
    assert seen == len(members)


def test_references_read_back_from_the_shard(tools, tmp_path):
    src = os.environ["OVL_SRCDIR"]
    _, members = shard(tmp_path, src)
    ranks = run(tools, tmp_path, PLAN % "images=ref")
    seen = 0
    for path in ranks:
        for seq in overlord.read(path):
            if not isinstance(seq, overlord.Seq):
                continue
            for im in seq.images:
                assert im.ref and im.data is None
                data, off = members[im.member]
                assert (im.offset, im.length) == (off, len(data))
                old = os.getcwd()
                os.chdir(tmp_path)      # the path as the source was given it
                try:
                    assert im.read() == data
                finally:
                    os.chdir(old)
                assert im.format in ("png", "jpeg", "webp")
                assert (seq.tokens[im.seq_pos:im.seq_pos + im.ntokens] == 0).all()
                seen += 1
    assert seen == len(members)


def test_an_image_nobody_announced_is_refused(tools, tmp_path):
    src = os.environ["OVL_SRCDIR"]
    shard(tmp_path, src)
    r0, _ = run(tools, tmp_path, PLAN % "")
    b = bytearray(open(r0, "rb").read())
    # clear the image count of every piece of the first SEQ with images
    for f in overlord.Reader(r0):
        if f.kind == overlord.frames.SEQ:
            s = overlord.Seq(bytes(f.payload), 0, f.flags)
            if s.images_due():
                break
    else:
        pytest.fail("no SEQ with images")
    p = f.offset + 12
    np_ = s.npieces
    ln = int.from_bytes(b[f.offset:f.offset + 4], "little")
    for i in range(np_):    # the piece records end the payload
        at = p + ln - 40 * np_ + 40 * i + 36
        b[at:at + 4] = b"\0\0\0\0"
    crc = overlord.crc32c(bytes(b[p:p + ln]), overlord.crc32c(bytes(b[f.offset:f.offset + 8])))
    b[f.offset + 8:f.offset + 12] = crc.to_bytes(4, "little")
    bad = tmp_path / "bad.fr"
    bad.write_bytes(bytes(b))
    with pytest.raises(overlord.FrameError, match="IMAGE frame that no SEQ"):
        list(overlord.read(str(bad)))
