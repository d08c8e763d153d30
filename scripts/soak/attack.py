#!/usr/bin/env python3
"""Hostile HTTP/1.1 clients for scripts/soak.sh (standard library only), one
process per attack, for a bounded time, loopback only:

  attack.py slowloris HOST PORT --conns N --seconds S [--bind ADDR] [--path P]
      N connections, each sending a request line and one more byte of an
      unfinished header every --every seconds (2): the server's header
      timeout closes each; a closed one is reopened at once.
  attack.py slowread HOST PORT --conns N --seconds S --path /big [--bind ADDR]
      N connections, each asking for a large file with a 4 KiB receive buffer
      and reading --bytes (64) every --every seconds (1): a reader slow but
      always making progress (the server must not cut it, only bound what it
      queues for it); a closed one is reopened at once.

At the end it prints one JSON line: attack, connections opened, closed by
the server, refused/failed connects, bytes sent and read. The attackers
mirror the hostile bench's (crates/vodlab/benches/hostile.rs) and
tests/hostile_serve.rs's, at a size a 2-core machine carries beside the
server.
"""

import argparse
import errno
import json
import resource
import selectors
import socket
import sys
import time


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))


class Conn:
    def __init__(self, sock, due):
        self.sock = sock
        self.due = due
        self.connected = False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("attack", choices=["slowloris", "slowread"])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--conns", type=int, default=500)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--bind", default=None, help="source address (e.g. 127.0.0.3)")
    ap.add_argument("--path", default="/")
    ap.add_argument("--every", type=float, default=None)
    ap.add_argument("--bytes", type=int, default=64)
    a = ap.parse_args()
    if not a.host.startswith("127.") and a.host not in ("::1", "localhost"):
        sys.exit("attack.py: loopback targets only")
    every = a.every if a.every is not None else (2.0 if a.attack == "slowloris" else 1.0)
    raise_nofile(a.conns + 64)

    sel = selectors.DefaultSelector()
    stats = {"attack": a.attack, "opened": 0, "closed_by_server": 0, "connect_failed": 0, "sent": 0, "read": 0}
    conns = []
    start = time.monotonic()
    end = start + a.seconds

    def open_one(now):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if a.attack == "slowread":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        if a.bind:
            s.bind((a.bind, 0))
        s.setblocking(False)
        rc = s.connect_ex((a.host, a.port))
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            stats["connect_failed"] += 1
            return None
        c = Conn(s, now)
        sel.register(s, selectors.EVENT_WRITE, c)
        stats["opened"] += 1
        return c

    def drop(c, by_server):
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()
        if by_server:
            stats["closed_by_server"] += 1

    # spread the first connections over the first `every` seconds
    for i in range(a.conns):
        conns.append(open_one(start + every * i / a.conns))

    while True:
        now = time.monotonic()
        if now >= end:
            break
        for key, ev in sel.select(timeout=0.05):
            c = key.data
            if not c.connected:
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    drop(c, False)
                    stats["connect_failed"] += 1
                    c.sock = None
                    continue
                c.connected = True
                head = f"GET {a.path} HTTP/1.1\r\nHost: soak\r\n"
                if a.attack == "slowloris":
                    head += "X-a: "
                else:
                    head += "\r\n"
                try:
                    c.sock.send(head.encode())
                    stats["sent"] += len(head)
                except OSError:
                    drop(c, True)
                    c.sock = None
                    continue
                if a.attack == "slowloris":
                    # wait for the server's close (or an error status)
                    sel.modify(c.sock, selectors.EVENT_READ, c)
                else:
                    # the reads are timed, not driven by readiness
                    sel.unregister(c.sock)
                c.due = now + every
            elif ev & selectors.EVENT_READ and a.attack == "slowloris":
                # a slowloris connection is answered only by the server
                # closing it (or an error status): either way it is over
                try:
                    data = c.sock.recv(4096)
                except OSError:
                    data = b""
                stats["read"] += len(data)
                drop(c, True)
                c.sock = None
        now = time.monotonic()
        for i, c in enumerate(conns):
            if c is None or c.sock is None:
                if now < end:
                    conns[i] = open_one(now)
                continue
            if not c.connected or now < c.due:
                continue
            c.due = now + every
            try:
                if a.attack == "slowloris":
                    c.sock.send(b"a")
                    stats["sent"] += 1
                else:
                    data = c.sock.recv(a.bytes)
                    if not data:
                        drop(c, True)
                        c.sock = None
                    stats["read"] += len(data)
            except BlockingIOError:
                pass
            except OSError:
                drop(c, True)
                c.sock = None
    for c in conns:
        if c is not None and c.sock is not None:
            drop(c, False)
    stats["seconds"] = round(time.monotonic() - start, 1)
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    main()
