"""CRC-32C (Castagnoli) as ovl-frame(5) uses it.

The fast path is the project's own C code (src/lib/crc32c.c, SSE4.2 when the
CPU has it) built as a small shared object, libovlcrc.so: found through the
OVL_CRC_LIB environment variable, or next to this file. Without it a table
implementation in Python gives the same values, slowly.
"""

import ctypes
import os
import warnings

_POLY = 0x82F63B78


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _table()


def _crc_py(crc, data):
    c = crc ^ 0xFFFFFFFF
    t = _TABLE
    for b in bytes(data):
        c = (c >> 8) ^ t[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("OVL_CRC_LIB"), os.path.join(here, "libovlcrc.so")):
        if path and os.path.exists(path):
            lib = ctypes.CDLL(path)
            fn = lib["ovl_crc32c"]
            fn.restype = ctypes.c_uint32
            fn.argtypes = (ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t)
            # the same function by address: no copy of the bytes; through
            # PyDLL, which keeps the GIL: a frame's CRC takes microseconds,
            # and a reading thread that let go of the GIL at every frame
            # would hand it to the consumer and back each time
            # (make bench BENCH_ARGS=python)
            at = ctypes.PyDLL(path)["ovl_crc32c"]
            at.restype = ctypes.c_uint32
            at.argtypes = (ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t)
            pos = {}
            for bits in (32, 64):
                try:
                    p = ctypes.PyDLL(path)["ovl_py_positions%d" % bits]
                except AttributeError:      # an older libovlcrc.so
                    continue
                p.restype = None
                p.argtypes = (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                              ctypes.c_uint32)
                pos[bits] = p
            walk = {}
            try:
                w = ctypes.PyDLL(path)["ovl_py_walk"]
                f = ctypes.PyDLL(path)["ovl_py_fill"]
            except AttributeError:          # an older libovlcrc.so
                w = f = None
            if w is not None:
                vp, u64 = ctypes.c_void_p, ctypes.c_uint64
                w.restype = f.restype = None
                w.argtypes = (vp, u64, u64, ctypes.c_int, vp, ctypes.c_uint32, vp)
                f.argtypes = (vp, vp, ctypes.c_uint32, ctypes.c_int, vp, vp, vp,
                              vp, ctypes.c_int64)
                walk = {"walk": w, "fill": f}
            return fn, at, pos, walk
    return None, None, {}, {}


_C, crc32c_at, positions_at, walk_at = _load()
if _C is None:
    warnings.warn("overlord: libovlcrc.so not found (OVL_CRC_LIB, or next to "
                  "overlord/_crc.py: pip install ./python builds it): CRC-32C "
                  "and the frame walk run in pure Python, about a thousand "
                  "times slower", RuntimeWarning, stacklevel=2)

#: walk_at["walk"](buf, start, stop, check_crc, rows, maxrows, res) and
#: walk_at["fill"](buf, rows, nrows, bits, ids, pos, labels, cu, ignore)
#: (addresses): a block's SEQ and STEP frames checked and described, and
#: the micro-batch arrays of its SEQs, in C (python/overlord/_fast.c);
#: empty without the C library (the reader then goes frame by frame, as
#: python/tests/test_walk.py and bench-python make it by emptying this).

#: positions_at[32 or 64](cu address, npieces, out address, ntok): a SEQ's
#: position ids from its cu_seqlens into uint32 or int64 (ovl-frame(5)
#: NOPOS), in C; empty without the C library.

#: crc32c_at(crc, address, n): the C function over n bytes at an address
#: (a numpy array's .ctypes.data), or None without the C library.

#: True when the C implementation is in use (the reader's speed needs it).
FAST = _C is not None


def crc32c(data, crc=0):
    """CRC-32C of data (bytes-like), continuing crc: crc32c(b, crc32c(a)) is
    the CRC of a + b.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    >>> crc32c(b"6789", crc32c(b"12345")) == crc32c(b"123456789")
    True
    """
    if _C is not None:
        b = bytes(data) if not isinstance(data, bytes) else data
        return _C(crc, b, len(b))
    return _crc_py(crc, data)
