"""A per-rank stream that outlives its writer: the byte source of a
``Reader`` (and so of ``RankDataset``) over a FIFO or a socket endpoint
when reconnecting is on (``reconnect_timeout``).

When the stream breaks (end of file, a connection reset or closed; the
writing ovl-ckpt died) the source opens it again: a FIFO is reopened at
the same path (the new descriptor is opened before the old one is closed,
so a writer that already came back never sees its reader gone), an
endpoint is connected to again and passes the handshake, announcing the
step the reader needs next. The bytes of the new stream follow the old
one's in what ``readinto`` returns, as they do in a FIFO whose new writer
opened it before the reader saw end of file: the reader finds the new
stream header there (see ``overlord.frames.Reader``) and drops the
positions it already has.

The source raises ``LoaderGone`` when no writer came back within
``timeout`` seconds of the break (or of the first open), naming what broke
the stream. Every wait looks at ``stop`` (a ``threading.Event``) at least
every 0.2 s: once it is set, ``readinto`` returns 0 and the source lets go
of the stream.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import stat
import threading
import time
from typing import Callable, Optional

from .frames import FrameError

POLL_MS = 200
FIRST_WAIT = 60.0   # seconds the first open waits at least, as net.connect


class LoaderGone(FrameError):
    """The loader was gone longer than the reader's reconnect_timeout: the
    message names what broke the stream first."""


def is_fifo(src: object) -> bool:
    """True when src is the path of a FIFO."""
    if not isinstance(src, (str, bytes, os.PathLike)):
        return False
    if isinstance(src, str) and src.startswith(("tcp:", "unix:")):
        return False
    try:
        return stat.S_ISFIFO(os.stat(src).st_mode)
    except OSError:
        return False


def can_reconnect(src: object) -> bool:
    """True for a source LiveSource can open again: a FIFO's path or an
    endpoint ("unix:PATH", "tcp:HOST:PORT")."""
    if isinstance(src, str) and src.startswith(("tcp:", "unix:")):
        return True
    return is_fifo(src)


class LiveSource:
    """The bytes of a FIFO or an endpoint, across its writer's restarts.

    ``LiveSource(src, timeout, stop=None, next_step=None)``: src a FIFO's
    path or an endpoint; timeout the seconds a writer may be gone (0:
    raise at the first break; the first open waits at least FIRST_WAIT);
    next_step a function giving the step to announce when connecting to
    an endpoint (None: no announcement). ``breaks`` counts the breaks
    seen; ``cause`` names the last one."""

    def __init__(self, src, timeout: float,
                 stop: Optional[threading.Event] = None,
                 next_step: Optional[Callable[[], Optional[int]]] = None) -> None:
        self.src = src
        self.endpoint = isinstance(src, str) and src.startswith(("tcp:", "unix:"))
        self.name = src if self.endpoint else os.fsdecode(src)
        self.timeout = max(float(timeout), 0.0)
        self.stop = stop if stop is not None else threading.Event()
        self.next_step = next_step
        self.breaks = 0
        self.cause: Optional[str] = None
        self.offset = 0             # bytes returned so far
        self._fd: Optional[int] = None
        self._sock: Optional[socket.socket] = None
        self._lock = threading.Lock()
        self._busy = False          # a readinto is under way (it closes)
        self._broken = False        # a break since the last bytes read
        self._wait = True           # poll before the next read
        # the first open waits at least FIRST_WAIT (a loader starting)
        self._deadline: Optional[float] = time.monotonic() + max(self.timeout,
                                                                 FIRST_WAIT)
        self.cause = "no writer opened it" if not self.endpoint else "no listener"
        self._open()

    def _gone(self) -> LoaderGone:
        return LoaderGone("'%s': the loader was gone for more than %g s "
                          "(reconnect_timeout): %s" % (self.name, self.timeout, self.cause))

    def _open(self) -> bool:
        """Open the stream (again) before the deadline, else LoaderGone;
        False when stop was set meanwhile."""
        while not self.stop.is_set():
            try:
                if self.endpoint:
                    self._connect()
                else:
                    # the new descriptor first: the pipe never lacks a reader
                    fd = os.open(self.src, os.O_RDONLY | os.O_NONBLOCK)
                    with self._lock:
                        old, self._fd = self._fd, fd
                    if old is not None:
                        os.close(old)
                self._wait = True
                return True
            except OSError as e:
                from .net import AuthError
                if isinstance(e, AuthError):
                    raise
                if self.breaks == 0:
                    self.cause = "cannot open it: %s" % (e.strerror or e)
            if time.monotonic() > self._deadline:
                raise self._gone()
            self.stop.wait(0.05)
        return False

    def _connect(self) -> None:
        from . import net
        self._drop_socket()
        left = max(0.1, min(1.0, self._deadline - time.monotonic()))
        step = self.next_step() if self.next_step is not None else None
        s = net.connect(self.src, timeout=left, next_step=step)
        with self._lock:
            self._sock = s

    def _drop_socket(self) -> None:
        with self._lock:
            s, self._sock = self._sock, None
        if s is not None:
            s.close()

    def _broke(self, cause: str) -> None:
        self._broken = True
        self.breaks += 1
        self.cause = "%s at byte offset %d" % (cause, self.offset)
        self._deadline = time.monotonic() + self.timeout

    def readinto(self, mv) -> int:
        """Read into mv: the bytes that are there (at least one), after a
        reopen if the stream broke; 0 once stop is set."""
        with self._lock:
            self._busy = True
        try:
            return self._readinto(mv)
        finally:
            with self._lock:
                self._busy = False
            if self.stop.is_set():
                self._release()

    def _readinto(self, mv) -> int:
        while not self.stop.is_set():
            s = self._sock
            fd = s.fileno() if self.endpoint and s is not None else self._fd
            if fd is None or fd < 0:
                return 0
            if self._wait:     # a new descriptor: end of file until a writer
                if _wait_readable(fd) == 0:
                    if self._deadline is not None and \
                            time.monotonic() > self._deadline:
                        raise self._gone()
                    continue
                self._wait = False
            why = None
            try:
                n = s.recv_into(mv, 0, socket.MSG_DONTWAIT) if self.endpoint \
                    else os.readv(fd, [mv])
            except (BlockingIOError, InterruptedError):
                self._wait = True
                continue
            except OSError as e:
                if e.errno not in _BROKEN:
                    raise
                n, why = 0, e.strerror or str(e)
            if n > 0:
                self.offset += n
                self._deadline, self._broken = None, False
                return n
            if not self._broken:
                self._broke("end of file without END (the writer died)"
                            if why is None and not self.endpoint else
                            "the connection closed without END" if why is None
                            else "connection error (%s)" % why)
            if self.timeout <= 0:
                raise self._gone()
            if not self._open():
                return 0
        return 0

    def _release(self) -> None:
        with self._lock:
            if self._busy:
                return
            fd, self._fd = self._fd, None
            s, self._sock = self._sock, None
        if fd is not None:
            os.close(fd)
        if s is not None:
            s.close()

    def close(self) -> None:
        """Let go of the stream: at once when no read is under way, else
        by that read within 0.2 s (it returns 0)."""
        self.stop.set()
        self._release()


_BROKEN = (errno.ECONNRESET, errno.EPIPE, errno.ETIMEDOUT, errno.ECONNABORTED,
           errno.ENOTCONN)


def _wait_readable(fd: int) -> int:
    """poll's events on fd within POLL_MS (0: nothing yet)."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    got = p.poll(POLL_MS)
    return got[0][1] if got else 0
