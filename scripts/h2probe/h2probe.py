#!/usr/bin/python3
"""HTTP/2 conformance and abuse probes for `vodlab serve` (h2spec is not
installable here). Each case opens its own connection (h2c by prior
knowledge, or TLS with ALPN h2 when --tls), writes raw frames (HPACK from
the `hpack` package, Debian python3-hpack, which python3-h2 pulls in), reads
the server's frames, and prints one JSON line:
{"case": NAME, "pass": true|false, "detail": "..."}.

Usage: h2probe.py HOST PORT [--tls] [--bind ADDR] [--path /file] [--big /bigfile] CASE...
       h2probe.py HOST PORT [--tls] [--bind ADDR] --loop SECONDS [--threads K] FLOOD
       h2probe.py --list

--bind ADDR: the source address (e.g. 127.0.0.2, for the server's
per-address penalty to tell the prober from a benign client on 127.0.0.1).

--loop repeats one flood on new connections for SECONDS from K threads of
this process (an attacker as fast as one Python process) and prints the
connections and bytes per second it achieved (scripts/experiments/
h2-flood-cost.sh).
Exit status: 0 when every case passed, 1 otherwise.

The RFC 9113 cases cite their section; the floods expect GOAWAY with
ENHANCE_YOUR_CALM (or the connection closed) and are followed, in the Rust
test that runs them, by a benign client that must still be served.
"""

import json
import socket
import ssl
import struct
import sys
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
ERRORS = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR",
          4: "SETTINGS_TIMEOUT", 5: "STREAM_CLOSED", 6: "FRAME_SIZE_ERROR", 7: "REFUSED_STREAM",
          8: "CANCEL", 9: "COMPRESSION_ERROR", 10: "CONNECT_ERROR", 11: "ENHANCE_YOUR_CALM",
          12: "INADEQUATE_SECURITY", 13: "HTTP_1_1_REQUIRED"}


def frame(kind, flags, sid, payload=b""):
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, kind, flags, sid & 0x7FFFFFFF) + payload


def settings(**kv):
    ids = {"header_table_size": 1, "enable_push": 2, "max_concurrent_streams": 3,
           "initial_window_size": 4, "max_frame_size": 5, "max_header_list_size": 6}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in kv.items()))


def source(a):
    """create_connection's source_address: --bind ADDR, else the kernel's choice."""
    return (a.bind, 0) if a.bind else None


class Conn:
    def __init__(self, host, port, tls, timeout=5.0, bind=None):
        s = socket.create_connection((host, port), timeout=timeout,
                                     source_address=(bind, 0) if bind else None)
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            s = ctx.wrap_socket(s, server_hostname=host)
            assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
        self.s = s
        self.buf = b""
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.host = host
        self.port = port
        self.closed = False

    def send(self, b):
        try:
            self.s.sendall(b)
            return True
        except OSError:
            self.closed = True
            return False

    def start(self, **kv):
        self.send(PREFACE + settings(**kv))

    def headers(self, sid, path, method="GET", extra=(), end_stream=True):
        block = self.enc.encode([(":method", method), (":scheme", "http"), (":path", path),
                                 (":authority", "%s:%d" % (self.host, self.port))] + list(extra))
        return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), sid, block)

    def read_frame(self, deadline):
        while True:
            if len(self.buf) >= 9:
                n = (self.buf[0] << 16) | (self.buf[1] << 8) | self.buf[2]
                if len(self.buf) >= 9 + n:
                    kind, flags = self.buf[3], self.buf[4]
                    sid = struct.unpack(">I", self.buf[5:9])[0] & 0x7FFFFFFF
                    payload = self.buf[9:9 + n]
                    self.buf = self.buf[9 + n:]
                    return kind, flags, sid, payload
            left = deadline - time.time()
            if left <= 0 or self.closed:
                return None
            self.s.settimeout(left)
            try:
                b = self.s.recv(1 << 20)
            except socket.timeout:
                return None
            except (OSError, ssl.SSLError):
                self.closed = True
                return None
            if not b:
                self.closed = True
                return None
            self.buf += b

    def frames(self, seconds, stop=None):
        """Frames until `stop(frame)` is true, the connection closes, or time is up."""
        out = []
        deadline = time.time() + seconds
        while True:
            f = self.read_frame(deadline)
            if f is None:
                return out
            if f[0] == SETTINGS and not f[1] & ACK:
                self.send(frame(SETTINGS, ACK, 0))
            out.append(f)
            if stop and stop(f):
                return out


def goaway_code(frames):
    for kind, _, _, p in frames:
        if kind == GOAWAY:
            return ERRORS.get(struct.unpack(">I", p[4:8])[0], "?")
    return None


def rst_code(frames, sid):
    for kind, _, s, p in frames:
        if kind == RST_STREAM and s == sid:
            return ERRORS.get(struct.unpack(">I", p)[0], "?")
    return None


def is_goaway(f):
    return f[0] == GOAWAY


# What the h2 crate (0.4) answers where RFC 9113 names another error code:
# still a connection error (GOAWAY), so the peer is stopped, but the code is
# PROTOCOL_ERROR. A case passes with its RFC code or with the crate's known
# deviation, which the output marks so the Rust test can hold the list.
DEVIATION = "DEVIATION"


def expect_goaway(c, codes, seconds=5, deviation=None):
    fs = c.frames(seconds, is_goaway)
    code = goaway_code(fs)
    ok = code in codes or (code is None and c.closed and "CLOSED" in codes)
    detail = "GOAWAY %s (closed: %s)" % (code, c.closed)
    if not ok and deviation is not None and code == deviation:
        return True, "%s: GOAWAY %s where RFC 9113 says %s" % (DEVIATION, code, "/".join(sorted(codes)))
    return ok, detail


def response(c, sid, seconds=5):
    """(status, body bytes, frames) of stream `sid`."""
    status, body, fs = None, b"", []
    deadline = time.time() + seconds
    while True:
        f = c.read_frame(deadline)
        if f is None:
            return status, body, fs
        fs.append(f)
        kind, flags, s, p = f
        if kind == SETTINGS and not flags & ACK:
            c.send(frame(SETTINGS, ACK, 0))
        if s != sid:
            continue
        if kind == HEADERS:
            status = dict(c.dec.decode(p)).get(":status")
        elif kind == DATA:
            body += p
            if p:
                c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", len(p))) +
                       frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", len(p))))
        elif kind == RST_STREAM:
            return status, body, fs
        if flags & END_STREAM and kind in (HEADERS, DATA):
            return status, body, fs


# ---- RFC 9113 cases ----

def case_server_settings(c, a):
    """§3.4: the server's preface is a SETTINGS frame; video-sized values."""
    c.start()
    fs = c.frames(3, lambda f: f[0] == SETTINGS)
    if not fs or fs[0][0] != SETTINGS:
        return False, "first frame %r" % (fs[:1],)
    p = fs[0][3]
    vals = {struct.unpack(">H", p[i:i + 2])[0]: struct.unpack(">I", p[i + 2:i + 6])[0] for i in range(0, len(p), 6)}
    ok = vals.get(3, 0) > 0 and vals.get(4, 65535) >= 1 << 20 and vals.get(5, 16384) >= 16384
    return ok, "settings %r" % vals


def case_get_range(c, a):
    """§8.1 with RFC 9110 §14: a range over h2 is a 206 with the bytes."""
    c.start()
    c.send(c.headers(1, a.path, extra=[("range", "bytes=10-19")]))
    status, body, _ = response(c, 1)
    return status == "206" and len(body) == 10, "status %s, %d bytes" % (status, len(body))


def case_head(c, a):
    """§8.1: HEAD ends the stream with the HEADERS frame."""
    c.start()
    c.send(c.headers(1, a.path, method="HEAD"))
    fs = c.frames(3, lambda f: f[0] == HEADERS and f[2] == 1)
    h = [f for f in fs if f[0] == HEADERS and f[2] == 1]
    return bool(h) and bool(h[0][1] & END_STREAM), "HEADERS flags %s" % (h[0][1] if h else None)


def case_frame_too_large(c, a):
    """§4.2: a frame larger than SETTINGS_MAX_FRAME_SIZE is FRAME_SIZE_ERROR."""
    c.start()
    c.send(c.headers(1, a.path, method="POST", end_stream=False))
    c.send(frame(DATA, 0, 1, b"x" * 70000))
    return expect_goaway(c, {"FRAME_SIZE_ERROR"})


def case_settings_bad_length(c, a):
    """§6.5: a SETTINGS payload not a multiple of 6 is FRAME_SIZE_ERROR."""
    c.start()
    c.send(frame(SETTINGS, 0, 0, b"\x00\x03\x00\x00\x00"))
    return expect_goaway(c, {"FRAME_SIZE_ERROR"}, deviation="PROTOCOL_ERROR")


def case_settings_ack_with_payload(c, a):
    """§6.5: a SETTINGS ACK with a payload is FRAME_SIZE_ERROR."""
    c.start()
    c.send(frame(SETTINGS, ACK, 0, b"\x00\x03\x00\x00\x00\x01"))
    return expect_goaway(c, {"FRAME_SIZE_ERROR"}, deviation="PROTOCOL_ERROR")


def case_settings_bad_window(c, a):
    """§6.5.2: SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1 is FLOW_CONTROL_ERROR."""
    c.start()
    c.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 1 << 31)))
    return expect_goaway(c, {"FLOW_CONTROL_ERROR"}, deviation="PROTOCOL_ERROR")


def case_settings_bad_frame_size(c, a):
    """§6.5.2: SETTINGS_MAX_FRAME_SIZE below 16384 is PROTOCOL_ERROR."""
    c.start()
    c.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 5, 1000)))
    return expect_goaway(c, {"PROTOCOL_ERROR"})


def case_ping(c, a):
    """§6.7: PING is answered with PING ACK and the same payload."""
    c.start()
    c.send(frame(PING, 0, 0, b"vodlab!!"))
    fs = c.frames(3, lambda f: f[0] == PING and f[1] & ACK)
    acks = [f for f in fs if f[0] == PING and f[1] & ACK]
    return bool(acks) and acks[0][3] == b"vodlab!!", "acks %r" % acks[:1]


def case_ping_bad_length(c, a):
    """§6.7: a PING whose payload is not 8 bytes is FRAME_SIZE_ERROR."""
    c.start()
    c.send(frame(PING, 0, 0, b"short"))
    return expect_goaway(c, {"FRAME_SIZE_ERROR"}, deviation="PROTOCOL_ERROR")


def case_data_on_idle_stream(c, a):
    """§5.1: DATA on an idle stream is a connection PROTOCOL_ERROR."""
    c.start()
    c.send(frame(DATA, 0, 3, b"hello"))
    return expect_goaway(c, {"PROTOCOL_ERROR", "STREAM_CLOSED"})


def case_even_stream_id(c, a):
    """§5.1.1: a client stream with an even identifier is PROTOCOL_ERROR."""
    c.start()
    c.send(c.headers(2, a.path))
    return expect_goaway(c, {"PROTOCOL_ERROR"})


def case_decreasing_stream_id(c, a):
    """§5.1.1: a new stream below an earlier one is PROTOCOL_ERROR."""
    c.start()
    c.send(c.headers(5, a.path))
    c.send(c.headers(3, a.path))
    return expect_goaway(c, {"PROTOCOL_ERROR", "STREAM_CLOSED"})


def case_rst_idle_stream(c, a):
    """§6.4: RST_STREAM on an idle stream is PROTOCOL_ERROR."""
    c.start()
    c.send(frame(RST_STREAM, 0, 7, struct.pack(">I", 8)))
    return expect_goaway(c, {"PROTOCOL_ERROR"})


def case_window_update_zero(c, a):
    """§6.9: a WINDOW_UPDATE of 0 on the connection is PROTOCOL_ERROR."""
    c.start()
    c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0)))
    return expect_goaway(c, {"PROTOCOL_ERROR"})


def case_window_overflow(c, a):
    """§6.9.1: a connection window above 2^31-1 is FLOW_CONTROL_ERROR."""
    c.start()
    c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 31) - 1)))
    return expect_goaway(c, {"FLOW_CONTROL_ERROR"})


def case_hpack_bad_index(c, a):
    """§4.3: a header block that cannot be decoded is COMPRESSION_ERROR."""
    c.start()
    c.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\xfe"))  # index 126: beyond both tables
    return expect_goaway(c, {"COMPRESSION_ERROR"}, deviation="PROTOCOL_ERROR")


def case_continuation_without_headers(c, a):
    """§6.10: CONTINUATION not after HEADERS is PROTOCOL_ERROR."""
    c.start()
    c.send(frame(CONTINUATION, END_HEADERS, 1, c.enc.encode([(":method", "GET")])))
    return expect_goaway(c, {"PROTOCOL_ERROR"})


def case_missing_path(c, a):
    """§8.3.1: a request without :path is malformed: a stream PROTOCOL_ERROR."""
    c.start()
    block = c.enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "x")])
    c.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, block))
    fs = c.frames(3, lambda f: f[0] in (RST_STREAM, GOAWAY))
    code = rst_code(fs, 1) or goaway_code(fs)
    return code == "PROTOCOL_ERROR", "reset %s" % code


def case_flow_control(c, a):
    """§6.9: DATA never exceeds the client's window; more after WINDOW_UPDATE."""
    c.start(initial_window_size=1000)
    c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 10 << 20)))
    c.send(c.headers(1, a.big))
    fs = c.frames(1.5)
    got = sum(len(f[3]) for f in fs if f[0] == DATA and f[2] == 1)
    if got != 1000:
        return False, "%d bytes before any stream WINDOW_UPDATE (window 1000)" % got
    c.send(frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 5000)))
    fs = c.frames(1.5)
    more = sum(len(f[3]) for f in fs if f[0] == DATA and f[2] == 1)
    return more == 5000, "1000, then %d after a 5000-byte update" % more


def case_large_frames(c, a):
    """§4.2: DATA frames follow the client's SETTINGS_MAX_FRAME_SIZE (large when allowed)."""
    c.start(initial_window_size=(1 << 31) - 1, max_frame_size=1 << 20)
    c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", (1 << 31) - 1 - 65535)))
    c.send(c.headers(1, a.big, extra=[("range", "bytes=0-4194303")]))
    sizes = []
    deadline = time.time() + 10
    while sum(sizes) < 4 << 20:
        f = c.read_frame(deadline)
        if f is None:
            break
        if f[0] == DATA and f[2] == 1:
            sizes.append(len(f[3]))
    ok = sum(sizes) == 4 << 20 and max(sizes) > 16384 and max(sizes) <= 1 << 20
    return ok, "%d bytes in %d frames, largest %d" % (sum(sizes), len(sizes), max(sizes or [0]))


def case_goaway_from_client(c, a):
    """§6.8: after the client's GOAWAY the server finishes and closes."""
    c.start()
    c.send(c.headers(1, a.path))
    status, _, _ = response(c, 1)
    c.send(frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)))
    c.frames(5)
    return status == "200" and c.closed, "status %s, closed %s" % (status, c.closed)


# ---- floods ----
#
# Each flood is the bytes one connection sends after its preface and SETTINGS,
# built from a fresh HPACK encoder, so the same bytes can be replayed on every
# new connection (`--loop`).

def flood_rapid_reset(enc, a):
    """CVE-2023-44487: HEADERS then RST_STREAM, thousands of times."""
    hdrs = [(":method", "GET"), (":scheme", "http"), (":path", a.big), (":authority", a.authority)]
    return b"".join(frame(HEADERS, END_HEADERS | END_STREAM, 2 * i + 1, enc.encode(hdrs)) +
                    frame(RST_STREAM, 0, 2 * i + 1, struct.pack(">I", 8)) for i in range(5000))


def flood_continuation_flood(enc, a):
    """HEADERS without END_HEADERS, then endless CONTINUATION frames."""
    head = frame(HEADERS, 0, 1, enc.encode([(":method", "GET"), (":scheme", "http"), (":path", a.path)]))
    return head + frame(CONTINUATION, 0, 1, b"\x40\x01x\x01y" * 200) * 2000


def flood_settings_flood(enc, a):
    """SETTINGS frames without end (the server must ACK each)."""
    return settings(max_concurrent_streams=100) * 5000


def flood_ping_flood(enc, a):
    """PING frames without end."""
    return frame(PING, 0, 0, b"12345678") * 5000


def flood_window_update_flood(enc, a):
    """WINDOW_UPDATE frames of 1 byte, hundreds of thousands per second."""
    return frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1)) * 400000


def flood_small_data_flood(enc, a):
    """A request body sent as thousands of 1-byte DATA frames."""
    hdrs = [(":method", "POST"), (":scheme", "http"), (":path", a.path), (":authority", a.authority)]
    return frame(HEADERS, END_HEADERS, 1, enc.encode(hdrs)) + frame(DATA, 0, 1, b"x") * 20000


FLOODS = {k[6:]: v for k, v in globals().items() if k.startswith("flood_")}

# For --loop only: connect, send the preface and SETTINGS, close (what
# reconnecting costs the server without any flood).
LOOP_ONLY = {"connect_only": lambda enc, a: b""}


def run_flood(name):
    def case(c, a):
        c.start()
        c.send(FLOODS[name](c.enc, a))
        codes = {"ENHANCE_YOUR_CALM", "CLOSED"}
        if name == "continuation_flood":
            codes |= {"COMPRESSION_ERROR", "PROTOCOL_ERROR"}
        return expect_goaway(c, codes)
    case.__doc__ = FLOODS[name].__doc__
    return case


for _name in FLOODS:
    globals()["case_" + _name] = run_flood(_name)


def flood_loop(host, port, a, name, seconds, conns):
    """Repeats flood `name` for `seconds` from `conns` threads of this one
    process: each connects, sends the flood's bytes as fast as the socket
    takes them until the server stops reading or closes, reads until the
    close (at most 2 s), and starts over, until `seconds` pass or SIGTERM.
    Prints one JSON line with the connections per second it achieved and
    the flood bytes per second the kernel took from it (offered: the server
    reads only up to its limit)."""
    import signal
    import threading
    flood = LOOP_ONLY.get(name) or FLOODS[name]
    payload = PREFACE + settings() + flood(hpack.Encoder(), a)
    end = time.time() + seconds
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    totals = {"connections": 0, "sent": 0, "goaway": 0}
    lock = threading.Lock()

    def one():
        while time.time() < end and not stop.is_set():
            sent = 0
            goaway = False
            try:
                s = socket.create_connection((host, port), timeout=2.0,
                                             source_address=source(a))
                if a.tls:
                    ctx = ssl.create_default_context()
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
                    ctx.set_alpn_protocols(["h2"])
                    s = ctx.wrap_socket(s, server_hostname=host)
            except OSError:
                time.sleep(0.01)
                continue
            try:
                view = memoryview(payload)
                while sent < len(payload):
                    sent += s.send(view[sent:sent + (1 << 18)])
            except OSError:  # the server stopped reading (timeout) or closed
                pass
            if name == "connect_only":
                s.settimeout(0)
            try:
                while True:
                    b = s.recv(1 << 16)
                    if not b:
                        break
                    goaway |= bytes([GOAWAY]) in b  # rough: a GOAWAY type byte seen
            except OSError:
                pass
            s.close()
            with lock:
                totals["connections"] += 1
                totals["sent"] += sent
                totals["goaway"] += goaway

    t0 = time.time()
    threads = [threading.Thread(target=one) for _ in range(conns)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        threads[0].join(0.05)
        if stop.is_set():
            for t in threads:
                t.join()
    took = time.time() - t0
    print(json.dumps({"flood": name, "seconds": round(took, 3), "threads": conns,
                      "connections": totals["connections"],
                      "connections_per_s": round(totals["connections"] / took, 1),
                      "offered_mb_per_s": round(totals["sent"] / took / 1e6, 2)}), flush=True)
    return 0


def case_slow_reader(c, a):
    """A client that never opens its window: the stream is reset after the send timeout."""
    c.start(initial_window_size=1)
    c.send(c.headers(1, a.big))
    fs = c.frames(a.wait, lambda f: f[0] in (RST_STREAM, GOAWAY))
    code = rst_code(fs, 1)
    return code == "CANCEL", "reset %s after up to %.0f s" % (code, a.wait)


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}


class Args:
    authority = "localhost"
    path = "/small.bin"
    big = "/big.bin"
    tls = False
    wait = 10.0
    bind = None


def main(argv):
    if argv[1:] == ["--list"]:
        for k, v in CASES.items():
            print("%-28s %s" % (k, v.__doc__))
        return 0
    a = Args()
    host, port = argv[1], int(argv[2])
    a.authority = "%s:%d" % (host, port)
    loop, threads = None, 1
    names = []
    it = iter(argv[3:])
    for x in it:
        if x == "--tls":
            a.tls = True
        elif x == "--path":
            a.path = next(it)
        elif x == "--big":
            a.big = next(it)
        elif x == "--bind":
            a.bind = next(it)
        elif x == "--wait":
            a.wait = float(next(it))
        elif x == "--loop":
            loop = float(next(it))
        elif x == "--threads":
            threads = int(next(it))
        elif x == "all":
            names.extend(CASES)
        else:
            names.append(x)
    if loop is not None:
        if len(names) != 1 or names[0] not in list(FLOODS) + list(LOOP_ONLY):
            print("--loop takes one flood: %s" % " ".join(list(FLOODS) + list(LOOP_ONLY)), file=sys.stderr)
            return 2
        return flood_loop(host, port, a, names[0], loop, threads)
    failed = 0
    for n in names:
        try:
            c = Conn(host, port, a.tls, bind=a.bind)
            ok, detail = CASES[n](c, a)
            c.s.close()
        except Exception as e:  # a probe that crashed is a failure, with its reason
            ok, detail = False, "%s: %s" % (type(e).__name__, e)
        failed += not ok
        print(json.dumps({"case": n, "pass": bool(ok), "deviation": detail.startswith(DEVIATION),
                          "detail": detail}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
