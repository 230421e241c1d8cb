#!/usr/bin/python3
"""A lying HTTP server on 127.0.0.1 for tests: serves two versions of one
object of the same size and misbehaves as MODE says.

usage: lying-server.py MODE V1 V2 PORTFILE
  change:  the first GET is cut in half, later GETs serve V2 (206, its ETag)
  errpage: HEAD tells V1's size, a GET with Range gets 200 and a short page
  flip:    V1 (HEAD and 206s with its ETag) until the file PORTFILE.flip
           exists, V2 from then on
  badrange: a GET with Range gets 206 with the Content-Range asked for but
           a short page as its body (its Content-Length the page's)
  underhead: HEAD tells 1000 bytes fewer than V1 has; a GET ignores Range
           and sends all of V1 with 200, no Content-Length, then closes
The port is written to PORTFILE once the server listens.
"""
import http.server
import os
import re
import sys

MODE, V1, V2, PORTFILE = sys.argv[1:5]
DATA = [open(V1, "rb").read(), open(V2, "rb").read()]
ETAG = ['"v1"', '"v2"']
gets = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def head(self, code, ver, length, extra=()):
        self.send_response(code)
        self.send_header("Content-Length", str(length))
        self.send_header("ETag", ETAG[ver])
        self.send_header("Last-Modified", "Mon, 0%d Jan 2024 00:00:00 GMT"
                         % (ver + 1))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()

    def do_HEAD(self):
        if MODE == "underhead":
            self.head(200, 0, len(DATA[0]) - 1000)
        else:
            self.head(200, self.flipped(), len(DATA[0]))

    def flipped(self):
        return 1 if MODE == "flip" and os.path.exists(PORTFILE + ".flip") \
            else 0

    def do_GET(self):
        global gets
        gets += 1
        m = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if MODE == "errpage" and m:
            page = b"<html><body>Service unavailable</body></html>\n"
            self.head(200, 0, len(page))
            self.wfile.write(page)
            return
        if MODE == "underhead":
            self.send_response(200)
            self.send_header("ETag", ETAG[0])
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(DATA[0])
            self.close_connection = True
            return
        if MODE == "badrange" and m:
            page = b"<html><body>Service unavailable</body></html>\n"
            a = int(m.group(1))
            b = int(m.group(2)) if m.group(2) else len(DATA[0]) - 1
            self.send_response(206)
            self.send_header("Content-Length", str(len(page)))
            self.send_header("ETag", ETAG[0])
            self.send_header("Content-Range", "bytes %d-%d/%d"
                             % (a, b, len(DATA[0])))
            self.end_headers()
            self.wfile.write(page)
            return
        if MODE == "flip":
            ver = self.flipped()
        else:
            ver = 0 if gets == 1 else 1
        d = DATA[ver]
        a = int(m.group(1)) if m else 0
        b = int(m.group(2)) + 1 if m and m.group(2) else len(d)
        body = d[a:b]
        self.head(206, ver, len(body),
                  [("Content-Range", "bytes %d-%d/%d" % (a, b - 1, len(d)))])
        if MODE == "change" and gets == 1:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
