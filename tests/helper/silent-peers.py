#!/usr/bin/env python3
"""silent-peers.py ADDRESS COUNT MARKER: connect COUNT plain sockets to
ADDRESS (HOST:PORT for TCP, or the path of a UNIX socket), send nothing,
write MARKER once all are connected, and hold them until killed: peers
that never greet, in front of a listener's real one."""
import os
import signal
import socket
import sys


def main():
    addr, count, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    held = []
    for _ in range(count):
        if addr.startswith("/"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(addr)
        else:
            host, port = addr.rsplit(":", 1)
            s = socket.create_connection((host, int(port)))
        held.append(s)
    with open(marker + ".tmp", "w") as f:
        f.write("%d\n" % len(held))
    os.rename(marker + ".tmp", marker)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
