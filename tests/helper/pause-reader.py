"""pause-reader.py SRC STEP [AT GO OUT]: a trainer that pauses. Reads one
rank's stream from SRC (a FIFO, or a "unix:PATH" endpoint through
overlord.net, no secret) exactly up to the end of the STEP frame of step
STEP, makes the file AT, waits for the file GO, then reads on to the end.
Every byte it read goes to OUT. With SRC and STEP alone, a trainer that
ends: it closes its stream right after that STEP frame. Exits 1 on a
stream that ends first."""
import os
import struct
import sys
import time


def main():
    src, stop = sys.argv[1:3]
    at, go, out = sys.argv[3:6] if len(sys.argv) > 3 else (None, None, os.devnull)
    if src.startswith("unix:"):
        from overlord import net
        f = net.connect(src).makefile("rb", buffering=0)
    else:
        f = open(src, "rb", buffering=0)
    o = open(out, "wb")

    def readn(n):
        b = b""
        while len(b) < n:
            c = f.read(n - len(b))
            if not c:
                sys.exit("end of stream before step %s" % stop)
            b += c
        o.write(b)
        return b
    readn(16)
    while True:
        length, kind = struct.unpack("<IB", readn(12)[:5])
        p = readn(length)
        if kind == 8 and struct.unpack_from("<Q", p)[0] == int(stop):
            break
    if at is None:
        f.close()
        return
    o.flush()
    open(at, "w").close()
    while not os.path.exists(go):
        time.sleep(0.01)
    while True:
        b = f.read(1 << 16)
        if not b:
            break
        o.write(b)


if __name__ == "__main__":
    main()
