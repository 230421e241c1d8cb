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

from __future__ import annotations

import os
import socket
import struct
import sys

from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional, Union

import numpy as np

from numpy.typing import DTypeLike

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
SEQ_FLAGS_AT = _SEQ.size - 4            # a SEQ payload's flags word (a hybrid CP group)
_SEQ_COUNTS = struct.Struct("<II")      # ntokens npieces, at byte 16 of a SEQ
_BARRIER = struct.Struct("<QQQQI")      # n step mix_pos tokens offset
_STEP = struct.Struct("<QII")           # step rank seqs
_END_LEN, _STEP_LEN, _BARRIER_LEN = 16, 16, 40   # payloads, as frame.h
# flags format width height index ntokens doc_pos seq_pos step rank mb piece
# name_len offset length path_len data_len
_IMAGE = struct.Struct("<IIIIIIIIQIIIIQQII")
IMAGE_INLINE, IMAGE_REF = 1, 2
RUN = 0         # not a frame kind: a run of SEQ and STEP frames walked in C
NEWSTREAM = -1  # not a frame kind: a new stream began (a live reader's resync)
ROW_WORDS = 8   # a walked frame's row (_fast.c): step, payload offset, kind,
#                 frame flags, rank, micro-batch (STEP: seqs), ntokens, npieces
_W_OTHER = 1    # the walk stopped before a frame it leaves to Python
# the words of a walked frame's row (Run.rows), by name: see WalkRow
ROW_STEP, ROW_OFFSET, ROW_KIND, ROW_FLAGS, ROW_RANK, ROW_MB, ROW_NTOKENS, \
    ROW_NPIECES = range(ROW_WORDS)
ROW_SEQS = ROW_MB   # a STEP frame's row: its seqs in the micro-batch word
IMAGE_FORMATS = {1: "png", 2: "jpeg", 3: "webp"}

#: What a Reader reads: a path or endpoint string, or an object with
#: ``read`` or ``recv_into`` (a file, a socket).
Source = Union[str, "os.PathLike[str]", Any]
#: A buffer of frame bytes (a block read, a payload).
Buffer = Union[bytes, bytearray, memoryview, np.ndarray]
#: What read and items give (see read).
Item = Union["Seq", "StepEnd", "Barrier", "NewStream", "Run"]


class FrameError(Exception):
    """A stream that is not a sound ovl-frame(5) stream. Its message names
    the stream and the byte offset, as the tools' exit-3 messages do."""


class Frame:
    """One frame: kind, flags, payload (a read-only memoryview of the bytes
    read, no copy) and its byte offset."""

    __slots__ = ("kind", "flags", "payload", "offset")

    def __init__(self, kind: int, flags: int, payload: memoryview,
                 offset: int) -> None:
        self.kind, self.flags, self.payload, self.offset = kind, flags, payload, offset

    @property
    def name(self) -> str:
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


class WalkRow(NamedTuple):
    """One row of a Run (a frame the C walk took), ROW_WORDS uint64 words
    in this order (their indexes are ROW_STEP ... ROW_NPIECES): the step;
    the payload's offset in the run's block; the frame kind (SEQ or STEP);
    the frame header's flags; the rank; the micro-batch (a STEP: its seqs,
    ROW_SEQS); a SEQ's ntokens and npieces (0 for a STEP).
    ``WalkRow(*run.rows[i].tolist())`` names one; hot loops index the
    words by the ROW_ constants.

    >>> row = WalkRow(3, 64, SEQ, 0, 1, 0, 4096, 2)
    >>> row.step, row.rank, row[ROW_NTOKENS]
    (3, 1, 4096)
    """

    step: int
    offset: int
    kind: int
    flags: int
    rank: int
    mb: int
    ntokens: int
    npieces: int


class Run:
    """SEQ and STEP frames the C walk took (``RankDataset``'s fast path):
    the block they are in (buf, and its address) and their rows (a view
    of the reader's row array, ROW_WORDS uint64 words each, at raddr:
    valid until the reader goes on)."""

    __slots__ = ("buf", "addr", "rows", "raddr")

    def __init__(self, buf: np.ndarray, addr: int, rows: np.ndarray,
                 raddr: int) -> None:
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

    def __init__(self, payload: Buffer, offset: int = 0,
                 fflags: int = 0) -> None:
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
    def positions(self) -> np.ndarray:
        """The position ids: a view of the bytes read, or (NOPOS) computed
        from cu_seqlens at first use (uint32)."""
        if self._pos is None:
            self._pos = _positions(self.cu_seqlens, len(self.tokens))
        return self._pos

    def positions_as(self, dtype: DTypeLike) -> np.ndarray:
        """The position ids as dtype (np.int64: what a model takes), in one
        pass when the SEQ sent none."""
        if self._pos is None and dtype == np.int64:
            return _positions(self.cu_seqlens, len(self.tokens), np.int64)
        return self.positions.astype(dtype)

    def images_due(self) -> int:
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

    def read(self) -> bytes:
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

    def pil(self) -> Any:
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


class NewStream:
    """A live reader's stream began again (its writer was restarted): the
    byte offset of the new stream header in what was read, and what broke
    the old stream. The positions the reader already gave are dropped from
    the new stream, and a new stream that begins after the position the
    reader needs next is a FrameError: nothing is skipped silently."""

    __slots__ = ("offset", "cause")

    def __init__(self, offset, cause):
        self.offset, self.cause = offset, cause

    def __repr__(self):
        return "NewStream(offset=%d, cause=%r)" % (self.offset, self.cause)


def _source(src, next_step=None, reconnect_timeout=None, stop=None):
    """(read_into(buf) -> n, name, close, live) for a path, an fd, a file
    object, a socket, or an endpoint "tcp:HOST:PORT" or "unix:PATH"
    (overlord.net.connect: the handshake with the run's secret and id from
    OVL_SECRET_FILE or OVL_SECRET and OVL_RUN_ID, then the announcement of
    next_step when given: an int, or a function giving it). With
    reconnect_timeout (seconds), a FIFO's path or an endpoint is read
    through overlord.live.LiveSource (live true): it opens the stream
    again when it breaks."""
    if reconnect_timeout is not None:
        from . import live
        if live.can_reconnect(src):
            ns = next_step if callable(next_step) or next_step is None \
                else (lambda: next_step)
            ls = live.LiveSource(src, reconnect_timeout, stop, ns)
            return ls.readinto, ls.name, ls.close, ls
    if callable(next_step):
        next_step = next_step()
    return _source_plain(src, next_step) + (None,)


def _source_plain(src, next_step):
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


def _frame_crc_ok(buf, f):
    """True when the CRC of the whole frame at f of buf holds."""
    ln, _, _, _, crc = _HDR.unpack_from(buf, f)
    return crc32c(buf[f + 12:f + 12 + ln], crc32c(buf[f:f + 8])) == crc


def _memmem():
    import ctypes
    try:
        fn = ctypes.PyDLL(None).memmem
    except (AttributeError, OSError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
    return fn


_MEMMEM = _memmem()


def _find(buf, needle, pos, end):
    """The index of needle in buf[pos:end] (a numpy uint8 array), or -1."""
    if end - pos < len(needle):
        return -1
    if _MEMMEM is not None:
        a = buf.ctypes.data
        got = _MEMMEM(a + pos, end - pos, needle, len(needle))
        return -1 if got is None else got - a
    i = buf[pos:end].tobytes().find(needle)
    return -1 if i < 0 else pos + i


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

    With ``reconnect_timeout`` (seconds), a FIFO's path or an endpoint is
    read across its writer's restarts (overlord.live.LiveSource): the
    stream is opened again when it breaks, the restarted writer's new
    stream is found where it begins (a stream header and a META whose
    CRCs hold, at a frame boundary or after a frame cut short), and read's
    items give a NewStream there and none of the positions given before
    it; ``LoaderGone`` past the timeout. ``stop``, a threading.Event, makes
    such a reader let go of the stream (within 0.2 s).

    The bytes are read in blocks of ``chunk`` bytes (more for a larger
    frame) into numpy buffers, and frames are handed out as views of them:
    a block lives as long as a view of it does, and is read into again
    (one of the last ``spare`` blocks) once none does.
    """

    def __init__(self, src: Source, check_crc: bool = True,
                 frame_max: int = FRAME_MAX_DEFAULT, chunk: int = 4 << 20,
                 next_step: Optional[int] = None,
                 before_read: Optional[Callable[[], None]] = None,
                 spare: int = 8, reconnect_timeout: Optional[float] = None,
                 stop: Optional[Callable[[], bool]] = None) -> None:
        self._read, self.name, self._close, self._live = _source(
            src, next_step, reconnect_timeout, stop)
        self._fault = None       # a live stream's bad frame, while resyncing
        self._searched = 0       # stream offset: no new stream begins before
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

    def close(self) -> None:
        self._close()

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _error(self, what, off):
        raise FrameError("'%s': %s at byte offset %d" % (self.name, what, off))

    def _more(self, need, least=None):
        """Make need bytes available at _pos, in a new block that begins
        with the unread bytes of the last (a frame never straddles two);
        False at end of file. With least, return once least bytes are
        there (a live stream: the bytes read so far are looked at for a
        new stream header), reading on at the end of the block when the
        need bytes fit there."""
        have = self._end - self._pos
        if have >= need:
            return True
        if self._eof:
            return False
        if self._before_read is not None:
            self._before_read()
        if least is not None and self._buf.shape[0] - self._pos >= need:
            # appended: the views handed out end before _pos
            with memoryview(self._buf) as mv:
                n = self._read(mv[self._end:])
            if not n:
                self._eof = True
            self._end += n
            return self._end - self._pos >= least
        new = self._block(max(self._chunk_size, need))
        new[:have] = self._buf[self._pos:self._end]
        end = have
        least = need if least is None else least
        with memoryview(new) as mv:
            while end < least:
                n = self._read(mv[end:])
                if not n:
                    self._eof = True
                    break
                end += n
        self._base += self._pos
        self._buf, self._pos, self._end = new, 0, end
        return end >= least

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
        # in use, so enough blocks are kept for them to be reused rather
        # than new pages; it keeps twice its read-ahead and eight more (its
        # consumer takes what was read ahead at once while the thread reads
        # on)
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

    def spans(self) -> Iterator[tuple]:
        """The first half of reading, public: (block, start, stop, stream
        offset of start) for each range of whole frames read (a live
        reader's new stream: (None, its offset, what broke the old one,
        its minor version)); a thread may run it ahead of scan."""
        return self._spans()

    def scan(self, spans: Optional[Iterable[tuple]] = None,
             walk: bool = False) -> Iterator[tuple]:
        """The second half of reading, public: (kind, flags, buffer,
        payload offset, payload length, stream offset) of every frame of
        spans (by default this reader's own), checked, up to END; with
        walk, runs of SEQ and STEP frames walked in C as (RUN, rows, ...)
        (see Run, WalkRow). items() makes them into read's items."""
        return self._scan(spans, walk)

    def _frames(self, buf, s, end):
        """Walk the frame headers of buf from s up to end: (the end of the
        whole frames, what is wrong with the next header or None, True when
        the last whole frame is END, the bytes the next frame needs)."""
        unpack, fmax = _HDR.unpack_from, self.frame_max
        while end - s >= 12:
            ln, kind, _, reserved, _ = unpack(buf, s)
            if ln % 4 or reserved or ln > fmax:
                return s, ("bad frame header" if ln <= fmax else
                           "oversized frame (%d bytes, limit %d)" % (ln, fmax)), \
                    False, 12
            if end - s < 12 + ln:
                return s, None, False, 12 + ln
            s += 12 + ln
            if kind == END:
                return s, None, True, 12
        return s, None, False, 12

    def _spans(self):
        """The first half of reading: (block, start, stop, stream offset of
        start) for ranges of whole frames as they are read, the frame
        headers' bounds checked, up to the END frame. A thread can run it
        ahead of the second half (_scan), which checks each frame. A live
        stream's (LiveSource) are _spans_live's."""
        if self.minor is None:
            self._header()
        if self._live is not None:
            yield from self._spans_live()
            return
        while True:
            buf, start, end = self._buf, self._pos, self._end
            s, bad, last, need = self._frames(buf, start, end)
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

    def _spans_live(self):
        """_spans of a stream whose writer may be restarted: the bytes of a
        new stream follow the old one's (LiveSource), at a frame boundary
        or after a frame cut short. A stream header whose CRC holds,
        followed by a META frame whose CRC holds, where a frame was
        expected or inside a frame whose CRC fails or that is not whole
        yet, begins a new stream: (None, its stream offset, what broke the
        old one, its minor version) comes between the spans, and the new
        stream's frames follow. After a bad frame header the bytes are
        passed over until such a new stream begins."""
        ls, seen = self._live, self._live.breaks
        while True:
            buf, start, end = self._buf, self._pos, self._end
            s, bad, last, need = self._frames(buf, start, end)
            cut = self._restart_in(buf, start, s, end)
            if cut is None:
                if s > start:
                    self._pos = s
                    yield buf, start, s, self._base + start
                if last:
                    return
                if bad is not None:
                    if self._fault is None:
                        self._fault = "%s at byte offset %d" % (bad, self._base + s)
                    # nothing before the searched mark begins a stream
                    self._pos = min(max(s, self._searched - self._base), end)
                    need = self._end - self._pos + 1
            else:
                f, m, more = cut
                if f > start:
                    self._pos = f
                    yield buf, start, f, self._base + start
                if not more:
                    off = self._base + m
                    if ls.breaks > seen:
                        why = ls.cause
                    elif self._fault is not None:
                        why = self._fault
                    elif m == f:
                        why = "a stream header where a frame was expected " \
                              "at byte offset %d" % off
                    else:
                        why = "a frame cut short at byte offset %d" % (self._base + f)
                    seen, self._fault = ls.breaks, None
                    self._pos = m + 16
                    self._searched = off + 16
                    yield None, off, why, struct.unpack_from("<H", buf, m + 10)[0]
                    continue
                need = m - f + more
            try:
                if self._more(need, self._end - self._pos + 1):
                    continue
            except FrameError as e:
                if self._fault is None:
                    raise
                raise type(e)("%s (before that: %s)" % (e, self._fault)) from None
            self._error("closed while reading", self._base + self._end)

    def _restart_in(self, buf, start, stop, end):
        """Where a new stream begins in buf[start:end], whose whole frames
        end at stop: None, or (the start of the frame it cuts, or stop;
        the stream header's index; 0, or the bytes from the header it
        needs to tell)."""
        base = self._base
        pos = max(start, self._searched - base)
        while True:
            m = _find(buf, MAGIC, pos, end)
            if m < 0:
                self._searched = base + max(pos, end - len(MAGIC) + 1)
                return None
            f = start
            while f < stop:
                ln = _HDR.unpack_from(buf, f)[0]
                if f + 12 + ln > m:
                    break
                f += 12 + ln
            if f < stop and _frame_crc_ok(buf, f):
                pos = m + 1         # a whole frame whose CRC holds: its bytes
                self._searched = base + pos
                continue
            more = self._stream_at(buf, m, end)
            if more < 0:
                pos = m + 1
                self._searched = base + pos
                continue
            return f, m, more

    def _stream_at(self, buf, m, end):
        """0 when a stream header whose CRC holds is at m of buf, followed
        by a META frame whose CRC holds; the bytes from m needed to tell
        when end comes before; -1 when not."""
        if end - m < 16:
            return 16
        if crc32c(buf[m:m + 12]) != struct.unpack_from("<I", buf, m + 12)[0] or \
                struct.unpack_from("<H", buf, m + 8)[0] != MAJOR:
            return -1
        if end - m < 28:
            return 28
        ln, kind, _, reserved, _ = _HDR.unpack_from(buf, m + 16)
        if kind != META or ln % 4 or reserved or ln > self.frame_max:
            return -1
        if end - m < 28 + ln:
            return 28 + ln
        return 0 if _frame_crc_ok(buf, m + 16) else -1

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
            if buf is None:     # a new stream (_spans_live): s its offset
                self.meta, self.minor, self.count, self._due = None, base, 0, 0
                seen_meta = False
                yield NEWSTREAM, 0, stop, s, 0, s
                continue
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

    def __iter__(self) -> Iterator[Frame]:
        for kind, flags, buf, p, ln, off in self._scan():
            with memoryview(buf) as mv:
                payload = mv[p:p + ln].toreadonly()
            yield Frame(kind, flags, payload, off)


def read(src: Source, **kw: Any) -> Iterator[Item]:
    """The items of a stream a trainer cares about, in order: Seq for every
    SEQ frame (with its images: Image for each IMAGE frame after it),
    StepEnd for every STEP frame and Barrier for every BARRIER.
    Other frames (META, STATE, END) are checked and passed over. The
    keywords are Reader's (with reconnect_timeout: a NewStream where a
    restarted writer's stream begins, the positions given before dropped)."""
    with Reader(src, **kw) as r:
        ns = kw.get("next_step")
        yield from _items(r, r._scan(walk=True),
                          next_step=ns if isinstance(ns, int) else None)


def _items(r, frames, runs=False, next_step=None):
    """read's items of frames (Reader._scan's) of the reader r; a live
    reader's without the positions it gave before a new stream (_fresh:
    next_step, when given, is the step the reader needed first)."""
    if r._live is None:
        return _items_of(r, frames, runs)
    return _fresh(r, _items_of(r, frames, runs), next_step)


def _key(item):
    """The position of an item in a rank's stream, in stream order."""
    t = type(item)
    if t is Seq:
        return item.step, 1, item.mb
    if t is StepEnd:
        return item.step, 2, 0
    return item.step, 0, item.n


def _row_key(row):
    """_key of a walked frame's row (ROW_WORDS)."""
    return (row[0], 1, row[5]) if row[2] == SEQ else (row[0], 2, 0)


def _fresh(r, items, next_step):
    """The items of a live reader, but those of a new stream whose
    positions it gave already (a SEQ by step and micro-batch, with its
    images, a STEP by step, a BARRIER by number): the new stream of a
    restarted writer repeats the steps since its checkpoint. A new stream
    that begins after the position needed next is a FrameError naming
    the gap."""
    last = (next_step - 1, 2, 0) if next_step else None
    catching = None     # the NewStream whose repeats are being dropped
    for it in items:
        t = type(it)
        if t is Run:
            if catching is not None:
                lst = it.rows.tolist()
                k = 0
                while k < len(lst) and _row_key(lst[k]) <= last:
                    k += 1
                if k == len(lst):
                    continue
                _gap(r, catching, _row_key(lst[k]), last)
                catching = None
                if k:
                    it = Run(it.buf, it.addr, it.rows[k:],
                             it.raddr + k * 8 * ROW_WORDS)
            last = _row_key(it.rows[-1].tolist())
        elif t is NewStream:
            catching = it if last is not None else None
        elif t is Seq or t is StepEnd or t is Barrier:
            key = _key(it)
            if catching is not None:
                if key <= last:
                    continue
                _gap(r, catching, key, last)
                catching = None
            last = key
        yield it


def _gap(r, ns, key, last):
    """Raise when key, the first new position of the new stream ns, is
    not the one after last."""
    need = last[0] + (last[1] == 2)
    mb = last[2] + 1 if last[1] == 1 else 0
    if key[0] > need:
        what = "step %d" % need if key[0] == need + 1 else \
            "steps %d to %d" % (need, key[0] - 1)
    elif key[0] == need and key[1] == 1 and key[2] > mb:
        what = "micro-batches %d to %d of step %d" % (mb, key[2] - 1, need)
    else:
        return
    raise FrameError("'%s': the writer's new stream (after %s) goes on at step "
                     "%d, the reader needs step %d next: %s would be missing"
                     % (r.name, ns.cause, key[0], need, what))


def _items_of(r, frames, runs=False):
    """read's items of frames (Reader._scan's) of the reader r. A SEQ whose
    pieces announce images comes once they are read, in its ``images``.
    The C walk's runs come as Run items (runs true), or as the Seq and
    StepEnd items of their frames; a new stream (a live reader's) as a
    NewStream item."""
    seq_size = _SEQ.size
    held, due = None, 0
    for kind, flags, buf, p, ln, off in frames:
        if kind == NEWSTREAM:
            held, due = None, 0
            yield NewStream(off, buf)
            continue
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


def steps(src: Source, **kw: Any) -> Iterator[tuple[int, list]]:
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


def items(reader: Reader, scanned: Iterable[tuple], runs: bool = False,
          next_step: Optional[int] = None) -> Iterator[Item]:
    """read's items of the frames scanned (reader.scan's) of reader: Seq,
    StepEnd, Barrier, NewStream, and with runs Run items for the C walk's
    runs (their rows: WalkRow) instead of their Seq and StepEnd items.
    next_step: the step a live reader needed first (for its gap check)."""
    return _items(reader, scanned, runs, next_step)


def take_step(pending: list, step: int, rank: int, seqs: int) -> list:
    """The items of step of rank taken out of pending, a list of (step,
    rank, item) in stream order; FrameError unless they are seqs, as the
    step's STEP frame says."""
    return _take_step(pending, step, rank, seqs)


def check_no_pending(pending: list) -> None:
    """FrameError when pending (see take_step) still holds a step's items
    at the end of the stream."""
    _no_pending(pending)


def walk_fill() -> Optional[Callable[..., None]]:
    """The C function that fills a Run's SEQ rows into micro-batch arrays
    (ovl_py_fill of libovlcrc.so, see overlord/_fast.c), or None without
    the C library: then read(..., runs=False) gives Seq items to make them
    from in Python."""
    return _crc.walk_at.get("fill")
