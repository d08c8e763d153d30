#!/usr/bin/env python3
"""One HTTP/3 GET with aioquic (PyPI), a third-party h3 client for vodlab's
tests: h3get.py HOST PORT PATH OUT [--range SPEC] [--ca PEM] [--streams N]
[--timeout S].
Writes the body to OUT and prints one JSON line: status, headers, bytes, ALPN,
and elapsed_s, the seconds from the first request sent to its stream's end
(the pacing tests' measure: no interpreter start-up or handshake in it).
With --streams N it opens N request streams at once (the stream cap's test)
and reports how many were answered."""
import argparse, asyncio, json, ssl, time

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


class Client(QuicConnectionProtocol):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.h3 = H3Connection(self._quic)
        self.streams = {}

    def get(self, authority, path, headers):
        sid = self._quic.get_next_available_stream_id()
        hdrs = [(b":method", b"GET"), (b":scheme", b"https"),
                (b":authority", authority.encode()), (b":path", path.encode())]
        hdrs += [(k.encode(), v.encode()) for k, v in headers]
        self.h3.send_headers(sid, hdrs, end_stream=True)
        fut = asyncio.get_running_loop().create_future()
        self.streams[sid] = {"head": None, "body": bytearray(), "done": fut,
                             "t0": time.monotonic(), "t1": None}
        self.transmit()
        return fut

    def quic_event_received(self, event):
        for e in self.h3.handle_event(event):
            s = self.streams.get(getattr(e, "stream_id", None))
            if s is None:
                continue
            if isinstance(e, HeadersReceived):
                s["head"] = [(k.decode(), v.decode()) for k, v in e.headers]
            elif isinstance(e, DataReceived):
                s["body"] += e.data
            if getattr(e, "stream_ended", False) and not s["done"].done():
                s["t1"] = time.monotonic()
                s["done"].set_result(s)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("host"); p.add_argument("port", type=int)
    p.add_argument("path"); p.add_argument("out")
    p.add_argument("--range"); p.add_argument("--ca")
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--timeout", type=float, default=10.0)
    a = p.parse_args()
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    if a.ca:
        cfg.load_verify_locations(a.ca)
    else:
        cfg.verify_mode = ssl.CERT_NONE
    headers = [("range", "bytes=" + a.range)] if a.range else []
    async with connect(a.host, a.port, configuration=cfg, create_protocol=Client,
                       wait_connected=True) as c:
        futs = [c.get(f"{a.host}:{a.port}", a.path, headers) for _ in range(a.streams)]
        done, _ = await asyncio.wait(futs, timeout=a.timeout)
        first = futs[0].result() if futs[0].done() else None
        alpn = c._quic.tls.alpn_negotiated
    if first is not None:
        open(a.out, "wb").write(first["body"])
    head = dict(first["head"]) if first else {}
    print(json.dumps({"status": int(head.get(":status", 0)), "headers": head,
                      "bytes": len(first["body"]) if first else 0,
                      "answered": len(done), "alpn": alpn,
                      "elapsed_s": first["t1"] - first["t0"] if first else None}))


asyncio.run(main())
