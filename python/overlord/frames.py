"""A streaming reader of ovl-frame(5): the stream between overlord's stages
and the per-rank streams ovl-ckpt writes for a trainer.

The reader is incremental: it reads what is there (a file, a FIFO, a socket,
any object with ``read`` or ``recv_into``) and hands out each frame as soon
as it is whole, so a live stream is read while it is written. Every frame's
CRC-32C is checked, and the stream header, the frame bounds and the END
frame's count, as the C reader does; an error names the stream and the byte
offset of the frame at fault. SEQ frames give numpy views of their tokens,
positions and cu_seqlens: views of the blocks read (4 MiB numpy arrays),
no copy at all; the CRC runs in C on the bytes where they are.

Over a socket endpoint (``"unix:PATH"``, ``"tcp:HOST:PORT"``) the reader
passes the run's handshake, and with ``next_step=S`` announces the step it
needs (``overlord.read("unix:run/rank0.sock", next_step=S)``; see
overlord.net and ovl-frame(5)).
"""

import os
import socket
import struct
import sys

import numpy as np

from . import _crc
from ._crc import crc32c

MAGIC = b"\x89OVL\r\n\x1a\n"
MAJOR = 1
MINOR = 2  # 1: STEP frames; 2: 16-bit token and position arrays, IMAGE frames

# frame header flags (minor 2): a DOC's or SEQ's ids are uint16 (U16), a
# SEQ's positions are uint16 (POS16), or not sent (NOPOS: they restart at 0
# at every piece, 0 in the padding); a uint16 array is padded to 4 bytes
FL_U16, FL_POS16, FL_NOPOS = 0x01, 0x02, 0x04

META, DOC, CHUNK_END, SEQ, BARRIER, STATE, END, STEP = 1, 2, 3, 4, 5, 6, 7, 8
IMAGE = 9
KIND_NAMES = {META: "META", DOC: "DOC", CHUNK_END: "CHUNK_END", SEQ: "SEQ",
              BARRIER: "BARRIER", STATE: "STATE", END: "END", STEP: "STEP",
              IMAGE: "IMAGE"}

FRAME_MAX_DEFAULT = 256 << 20
_HDR = struct.Struct("<IBBHI")          # len, kind, flags, reserved, crc
_SEQ = struct.Struct("<QIIIIII")        # step rank mb ntokens npieces seq_len flags
_SEQ_COUNTS = struct.Struct("<II")      # ntokens npieces, at byte 16 of a SEQ
_BARRIER = struct.Struct("<QQQQI")      # n step mix_pos tokens offset
_STEP = struct.Struct("<QII")           # step rank seqs
_END_LEN, _STEP_LEN, _BARRIER_LEN = 16, 16, 40   # payloads, as frame.h
# flags format width height index ntokens doc_pos seq_pos step rank mb piece
# name_len offset length path_len data_len
_IMAGE = struct.Struct("<IIIIIIIIQIIIIQQII")
IMAGE_INLINE, IMAGE_REF = 1, 2
RUN = 0         # not a frame kind: a run of SEQ and STEP frames walked in C
ROW_WORDS = 8   # a walked frame's row (_fast.c): step, payload offset, kind,
#                 frame flags, rank, micro-batch (STEP: seqs), ntokens, npieces
_W_OTHER = 1    # the walk stopped before a frame it leaves to Python
IMAGE_FORMATS = {1: "png", 2: "jpeg", 3: "webp"}


class FrameError(Exception):
    """A stream that is not a sound ovl-frame(5) stream. Its message names
    the stream and the byte offset, as the tools' exit-3 messages do."""


class Frame:
    """One frame: kind, flags, payload (a read-only memoryview of the bytes
    read, no copy) and its byte offset."""

    __slots__ = ("kind", "flags", "payload", "offset")

    def __init__(self, kind, flags, payload, offset):
        self.kind, self.flags, self.payload, self.offset = kind, flags, payload, offset

    @property
    def name(self):
        return KIND_NAMES.get(self.kind, "KIND%d" % self.kind)


def _seq_layout(ntok, npieces, fflags):
    """(token dtype, positions offset, positions dtype, cu_seqlens offset,
    payload bytes without the pieces) of a SEQ, offsets from its payload."""
    tw = 2 if fflags & FL_U16 else 4
    pw = 2 if fflags & FL_POS16 else 0 if fflags & FL_NOPOS else 4
    pos = 32 + ((ntok * tw + 3) & ~3)
    cu = pos + ((ntok * pw + 3) & ~3)
    return ("<u2" if tw == 2 else "<u4", pos, "<u2" if pw == 2 else "<u4",
            cu, cu + 4 * (npieces + 1))


def _positions(cu, ntok, dtype=np.uint32):
    """The position ids of a SEQ that sent none (NOPOS): 0, 1, ... from
    every piece's start (cu_seqlens), 0 in the padding; uint32 or int64.
    In C (libovlcrc.so) when it is there: one pass."""
    bits = 64 if dtype == np.int64 else 32
    fn = _crc.positions_at.get(bits)
    if fn is not None:
        pos = np.empty(ntok, np.int64 if bits == 64 else np.uint32)
        cu = np.ascontiguousarray(cu, np.uint32)
        fn(cu.ctypes.data, len(cu) - 1 if len(cu) else 0, pos.ctypes.data, ntok)
        return pos
    pos = np.zeros(ntok, np.uint32)
    real = min(int(cu[-1]), ntok) if len(cu) else 0
    if real:
        starts = cu[:-1].astype(np.int64)
        pos[:real] = np.arange(real, dtype=np.uint32) - np.repeat(
            starts, np.diff(cu).astype(np.int64)).astype(np.uint32)
    return pos.astype(dtype) if bits == 64 else pos


def _cu_ok(buf, p, ntok, npieces, fflags):
    """True when a SEQ's cu_seqlens (payload at p of buf) go from 0, never
    down, to at most its ntok tokens, as the C reader asks
    (ovl_seq_decode): positions and labels are made from them."""
    cu = np.frombuffer(buf, "<u4", npieces + 1,
                       p + _seq_layout(ntok, npieces, fflags)[3]).tolist()
    # sorted() of a sorted list is one pass (and less than numpy's three)
    return cu[0] == 0 and cu[-1] <= ntok and sorted(cu) == cu


class Run:
    """SEQ and STEP frames the C walk took (``RankDataset``'s fast path):
    the block they are in (buf, and its address) and their rows (a view
    of the reader's row array, ROW_WORDS uint64 words each, at raddr:
    valid until the reader goes on)."""

    __slots__ = ("buf", "addr", "rows", "raddr")

    def __init__(self, buf, addr, rows, raddr):
        self.buf, self.addr, self.rows, self.raddr = buf, addr, rows, raddr


class Seq:
    """A packed sequence: step, rank, micro-batch, the tokens, the positions
    (restarting at 0 per document piece) and cu_seqlens (numpy views of the
    bytes read: no copy), and its capacity seq_len. Tokens and positions
    are uint32, or uint16 where the frame's flags say so (ovl-frame(5)
    minor 2: a vocabulary of at most 65,536 ids); cu_seqlens is uint32. A
    SEQ that sent no positions (they restart at every piece) has them
    computed from cu_seqlens (uint32, a new array).
    ``Seq(payload)``, or ``Seq(buffer, offset)`` for a payload at offset of
    a larger buffer (bounds checked by the reader); fflags are the frame
    header's flags."""

    __slots__ = ("step", "rank", "mb", "seq_len", "flags", "tokens",
                 "_pos", "cu_seqlens", "npieces", "buffer", "offset",
                 "images", "_pieces")

    def __init__(self, payload, offset=0, fflags=0):
        self.buffer, self.offset = payload, offset     # where it was read
        self.images = []    # its Image frames, in order (read, steps)
        (self.step, self.rank, self.mb, ntok, self.npieces, self.seq_len,
         self.flags) = _SEQ.unpack_from(payload, offset)
        if not fflags & (FL_U16 | FL_POS16 | FL_NOPOS):
            # one view of the three arrays, sliced (they follow each other)
            a = np.frombuffer(payload, "<u4", 2 * ntok + self.npieces + 1,
                              offset + 32)
            self.tokens = a[:ntok]
            self._pos = a[ntok:2 * ntok]
            self.cu_seqlens = a[2 * ntok:]
            self._pieces = offset + 32 + 8 * ntok + 4 * (self.npieces + 1)
            return
        tdt, pos, pdt, cu, _ = _seq_layout(ntok, self.npieces, fflags)
        self._pieces = offset + cu + 4 * (self.npieces + 1)
        self.tokens = np.frombuffer(payload, tdt, ntok, offset + 32)
        self.cu_seqlens = np.frombuffer(payload, "<u4", self.npieces + 1,
                                        offset + cu)
        if fflags & FL_NOPOS:
            self._pos = None          # made when asked (positions)
        else:
            self._pos = np.frombuffer(payload, pdt, ntok, offset + pos)

    @property
    def positions(self):
        """The position ids: a view of the bytes read, or (NOPOS) computed
        from cu_seqlens at first use (uint32)."""
        if self._pos is None:
            self._pos = _positions(self.cu_seqlens, len(self.tokens))
        return self._pos

    def positions_as(self, dtype):
        """The position ids as dtype (np.int64: what a model takes), in one
        pass when the SEQ sent none."""
        if self._pos is None and dtype == np.int64:
            return _positions(self.cu_seqlens, len(self.tokens), np.int64)
        return self.positions.astype(dtype)

    def images_due(self):
        """The IMAGE frames that follow this SEQ (its pieces' counts)."""
        np_ = self.npieces
        if np_ == 0:
            return 0
        rec = np.frombuffer(self.buffer, "<u4", 10 * np_, self._pieces)
        return int(rec[9::10].sum())

    def __repr__(self):
        return "Seq(step=%d, rank=%d, mb=%d, tokens=%d, images=%d)" % (
            self.step, self.rank, self.mb, len(self.tokens), len(self.images))


class Image:
    """An image of a sequence (an IMAGE frame after its SEQ): where its
    run of placeholder tokens begins in the sequence (seq_pos) and how long
    it is (ntokens), its format ("png", "jpeg", "webp") and size as its
    header says, the shard member it came from, and either its bytes
    (``data``, inline) or where they are (``path``, ``offset``,
    ``length``: a reference, ``images=ref``). ``read()`` gives the bytes
    either way; ``pil()`` decodes them with Pillow."""

    __slots__ = ("ref", "format", "width", "height", "index", "ntokens",
                 "doc_pos", "seq_pos", "step", "rank", "mb", "piece",
                 "offset", "length", "member", "path", "data")

    def __init__(self, payload):
        (flags, fmt, self.width, self.height, self.index, self.ntokens,
         self.doc_pos, self.seq_pos, self.step, self.rank, self.mb,
         self.piece, nl, self.offset, self.length, pl,
         dl) = _IMAGE.unpack_from(payload, 0)
        if 80 + nl + pl + dl > len(payload) or flags not in (1, 2) or \
                (flags == IMAGE_INLINE and dl != self.length) or \
                (flags == IMAGE_REF and dl != 0):
            raise ValueError("malformed IMAGE frame")
        self.ref = flags == IMAGE_REF
        self.format = IMAGE_FORMATS.get(fmt, "format%d" % fmt)
        b = bytes(payload[80:80 + nl + pl]) if nl + pl else b""
        self.member = b[:nl].decode("utf-8", "replace")
        self.path = b[nl:].decode("utf-8", "surrogateescape") if self.ref else None
        self.data = None if self.ref else bytes(payload[80 + nl + pl:80 + nl + pl + dl])

    def read(self):
        """The image's bytes: inline, or read from its shard (a reference:
        the member's data at offset of the tar at path)."""
        if not self.ref:
            return self.data
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            b = f.read(self.length)
        if len(b) != self.length:
            raise OSError("'%s': %d bytes at offset %d, the shard has %d"
                          % (self.path, self.length, self.offset, len(b)))
        return b

    def pil(self):
        """The image decoded by Pillow (PIL.Image; needs python3-pil)."""
        import io
        from PIL import Image as PILImage
        return PILImage.open(io.BytesIO(self.read()))

    def __repr__(self):
        return "Image(%s %dx%d, seq_pos=%d, ntokens=%d, %s)" % (
            self.format, self.width, self.height, self.seq_pos, self.ntokens,
            "ref" if self.ref else "%d bytes" % self.length)


class StepEnd:
    """The end of a step for a rank (its seqs sequences; 0 when it got
    none): the rank may train on the step."""

    __slots__ = ("step", "rank", "seqs")

    def __init__(self, payload):
        self.step, self.rank, self.seqs = _STEP.unpack_from(payload, 0)

    def __repr__(self):
        return "StepEnd(step=%d, rank=%d, seqs=%d)" % (self.step, self.rank, self.seqs)


class Barrier:
    """A checkpoint boundary: checkpoint n, before step step."""

    __slots__ = ("n", "step", "mix_pos", "tokens", "offset")

    def __init__(self, payload):
        (self.n, self.step, self.mix_pos, self.tokens,
         self.offset) = _BARRIER.unpack_from(payload, 0)


def _source(src, next_step=None):
    """(read_into(buf) -> n, name, close) for a path, an fd, a file object,
    a socket, or an endpoint "tcp:HOST:PORT" or "unix:PATH"
    (overlord.net.connect: the handshake with the run's secret and id from
    OVL_SECRET_FILE or OVL_SECRET and OVL_RUN_ID, then the announcement of
    next_step when given)."""
    if isinstance(src, str) and src.startswith(("tcp:", "unix:")):
        # a stage's tcp-listen: or unix-listen: output, through the handshake
        from . import net
        s = net.connect(src, next_step=next_step)
        return s.recv_into, src, s.close
    if isinstance(src, (str, bytes, os.PathLike)):
        f = open(src, "rb", buffering=0)
        return f.readinto, os.fsdecode(src), f.close
    if isinstance(src, int):
        f = os.fdopen(src, "rb", buffering=0, closefd=False)
        return f.readinto, "fd %d" % src, lambda: None
    if isinstance(src, socket.socket):
        return src.recv_into, "socket", lambda: None
    if hasattr(src, "readinto"):
        return src.readinto, getattr(src, "name", "stream"), lambda: None
    raise TypeError("a path, an fd, a socket or a binary file object")


class Reader:
    """Iterate over the frames of a stream, as they arrive.

    ``Reader(path_or_file)`` yields Frame objects (END included, once);
    ``reader.meta`` holds the META's ``key value`` lines as a dict of lists
    once it was read; ``reader.minor`` the stream's minor version. Frames
    of a kind this reader does not know are skipped in a stream of a newer
    minor version and an error in one of this version or older. With an
    endpoint, ``next_step`` is the step announced to the writer (the
    resume handshake, see overlord.net). ``before_read``, a function, is
    called before each read, which may block on a live stream (a thread
    that reads ahead hands over what it made then).

    The bytes are read in blocks of ``chunk`` bytes (more for a larger
    frame) into numpy buffers, and frames are handed out as views of them:
    a block lives as long as a view of it does, and is read into again
    (one of the last ``spare`` blocks) once none does.
    """

    def __init__(self, src, check_crc=True, frame_max=FRAME_MAX_DEFAULT,
                 chunk=4 << 20, next_step=None, before_read=None, spare=8):
        self._read, self.name, self._close = _source(src, next_step)
        self._before_read = before_read
        self.check_crc = check_crc
        self.frame_max = frame_max
        self._chunk_size = chunk
        self._buf = np.empty(0, np.uint8)   # the block read last
        self._spare = []         # earlier blocks, reused once unreferenced
        self._nspare = spare     # how many of them are kept
        self._pos = 0            # first unread byte in _buf
        self._end = 0            # bytes read into _buf
        self._base = 0           # stream offset of _buf[0]
        self._eof = False
        self.meta = None
        self.minor = None
        self.count = 0
        self.skipped = 0
        self._due = 0            # IMAGE frames due (_items): no walk then
        self._rows = self._res = self._raddr = None     # the walk's (_scan)

    def close(self):
        self._close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _error(self, what, off):
        raise FrameError("'%s': %s at byte offset %d" % (self.name, what, off))

    def _more(self, need):
        """Make need bytes available at _pos, in a new block that begins
        with the unread bytes of the last (a frame never straddles two);
        False at end of file."""
        have = self._end - self._pos
        if have >= need:
            return True
        if self._eof:
            return False
        if self._before_read is not None:
            self._before_read()
        new = self._block(max(self._chunk_size, need))
        new[:have] = self._buf[self._pos:self._end]
        end = have
        with memoryview(new) as mv:
            while end < need:
                n = self._read(mv[end:])
                if not n:
                    self._eof = True
                    break
                end += n
        self._base += self._pos
        self._buf, self._pos, self._end = new, 0, end
        return end >= need

    def _block(self, size):
        """A block to read into: one read before that nothing refers to
        any more (no view of it lives: reused, its pages warm), else a new
        one. The last block (its unread bytes are copied) is kept apart."""
        spare = self._spare
        for i in range(len(spare)):
            # references: the list and getrefcount's argument; a view (a
            # Seq's arrays, a tensor, a memoryview) adds its own
            if spare[i].shape[0] >= size and sys.getrefcount(spare[i]) <= 2:
                old = spare.pop(i)
                break
        else:
            old = np.empty(size, np.uint8)
        # eight by default: RankDataset's thread reads ahead of the blocks
        # in use (with four, 46 of 51 blocks were new pages there; with
        # eight, 13); it keeps twice its read-ahead and eight more (its
        # consumer takes what was read ahead at once while the thread reads
        # on: with its read-ahead and eight more, 115 of 210 were new)
        if self._buf.shape[0]:
            self._spare.append(self._buf)
            if len(self._spare) > self._nspare:
                del self._spare[0]
        return old

    def _header(self):
        if not self._more(16):
            self._error("empty stream" if self._end == 0 else
                        "truncated stream (inside the stream header)", 0)
        h = self._buf[:16].tobytes()
        if h[:8] != MAGIC:
            self._error("bad magic (not an overlord stream)", 0)
        if crc32c(h[:12]) != struct.unpack_from("<I", h, 12)[0]:
            self._error("bad CRC of the stream header", 0)
        major, minor = struct.unpack_from("<HH", h, 8)
        if major != MAJOR:
            self._error("unknown major version %d" % major, 0)
        self.minor = minor
        self._pos = 16

    def _spans(self):
        """The first half of reading: (block, start, stop, stream offset of
        start) for ranges of whole frames as they are read, the frame
        headers' bounds checked, up to the END frame. A thread can run it
        ahead of the second half (_scan), which checks each frame."""
        if self.minor is None:
            self._header()
        unpack, fmax = _HDR.unpack_from, self.frame_max
        while True:
            buf, s, end = self._buf, self._pos, self._end
            start, bad, last, need = s, None, False, 12
            while end - s >= 12:
                ln, kind, _, reserved, _ = unpack(buf, s)
                if ln % 4 or reserved or ln > fmax:
                    bad = "bad frame header" if ln <= fmax else \
                        "oversized frame (%d bytes, limit %d)" % (ln, fmax)
                    break
                if end - s < 12 + ln:
                    need = 12 + ln
                    break
                s += 12 + ln
                if kind == END:
                    last = True
                    break
            if s > start:
                self._pos = s
                yield buf, start, s, self._base + start
            if bad is not None:
                self._error(bad, self._base + s)
            if last:
                return
            if not self._more(need):
                off = self._base + self._pos
                if self._end - self._pos >= 12:
                    self._error("truncated stream (inside a frame)", off)
                if self._end > self._pos:
                    self._error("truncated stream (inside a frame header)", off)
                self._error("truncated stream (end of file without END)", off)

    def _scan(self, spans=None, walk=False):
        """(kind, flags, buffer, payload offset, payload length, stream
        offset) of every frame of spans (by default this reader's _spans),
        checked, up to END included. The hot loop of every reader. With
        walk (and the C library), runs of SEQ frames without images and
        STEP frames are checked and described in C: (RUN, rows, buffer,
        buffer address, 0, stream offset), the rows in self._rows[:rows]
        (_fast.c's ovl_py_walk); any other frame (and one the walk finds
        at fault: the messages are this loop's) comes frame by frame."""
        if spans is None:
            spans = self._spans()
        check, crc_at, unpack = self.check_crc, _crc.crc32c_at, _HDR.unpack_from
        known = KIND_NAMES
        seen_meta = self.meta is not None
        wfn = _crc.walk_at.get("walk") if walk else None
        if wfn is not None and self._rows is None:
            self._rows = np.empty((1024, ROW_WORDS), np.uint64)
            self._res = np.zeros(3, np.uint64)
            self._raddr = self._rows.ctypes.data
        if wfn is not None:
            res, raddr, cap = self._res, self._raddr, self._rows.shape[0]
            resaddr = res.ctypes.data
        for buf, s, stop, base in spans:
            base -= s
            addr = buf.ctypes.data if (check and crc_at is not None) or \
                wfn is not None else 0
            while s < stop:
                if wfn is not None and seen_meta and not self._due:
                    wfn(addr, s, stop, check, raddr, cap, resaddr)
                    s2, why, n = res.tolist()
                    if n:
                        self.count += n
                        yield RUN, n, buf, addr, 0, base + s
                    s = s2
                    if why != _W_OTHER:
                        continue
                ln, kind, flags, reserved, crc = unpack(buf, s)
                if check:
                    if crc_at is not None:
                        a = addr + s
                        got = crc_at(crc_at(0, a, 8), a + 12, ln)
                    else:
                        got = crc32c(buf[s + 12:s + 12 + ln], crc32c(buf[s:s + 8]))
                    if got != crc:
                        self._error("bad CRC", base + s)
                p = s + 12
                s = p + ln
                if (kind == SEQ or kind == STEP) and seen_meta:   # the most frequent
                    self.count += 1
                    yield kind, flags, buf, p, ln, base + p - 12
                    continue
                off = base + p - 12
                if kind not in known:
                    if self.minor > MINOR:
                        self.count += 1
                        self.skipped += 1
                        continue
                    self._error("unknown frame kind %d (stream version %d.%d)"
                                % (kind, MAJOR, self.minor), off)
                if kind == META:
                    if self.meta is not None:
                        self._error("a second META", off)
                    tl = struct.unpack_from("<I", buf, p)[0]
                    text = buf[p + 8:p + 8 + min(tl, ln - 8)].tobytes().decode(
                        "utf-8", "replace")
                    self.meta = {}
                    for line in text.splitlines():
                        k, _, v = line.partition(" ")
                        self.meta.setdefault(k, []).append(v)
                    seen_meta = True
                elif self.meta is None:
                    self._error("the stream does not begin with META (%s first)"
                                % KIND_NAMES[kind], off)
                if kind == END:
                    if ln != _END_LEN:
                        self._error("malformed payload: END frame of %d bytes"
                                    % ln, off)
                    n = struct.unpack_from("<Q", buf, p)[0]
                    if n != self.count:
                        self._error("malformed payload: END frame count does not "
                                    "match the frames read", off)
                    yield kind, flags, buf, p, ln, off
                    return
                self.count += 1
                yield kind, flags, buf, p, ln, off

    def __iter__(self):
        for kind, flags, buf, p, ln, off in self._scan():
            with memoryview(buf) as mv:
                payload = mv[p:p + ln].toreadonly()
            yield Frame(kind, flags, payload, off)


def read(src, **kw):
    """The items of a stream a trainer cares about, in order: Seq for every
    SEQ frame (with its images: Image for each IMAGE frame after it),
    StepEnd for every STEP frame and Barrier for every BARRIER.
    Other frames (META, STATE, END) are checked and passed over."""
    with Reader(src, **kw) as r:
        yield from _items(r, r._scan(walk=True))


def _items(r, frames, runs=False):
    """read's items of frames (Reader._scan's) of the reader r. A SEQ whose
    pieces announce images comes once they are read, in its ``images``.
    The C walk's runs come as Run items (runs true), or as the Seq and
    StepEnd items of their frames."""
    seq_size = _SEQ.size
    held, due = None, 0
    for kind, flags, buf, p, ln, off in frames:
        if kind == RUN:
            rows = r._rows[:flags]
            if runs:
                yield Run(buf, p, rows, r._raddr)
                continue
            for row in rows.tolist():
                if row[2] == SEQ:
                    yield Seq(buf, row[1], row[3])
                else:
                    q = row[1]
                    yield StepEnd(buf[q:q + 16].tobytes())
            continue
        if due:
            if kind != IMAGE:
                r._error("%s frame where %d more IMAGE frames of the SEQ "
                         "before were due" % (KIND_NAMES.get(kind, kind), due),
                         off)
            try:
                im = Image(buf[p:p + ln])
            except (ValueError, struct.error):
                r._error("malformed IMAGE frame", off)
            if (im.step, im.rank, im.mb) != (held.step, held.rank, held.mb):
                r._error("IMAGE of step %d rank %d micro-batch %d after the "
                         "SEQ of step %d rank %d micro-batch %d" % (
                             im.step, im.rank, im.mb, held.step, held.rank,
                             held.mb), off)
            held.images.append(im)
            due -= 1
            r._due = due
            if not due:
                yield held
                held = None
            continue
        if kind == SEQ:
            if ln < seq_size:
                r._error("malformed SEQ frame", off)
            ntok, npieces = _SEQ_COUNTS.unpack_from(buf, p + 16)
            if flags & ~(FL_U16 | FL_POS16 | FL_NOPOS) or (
                    flags & FL_POS16 and flags & FL_NOPOS):
                r._error("malformed SEQ frame (unknown flags 0x%x)" % flags, off)
            if _seq_layout(ntok, npieces, flags)[4] + 40 * npieces > ln:
                r._error("malformed SEQ frame (its arrays pass its end)", off)
            if not _cu_ok(buf, p, ntok, npieces, flags):
                r._error("malformed SEQ frame (cu_seqlens not from 0 up to at "
                         "most its %d tokens)" % ntok, off)
            s = Seq(buf, p, flags)
            due = s.images_due()
            if due:
                held = s
                r._due = due
                continue
            yield s
        elif kind == IMAGE:
            r._error("an IMAGE frame that no SEQ before it announced", off)
        elif kind == STEP:
            if ln != _STEP_LEN:
                r._error("malformed STEP frame (%d bytes)" % ln, off)
            yield StepEnd(buf[p:p + ln].tobytes())
        elif kind == BARRIER:
            if ln != _BARRIER_LEN:
                r._error("malformed BARRIER frame (%d bytes)" % ln, off)
            yield Barrier(buf[p:p + ln].tobytes())


def steps(src, **kw):
    """One rank's stream step by step: (step, [Seq, ...]) once the step's
    STEP frame arrived, so a live rank trains on whole steps only; an empty
    step gives an empty list."""
    return _steps(read(src, **kw))


def _steps(items):
    pending = []
    for item in items:
        if isinstance(item, Seq):
            pending.append((item.step, item.rank, item))
        elif isinstance(item, StepEnd):
            yield item.step, _take_step(pending, item.step, item.rank, item.seqs)
    _no_pending(pending)


def _take_step(pending, st, rk, seqs):
    """The sequences of step st of rank rk, taken out of pending, a list of
    (step, rank, sequence) in stream order; its STEP frame says seqs."""
    for e in pending:
        if e[0] != st or e[1] != rk:
            got = [e[2] for e in pending if e[0] == st and e[1] == rk]
            pending[:] = [e for e in pending if not (e[0] == st and e[1] == rk)]
            break
    else:
        got = [e[2] for e in pending]       # a rank's own stream
        pending.clear()
    if len(got) != seqs:
        raise FrameError("step %d of rank %d: %d sequences, its STEP says %d"
                         % (st, rk, len(got), seqs))
    return got


def _no_pending(pending):
    if pending:
        raise FrameError("the stream ended inside step %d" % pending[0][0])
