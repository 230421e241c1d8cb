#!/usr/bin/env python3
"""fault-proxy: an HTTP proxy for tests that breaks requests on a schedule.

  fault-proxy.py --upstream PORT --port-file FILE --log FILE
                 [--schedule ACTION,ACTION,...] [--sigv4-secret SECRET]

Listens on 127.0.0.1 (a free port, written to FILE once it listens) and
relays each request to 127.0.0.1:PORT on a new connection (Connection:
close both ways). The n-th request (counting from 1, HEAD included) gets
the n-th ACTION of the schedule, then "pass" once it is used up:

  pass      relay the request and its answer
  reset     close the client's connection with a TCP reset, answering nothing
  503, 500, 429, 404
            answer that status with an empty body
  trunc:N   relay the answer, but only its first N body bytes, then close

With --sigv4-secret, every request must carry an AWS Signature Version 4
Authorization header that this script checks itself (an implementation
independent of curl's): a wrong one gets 403 SignatureDoesNotMatch.

The log gets one line per request: "N ACTION METHOD PATH RANGE", and
"N body64k" once an answer has relayed 64 KiB of its body.
Python 3 standard library only.
"""
import argparse
import hashlib
import hmac
import os
import socket
import struct
import sys
import threading
import urllib.parse

lock = threading.Lock()
count = 0


def log(args, line):
    with lock:
        with open(args.log, "a") as f:
            f.write(line + "\n")


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def reset(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def answer(sock, status, text, body=b""):
    sock.sendall(("HTTP/1.1 %d %s\r\nContent-Length: %d\r\nConnection: close\r\n"
                  "Content-Type: application/xml\r\n\r\n" % (status, text, len(body))).encode()
                 + body)
    sock.close()


def aws_enc(s, keep_slash=False):
    safe = "-_.~" + ("/" if keep_slash else "")
    return urllib.parse.quote(s, safe=safe)


def sigv4_ok(secret, method, target, headers):
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    cred = parts["Credential"].split("/")
    date, region, service = cred[1], cred[2], cred[3]
    signed = parts["SignedHeaders"].split(";")
    path, _, query = target.partition("?")
    pairs = []
    for kv in query.split("&") if query else []:
        k, _, v = kv.partition("=")
        pairs.append((aws_enc(urllib.parse.unquote(k)), aws_enc(urllib.parse.unquote(v))))
    cquery = "&".join("%s=%s" % kv for kv in sorted(pairs))
    cpath = aws_enc(urllib.parse.unquote(path), keep_slash=True)
    cheaders = "".join("%s:%s\n" % (h, " ".join(headers.get(h, "").split())) for h in signed)
    payload = headers.get("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
    creq = "\n".join([method, cpath, cquery, cheaders, ";".join(signed), payload])
    sts = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""),
                     "/".join(cred[1:]), hashlib.sha256(creq.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for m in (date, region, service, "aws4_request"):
        key = hmac.new(key, m.encode(), hashlib.sha256).digest()
    want = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, parts["Signature"])


def relay(args, n, client, head, trunc):
    up = socket.create_connection(("127.0.0.1", args.upstream))
    lines = head.split("\r\n")
    out = [lines[0]] + [l for l in lines[1:] if not l.lower().startswith("connection:")]
    out.append("Connection: close")
    up.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
    buf = b""
    body = None   # body bytes relayed, once the head is through
    marked = False
    while True:
        chunk = up.recv(65536)
        if not chunk:
            break
        if body is None:
            buf += chunk
            if b"\r\n\r\n" not in buf:
                continue
            h, chunk = buf.split(b"\r\n\r\n", 1)
            client.sendall(h + b"\r\n\r\n")
            body = 0
        if trunc is not None and body + len(chunk) >= trunc:
            client.sendall(chunk[:trunc - body])
            up.close()
            client.shutdown(socket.SHUT_WR)
            client.close()
            return
        client.sendall(chunk)
        body += len(chunk)
        if body >= 65536 and not marked:
            marked = True
            log(args, "%d body64k" % n)
    up.close()
    client.close()


def handle(args, client):
    global count
    try:
        head, _ = read_head(client)
        if head is None:
            client.close()
            return
        first = head.split("\r\n")[0].split(" ")
        headers = {}
        for l in head.split("\r\n")[1:]:
            k, _, v = l.partition(":")
            headers[k.strip().lower()] = v.strip()
        with lock:
            count += 1
            n = count
        action = args.schedule[n - 1] if n <= len(args.schedule) else "pass"
        log(args, "%d %s %s %s %s" % (n, action, first[0], first[1], headers.get("range", "-")))
        if args.sigv4_secret and not sigv4_ok(args.sigv4_secret, first[0], first[1], headers):
            answer(client, 403, "Forbidden", b"<?xml version=\"1.0\"?><Error><Code>"
                   b"SignatureDoesNotMatch</Code></Error>")
            return
        if action == "reset":
            reset(client)
        elif action in ("500", "503", "429", "404"):
            answer(client, int(action), "Failing")
        elif action.startswith("trunc:"):
            relay(args, n, client, head, int(action[6:]))
        else:
            relay(args, n, client, head, None)
    except (OSError, ValueError, KeyError, IndexError) as e:
        log(args, "error %s" % e)
        try:
            reset(client)
        except OSError:
            pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--upstream", type=int, required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--schedule", default="")
    p.add_argument("--sigv4-secret", default="")
    args = p.parse_args()
    args.schedule = [a for a in args.schedule.split(",") if a]
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    open(args.log, "a").close()
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(args.port_file + ".tmp", args.port_file)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=handle, args=(args, c), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
