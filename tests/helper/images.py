#!/usr/bin/python3
"""Image-text WebDataset shards for the tests, made with Pillow (Debian
python3-pil), and what a reader must find in them.

  images.py shard OUT.tar N SEED [--corrupt K]
      N samples: each a .txt caption and 0 to 3 images of random sizes in
      PNG (RGB, palette, 16-bit grey), JPEG (baseline, progressive, with an
      EXIF block before the frame header) and WebP (lossy, lossless, with
      alpha: VP8, VP8L, VP8X). Sample K (--corrupt) gets one image whose
      header is damaged. Prints one JSON line per sample: key, text, and
      the images' [format, width, height] as Pillow reads them back.
  images.py interleaved OUT.tar N SEED
      N interleaved samples: KEY.json {"texts": [text, null, text, ...]},
      each null the next image member; text between any two images. Prints
      one JSON line per sample: key, texts, images.
  images.py expect SPEC < samples.jsonl
      the placeholder count of every image under a cost model, one JSON
      list per sample: fixed:N, patch:P, dynamic:P:M:MIN:MAX (Qwen2-VL's
      smart_resize, written from its published description, with Python's
      round half to even).
"""
import io
import json
import math
import random
import sys
import tarfile

KINDS = [
    ("png", "RGB", {}), ("png", "P", {}), ("png", "I;16", {}),
    ("jpeg", "RGB", {}), ("jpeg", "RGB", {"progressive": True}),
    ("jpeg", "L", {"exif": True}),
    ("webp", "RGB", {}), ("webp", "RGBA", {"lossless": True}),
    ("webp", "RGBA", {}),
]
EXT = {"png": "png", "jpeg": "jpg", "webp": "webp"}


def make_image(rng, kind):
    from PIL import Image
    fmt, mode, opts = kind
    w, h = rng.randint(1, 700), rng.randint(1, 500)
    if rng.random() < 0.1:
        w, h = rng.randint(1000, 2400), rng.randint(800, 1800)
    img = Image.new(mode, (w, h))
    b = io.BytesIO()
    if fmt == "jpeg" and opts.get("exif"):
        ex = Image.Exif()
        ex[0x010e] = "x" * rng.randint(100, 3000)   # ImageDescription
        img.save(b, "JPEG", exif=ex.tobytes())
    elif fmt == "jpeg":
        img.save(b, "JPEG", progressive=opts.get("progressive", False))
    elif fmt == "webp":
        img.save(b, "WEBP", lossless=opts.get("lossless", False))
    else:
        img.save(b, "PNG")
    data = b.getvalue()
    back = Image.open(io.BytesIO(data))
    return data, [fmt, back.size[0], back.size[1]]


def add(tar, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = 0
    tar.addfile(ti, io.BytesIO(data))


def shard(out, n, seed, corrupt):
    rng = random.Random(seed)
    words = "a cat on a mat the dog ran far over hills image of sky".split()
    with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(n):
            key = "s%05d" % i
            text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 30)))
            imgs = []
            for j in range(rng.randint(0, 3)):
                data, info = make_image(rng, rng.choice(KINDS))
                if i == corrupt and j == 0:
                    data = data[:2] + b"\x00garbage" + data[10:]
                    info = None
                add(tar, "%s.%d.%s" % (key, j, EXT[info[0] if info else "png"]), data)
                imgs.append(info)
            if i == corrupt and not imgs:
                add(tar, key + ".0.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 30)
                imgs.append(None)
            add(tar, key + ".txt", text.encode())
            print(json.dumps({"key": key, "text": text, "images": imgs}))


def interleaved(out, n, seed):
    """Samples KEY.json {"texts": [...]} whose nulls stand for the images
    KEY.0.*, KEY.1.*, ... in member order, text always between two images
    (so no two placeholder runs touch)."""
    rng = random.Random(seed)
    words = "a cat on a mat the dog ran far over hills image of sky".split()
    with tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(n):
            key = "s%05d" % i
            texts, imgs = [], []
            for j in range(rng.randint(1, 4)):
                texts.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 120))))
                data, info = make_image(rng, rng.choice(KINDS))
                add(tar, "%s.%d.%s" % (key, j, EXT[info[0]]), data)
                imgs.append(info)
                texts.append(None)
            texts.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 60))))
            add(tar, key + ".json", json.dumps({"texts": texts}).encode())
            print(json.dumps({"key": key, "texts": texts, "images": imgs}))


def smart_resize(h, w, factor, lo, hi):
    hb = max(factor, round(h / factor) * factor)
    wb = max(factor, round(w / factor) * factor)
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        hb = max(factor, math.floor(h / beta / factor) * factor)
        wb = max(factor, math.floor(w / beta / factor) * factor)
    elif hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        hb = math.ceil(h * beta / factor) * factor
        wb = math.ceil(w * beta / factor) * factor
    return hb, wb


def cost(spec, w, h):
    kind, *a = spec.split(":")
    a = [int(x) for x in a]
    if kind == "fixed":
        return a[0]
    if kind == "patch":
        return math.ceil(h / a[0]) * math.ceil(w / a[0])
    p, m, lo, hi = a
    hb, wb = smart_resize(h, w, p * m, lo, hi)
    return (hb // p) * (wb // p) // (m * m)


def main():
    if sys.argv[1] == "shard":
        corrupt = int(sys.argv[5]) if len(sys.argv) > 5 else -1
        shard(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), corrupt)
    elif sys.argv[1] == "interleaved":
        interleaved(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "expect":
        for line in sys.stdin:
            s = json.loads(line)
            print(json.dumps([cost(sys.argv[2], i[1], i[2]) for i in s["images"]]))


if __name__ == "__main__":
    main()
