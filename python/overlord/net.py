"""Streams over sockets for the trainer's side: ``connect("tcp:HOST:PORT")``
or ``connect("unix:PATH")`` opens a socket to a stage that listens with
``tcp-listen:`` or ``unix-listen:`` (an ovl-ckpt per-rank output
``-p 'tcp-listen::7100+%d'``), passes the handshake of ovl-frame(5) as the
reading side, and returns the socket, ready for ``overlord.read`` (which
also takes the endpoint string itself).

The resume announcement: with ``next_step=S`` the reader then sends
``OVLNEXT\n`` and S (8 bytes, little-endian), the step it needs next. An
ovl-ckpt started with ``--step-from-readers`` (``ovl-run --resume-step
from-readers``) waits for every rank's announcement, restores the last
checkpoint at or before S and starts the stream at step S; any other
writer ignores it.

The handshake, as src/lib/net-auth.c does it: each side sends a hello
(``OVLAUTH\\n``, version 1, role ``R`` or ``W``, the run id's length, 0, a
32-byte random nonce, the run id), checks the other's (magic, version, the
other role, the same run id), then sends its proof, HMAC-SHA256 under the
run's secret of ``"overlord stream proof "``, ``L`` (the listener) or
``C`` (the connecting side), the listener's hello and the connecting
side's hello, and checks the other's. The secret comes from the file
``OVL_SECRET_FILE`` names (readable by its owner only) or ``OVL_SECRET``;
the run id from ``OVL_RUN_ID`` (default empty), as for the tools.

Over a UNIX socket (mode 0600: its owner's) a reader without a secret
goes by the peer's credentials instead: the writer must be of this user
or root (SO_PEERCRED), and each side sends ``OVLPEER\\n`` and takes the
same 8 bytes from the other. A side with a secret and one without refuse
each other, each saying why. TCP always needs the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import stat
import struct
import time

from typing import Optional

MAGIC = b"OVLAUTH\n"
VERSION = 1
NONCE = 32
FIXED = 12 + NONCE
LABEL = b"overlord stream proof "
NEXT = b"OVLNEXT\n"
PEER = b"OVLPEER\n"
RUNID_MAX = 200     # bytes, as the tools take (src/lib/net-int.h)


class AuthError(OSError):
    """The peer was refused (or refused us): not an overlord stage of this
    run with this secret."""


class GreetingCut(ConnectionResetError):
    """The peer closed the connection before a byte of its greeting: a
    loader stopping, or one that refuses this side's user (the listener
    closes without a word then). Not a verdict on this side's secret:
    connect() tries again within its timeout, as the tools do."""


def load_secret(secret: Optional[bytes | str] = None,
                secret_file: Optional[str] = None,
                optional: bool = False) -> Optional[bytes]:
    """The run's secret, as the tools take it: an explicit value, else the
    file (readable by its owner only), else OVL_SECRET. Without any: None
    when optional (a UNIX socket: the peer's credentials), else AuthError."""
    if secret is not None:
        s = secret.encode() if isinstance(secret, str) else bytes(secret)
    else:
        path = secret_file or os.environ.get("OVL_SECRET_FILE")
        if path:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                raise AuthError("secret file '%s' is not a regular file" % path)
            if st.st_mode & 0o077:
                raise AuthError("secret file '%s' has mode %04o: it must be readable "
                                "by its owner only (chmod 600)" % (path, st.st_mode & 0o7777))
            with open(path, "rb") as f:
                s = f.read(4104)
        elif os.environ.get("OVL_SECRET"):
            s = os.environ["OVL_SECRET"].encode()
        elif optional:
            return None
        else:
            raise AuthError("no secret: set OVL_SECRET_FILE or OVL_SECRET")
    if s.endswith(b"\n"):
        s = s[:-1]
    if s.endswith(b"\r"):
        s = s[:-1]
    if not 16 <= len(s) <= 4096:
        raise AuthError("the secret has %d bytes: it needs 16 to 4096" % len(s))
    return s


def is_endpoint(src: object) -> bool:
    """True for "tcp:HOST:PORT" and "unix:PATH" (what connect takes).

    >>> is_endpoint("tcp:trainer0:7000"), is_endpoint("out/rank0")
    (True, False)
    """
    return isinstance(src, str) and src.startswith(("tcp:", "unix:"))


def parse(endpoint: str) -> tuple[str, int] | str:
    """("HOST", PORT) of "tcp:HOST:PORT" (IPv6 as [ADDR]), or the path of
    "unix:PATH".

    >>> parse("tcp:[::1]:7000")
    ('::1', 7000)
    >>> parse("unix:run/rank0.sock")
    'run/rank0.sock'
    """
    if endpoint.startswith("unix:") and len(endpoint) > 5:
        return endpoint[5:]
    if not endpoint.startswith("tcp:"):
        raise ValueError("not a tcp:HOST:PORT or unix:PATH endpoint: %r" % endpoint)
    rest = endpoint[4:].split(",", 1)[0]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError("bad endpoint %r (tcp:HOST:PORT)" % endpoint)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _recv(s, n):
    b = bytearray()
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise ConnectionResetError("the connection closed")
        b += chunk
    return bytes(b)


def _proof(secret, who, listener_hello, connector_hello):
    return hmac.new(secret, LABEL + who + listener_hello + connector_hello,
                    hashlib.sha256).digest()


def _exchange_magic(s: socket.socket, mine: bytes, why: str = "") -> bytes:
    """Send this side's greeting, then read the first 8 bytes of the
    peer's (both greetings start with an 8-byte magic); a close before
    them is GreetingCut."""
    try:
        s.sendall(mine)
        return _recv(s, len(MAGIC))
    except (ConnectionResetError, BrokenPipeError):
        raise GreetingCut(("the peer closed the connection before its greeting "
                           + why).rstrip()) from None


def _peer_handshake(s: socket.socket) -> None:
    """The handshake without a secret, on a UNIX socket: the peer is of
    this user or root, and sends the same marker."""
    if s.family != socket.AF_UNIX:
        raise AuthError("no secret: set OVL_SECRET_FILE or OVL_SECRET")
    cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid = struct.unpack("3i", cred)[1]
    if uid not in (os.geteuid(), 0):
        raise AuthError("the peer is of uid %d, not this user's (%d), and there is "
                        "no secret" % (uid, os.geteuid()))
    got = _exchange_magic(s, PEER, "(it stopped, or refused this side's user)")
    if got == MAGIC:
        raise AuthError("the peer proves the run's secret and this side has none: "
                        "set OVL_SECRET_FILE or OVL_SECRET")
    if got != PEER:
        raise AuthError("not an overlord peer (no greeting)")


def handshake(s: socket.socket, secret: Optional[bytes],
              run_id: Optional[str] = None, role: bytes = b"R",
              listener: bool = False) -> None:
    """Pass the handshake on a connected socket; raises AuthError. Without
    a secret (None), over a UNIX socket only: by the peer's credentials."""
    if secret is None:
        _peer_handshake(s)
        return
    rid = (run_id if run_id is not None else os.environ.get("OVL_RUN_ID", "")).encode()
    if len(rid) > RUNID_MAX:
        raise ValueError("a run id too long (%d bytes; at most %d)" % (len(rid), RUNID_MAX))
    mine = MAGIC + struct.pack("<BcBB", VERSION, role, len(rid), 0) + os.urandom(NONCE) + rid
    head = _exchange_magic(s, mine)
    if head == PEER:
        raise AuthError("the peer has no secret (it goes by its user's credentials): "
                        "give it the run's secret too, or this side none")
    if head != MAGIC:
        raise AuthError("not an overlord peer (no greeting)")
    head += _recv(s, FIXED - len(MAGIC))
    version, prole, idlen, zero = struct.unpack_from("<BcBB", head, 8)
    if version != VERSION or prole not in (b"R", b"W") or zero != 0:
        raise AuthError("a greeting of another version (%d)" % version)
    theirs = head + _recv(s, idlen)
    if prole == role:
        raise AuthError("the peer %s the stream too" % ("reads" if role == b"R" else "writes"))
    if theirs[FIXED:] != rid:
        raise AuthError("the peer is of run %r, not %r" % (theirs[FIXED:].decode(errors="replace"),
                                                           rid.decode()))
    lh, ch = (mine, theirs) if listener else (theirs, mine)
    s.sendall(_proof(secret, b"L" if listener else b"C", lh, ch))
    try:
        got = _recv(s, 32)
    except ConnectionResetError:
        raise AuthError("the peer closed the connection (a wrong secret?)") from None
    if not hmac.compare_digest(got, _proof(secret, b"C" if listener else b"L", lh, ch)):
        raise AuthError("a wrong proof (another secret)")


def _open(addr, left):
    if isinstance(addr, str):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(left)
            s.connect(addr)
        except BaseException:
            s.close()
            raise
        return s
    return socket.create_connection(addr, timeout=left)


def announce(s: socket.socket, step: int) -> None:
    """Send the resume announcement: this reader needs step next."""
    if not 0 <= int(step) < 1 << 64:
        raise ValueError("step %r out of range" % (step,))
    s.sendall(NEXT + struct.pack("<Q", int(step)))


def connect(endpoint: str, secret: Optional[bytes | str] = None,
            secret_file: Optional[str] = None, run_id: Optional[str] = None,
            timeout: float = 60.0, keepalive: float = 10,
            next_step: Optional[int] = None) -> socket.socket:
    """A socket reading the stream at endpoint ("tcp:HOST:PORT" or
    "unix:PATH"), after the handshake (and the resume announcement of
    next_step, when given; without a secret, over a UNIX socket, the
    peer's credentials); connects with retries (50 ms to 1 s apart)
    within timeout seconds, as the tools do. The socket blocks
    (back-pressure) and, over TCP, has keepalive, so a dead writer is
    noticed within about keepalive seconds."""
    addr = parse(endpoint)
    # a UNIX socket without a secret: the peer's credentials
    key = load_secret(secret, secret_file, optional=isinstance(addr, str))
    deadline = time.monotonic() + timeout
    wait = 0.05
    while True:
        try:
            s = _open(addr, max(0.1, deadline - time.monotonic()))
        except OSError as e:
            if time.monotonic() + wait > deadline:
                raise OSError(e.errno, "%s: cannot connect within %g s: %s"
                              % (endpoint, timeout, e.strerror)) from None
        else:
            try:
                _greet(s, key, run_id, next_step, keepalive, deadline)
                return s
            except GreetingCut:
                s.close()
                if time.monotonic() + wait > deadline:
                    raise
            except BaseException:
                s.close()
                raise
        time.sleep(wait)
        wait = min(1.0, wait * 2)


def _greet(s, key, run_id, next_step, keepalive, deadline) -> None:
    """The handshake, the resume announcement and the socket's options."""
    s.settimeout(max(0.1, deadline - time.monotonic()))
    handshake(s, key, run_id, role=b"R", listener=False)
    if next_step is not None:
        announce(s, next_step)
    s.settimeout(None)
    if s.family == socket.AF_UNIX:
        return
    s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):
        idle = max(1, int(keepalive) // 2)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(1, idle // 2 or 1))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
