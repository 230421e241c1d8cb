"""overlord.net: a trainer reads its rank's stream from an ovl-ckpt that
listens on TCP (-p 'tcp-listen::0,...'), through the run's handshake, and
gets the bytes a file output holds; a wrong secret or another run's id is
refused on both sides."""

import os
import subprocess
import threading
import time

import pytest

import overlord
from overlord import net


def wait_for(path, proc, timeout=60):
    t = time.monotonic() + timeout
    while not (os.path.exists(path) and os.path.getsize(path) > 0):
        assert proc.poll() is None, "the listener ended"
        assert time.monotonic() < t, "no %s" % path
        time.sleep(0.02)
    return int(open(path).read())


def _each_rank(read, ranks=(0, 1)):
    """read(r) for every rank at once, as a trainer's ranks read (ovl-ckpt
    writes every rank's stream as the steps come): {rank: result}; an
    error of any rank fails the test."""
    got, errors = {}, []

    def rank(r):
        try:
            got[r] = read(r)
        except Exception as e:      # reported below
            errors.append(e)
    threads = [threading.Thread(target=rank, args=(r,)) for r in ranks]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors, errors
    return got


@pytest.fixture()
def env(tmp_path, monkeypatch):
    secret = tmp_path / "secret"
    secret.write_bytes(os.urandom(24).hex().encode())
    secret.chmod(0o600)
    monkeypatch.setenv("OVL_SECRET_FILE", str(secret))
    monkeypatch.setenv("OVL_RUN_ID", "pytest-net")
    monkeypatch.delenv("OVL_SECRET", raising=False)
    return tmp_path


def test_a_rank_stream_over_tcp_equals_the_file(env, pipeline, tools):
    t, (plan, con) = env, pipeline
    plan = str(plan)
    ref = subprocess.run([tools("ovl-ckpt"), "--dir", str(t / "ref"), "-p", str(t / "ref" / "rank%d"),
                          plan], stdin=open(con, "rb"), check=True)
    ck = subprocess.Popen([tools("ovl-ckpt"), "--dir", str(t / "ck"), "-p",
                           "tcp-listen:127.0.0.1:0,port-file=%s" % (t / "port.%d"), plan],
                          stdin=open(con, "rb"), stderr=subprocess.PIPE)
    try:
        def rank(r):
            port = wait_for(str(t / ("port.%d" % r)), ck)
            return [s for s in overlord.read("tcp:127.0.0.1:%d" % port)
                    if isinstance(s, overlord.Seq)]
        got = _each_rank(rank)
        assert ck.wait(timeout=60) == 0, ck.stderr.read()
    finally:
        if ck.poll() is None:
            ck.kill()
    del ref
    for r in (0, 1):
        want = [s for s in overlord.read(str(t / "ref" / ("rank%d" % r)))
                if isinstance(s, overlord.Seq)]
        assert len(want) == len(got[r]) > 0
        for a, b in zip(want, got[r]):
            assert (a.step, a.rank, a.mb) == (b.step, b.rank, b.mb)
            assert bytes(a.tokens) == bytes(b.tokens)


def test_the_handshake_refuses_another_secret_and_another_run(env, pipeline, tools, monkeypatch):
    t, (plan, con) = env, pipeline
    plan = str(plan)
    ck = subprocess.Popen([tools("ovl-ckpt"), "--dir", str(t / "ck"), "-p",
                           "tcp-listen:127.0.0.1:0,port-file=%s" % (t / "port.%d"), plan],
                          stdin=open(con, "rb"), stderr=subprocess.PIPE)
    try:
        port = wait_for(str(t / "port.0"), ck)
        with pytest.raises(net.AuthError):
            net.connect("tcp:127.0.0.1:%d" % port, secret="another secret of enough bytes")
        with pytest.raises(net.AuthError):
            net.connect("tcp:127.0.0.1:%d" % port, run_id="another-run")
    finally:
        ck.kill()
        err = ck.stderr.read().decode()
    assert "refused" in err or "wrong" in err, err
    bad = t / "open-secret"
    bad.write_bytes(b"x" * 20)
    bad.chmod(0o644)
    with pytest.raises(net.AuthError, match="chmod 600"):
        net.load_secret(secret_file=str(bad))
    with pytest.raises(OSError, match="cannot connect"):
        net.connect("tcp:127.0.0.1:1", timeout=0.3)


def _read_all(s):
    b = bytearray()
    while True:
        c = s.recv(1 << 16)
        if not c:
            return bytes(b)
        b += c


def test_a_unix_socket_without_a_secret_goes_by_the_peers_credentials(
        tmp_path, pipeline, tools, monkeypatch):
    monkeypatch.delenv("OVL_SECRET_FILE", raising=False)
    monkeypatch.delenv("OVL_SECRET", raising=False)
    t, (plan, con) = tmp_path, pipeline
    plan = str(plan)
    subprocess.run([tools("ovl-ckpt"), "--dir", str(t / "ref"), "-p", str(t / "ref" / "rank%d"),
                    plan], stdin=open(con, "rb"), check=True)
    ck = subprocess.Popen([tools("ovl-ckpt"), "-v", "--dir", str(t / "ck"), "-p",
                           "unix-listen:%s" % (t / "r%d.sock"), plan],
                          stdin=open(con, "rb"), stderr=subprocess.PIPE)
    try:
        def rank(r):
            with net.connect("unix:%s" % (t / ("r%d.sock" % r))) as s:
                return _read_all(s)
        got = _each_rank(rank)
        assert ck.wait(timeout=60) == 0
        err = ck.stderr.read().decode()
    finally:
        if ck.poll() is None:
            ck.kill()
    assert "r1.sock: authenticated" in err, err
    for r in (0, 1):
        assert got[r] == (t / "ref" / ("rank%d" % r)).read_bytes()


def test_peer_credentials_and_a_secret_refuse_each_other(monkeypatch):
    import socket
    monkeypatch.delenv("OVL_SECRET_FILE", raising=False)
    monkeypatch.delenv("OVL_SECRET", raising=False)
    key = b"a secret of this test, 32 bytes."

    def both(wkey, rkey):
        """The handshake of a writer (listener) with wkey and a reader
        with rkey over a socket pair: each side's exception, or None."""
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out = {}

        def side(name, s, k, role, listener):
            try:
                net.handshake(s, k, role=role, listener=listener)
                out[name] = None
            except net.AuthError as e:
                out[name] = e
            finally:
                s.close()
        th = threading.Thread(target=side, args=("w", a, wkey, b"W", True))
        th.start()
        side("r", b, rkey, b"R", False)
        th.join(30)
        return out["w"], out["r"]

    assert both(None, None) == (None, None)
    assert both(key, key) == (None, None)
    w, r = both(key, None)
    assert "has no secret" in str(w), w
    assert "proves the run's secret and this side has none" in str(r), r
    w, r = both(None, key)
    assert "proves the run's secret and this side has none" in str(w), w
    assert "has no secret" in str(r), r
    # TCP always needs the secret; a UNIX socket takes none
    with pytest.raises(net.AuthError, match="no secret"):
        net.connect("tcp:127.0.0.1:1", timeout=0.3)
    assert net.load_secret(optional=True) is None


def test_a_listener_that_closes_before_its_greeting_is_not_a_refusal(tmp_path, monkeypatch):
    """A loader that stops accepts a connection and closes it without a
    word (its listening socket still open, the process ending): the
    reader tries again within its timeout, as the tools do, and a live
    reader ends with LoaderGone, never with a refusal of its secret."""
    import socket
    monkeypatch.setenv("OVL_SECRET", "a secret of this test, 32 bytes.")
    # the first open waits for a loader starting: not that long here
    monkeypatch.setattr(overlord.live, "FIRST_WAIT", 0.5)
    accepted, stop = [], threading.Event()

    def closer(ls):
        ls.settimeout(0.05)
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            c.close()
    for kind in ("tcp", "unix"):
        if kind == "tcp":
            ls = socket.create_server(("127.0.0.1", 0))
            ep = "tcp:127.0.0.1:%d" % ls.getsockname()[1]
        else:
            ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            ls.bind(str(tmp_path / "l.sock"))
            ls.listen()
            ep = "unix:%s" % (tmp_path / "l.sock")
        stop.clear()
        th = threading.Thread(target=closer, args=(ls,))
        th.start()
        try:
            del accepted[:]
            with pytest.raises(net.GreetingCut):
                net.connect(ep, timeout=0.5)
            assert len(accepted) >= 2, "connect tried once"
            assert not issubclass(net.GreetingCut, net.AuthError)
            with pytest.raises(overlord.LoaderGone, match=r"reconnect_timeout"):
                for _ in overlord.read(ep, reconnect_timeout=0.5):
                    pass
        finally:
            stop.set()
            th.join(10)
            ls.close()


def test_a_run_id_the_tools_would_refuse_is_refused_here_too(monkeypatch):
    import socket
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with pytest.raises(ValueError, match=r"a run id too long \(201 bytes; at most 200\)"):
            net.handshake(a, b"a secret of this test, 32 bytes.", run_id="x" * 201)
    finally:
        a.close()
        b.close()
