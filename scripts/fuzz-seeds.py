#!/usr/bin/env python3
"""Writes the seed inputs of the cargo-fuzz targets (fuzz/fuzz_targets/) to
fuzz/seeds/<target>/: a few valid inputs of what each target parses, so that
a fuzzer starting without a corpus begins from real requests, responses,
Range headers, session scripts and CMCD/CMSD instead of random bytes.
scripts/fuzz.sh reads them as a second, read-only corpus directory.

The samples come from the tests and the docs (named beside each). Targets
whose input is a tuple are written in the encoding of the `arbitrary` crate
(1.x), which libfuzzer-sys uses to build it: integers little-endian, a
`bool` one byte (odd is true), a `Vec` in the middle of a tuple a sequence of
(continue byte, element) ended by an even byte, the last `&str`/`&[u8]` the
rest of the input.

Standard library only. Usage: scripts/fuzz-seeds.py [OUT_DIR]  (default fuzz/seeds)
"""

import os
import struct
import sys

CRLF = "\r\n"


def http(*lines, body=""):
    return (CRLF.join(lines) + CRLF + CRLF + body).encode()


# request_head.rs: raw HTTP/1 request heads (tests/serve.rs, hostile_serve.rs,
# the players' requests with CMCD, docs/cmcd.md)
REQUEST_HEAD = {
    "get": http("GET /t1/00000.m4s HTTP/1.1", "Host: 127.0.0.1:8080", "User-Agent: vodlab"),
    "range": http("GET /t02182/720p.mp4 HTTP/1.1", "Host: localhost", "Range: bytes=0-6553599"),
    "head_if_range": http(
        "HEAD /t1/sd.mp4 HTTP/1.1",
        "Host: x",
        "Range: bytes=100-199,300-",
        'If-Range: "5f3a-100000"',
    ),
    "absolute_form": http("GET http://example.com:8080/a/b.m4s?x=1 HTTP/1.1", "Host: example.com:8080"),
    "http10": http("GET /index.html HTTP/1.0", "Connection: keep-alive"),
    "post_length": http("POST /upload HTTP/1.1", "Host: x", "Content-Length: 5", body="hello"),
    "post_chunked": http(
        "POST /upload HTTP/1.1", "Host: x", "Transfer-Encoding: chunked", body="5\r\nhello\r\n0\r\n\r\n"
    ),
    "cmcd": http(
        "GET /t00000/360p/00001.m4s HTTP/1.1",
        "Host: 127.0.0.1",
        "CMCD-Object: br=800,d=4000,ot=v,tb=5800",
        "CMCD-Request: bl=21300,dl=18500,mtp=48100,nor=\"00002.m4s\",su",
        "CMCD-Session: cid=\"t00000\",sf=d,sid=\"6e2fb550-c457-11e9-bb97-0800200c9a66\",st=v,v=1",
        "CMCD-Status: bs,rtp=15000",
    ),
    "traversal": http("GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1", "Host: x"),
    "folded": http("GET / HTTP/1.1", "Host: x", "X-Long: a", " b"),
    "two_hosts": http("GET / HTTP/1.1", "Host: a", "Host: b"),
}


def range_seed(size, header):
    """range.rs: (u32 file size, the rest as the Range header)."""
    return struct.pack("<I", size) + header.encode()


# range.rs: Range headers (vodlab-server's range tests, RFC 9110 §14.1.2's examples)
RANGE = {
    "first_500": range_seed(10000, "bytes=0-499"),
    "second_500": range_seed(10000, "bytes=500-999"),
    "suffix": range_seed(10000, "bytes=-500"),
    "open": range_seed(10000, "bytes=9500-"),
    "first_last": range_seed(10000, "bytes=0-0,-1"),
    "multi": range_seed(10000, "bytes=500-600,601-999,0-10"),
    "segment": range_seed(524288, "bytes=0-524287"),
    "unsatisfiable": range_seed(1000, "bytes=1000-2000"),
    "spaces": range_seed(1000, "bytes= 0 - 99 , 200-"),
    "huge": range_seed(0xFFFFFFFF, "bytes=4294967294-18446744073709551615"),
}


def response_seed(head_request, sizes, data):
    """response.rs: (bool HEAD request, Vec<u16> read sizes, the rest as the response)."""
    out = bytes([1 if head_request else 0])
    for s in sizes:
        out += b"\x01" + struct.pack("<H", s)
    return out + b"\x00" + data


# response.rs: responses as nginx and vodlab serve send them (tests/protocols.rs,
# vodlab-http's client tests, docs/serve.md's CMSD example)
RESPONSE = {
    "ok": response_seed(False, [], http("HTTP/1.1 200 OK", "Content-Length: 5", body="hello")),
    "ok_split": response_seed(False, [7, 1, 300], http("HTTP/1.1 200 OK", "Content-Length: 5", body="hello")),
    "partial": response_seed(
        False,
        [16],
        http(
            "HTTP/1.1 206 Partial Content",
            "Server: nginx/1.22.1",
            "Content-Range: bytes 0-9/100",
            "Content-Length: 10",
            body="0123456789",
        ),
    ),
    "chunked": response_seed(
        False,
        [3],
        http("HTTP/1.1 200 OK", "Transfer-Encoding: chunked", body="5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nT: v\r\n\r\n"),
    ),
    "head": response_seed(True, [], http("HTTP/1.1 200 OK", "Content-Length: 100")),
    "not_modified": response_seed(False, [], http("HTTP/1.1 304 Not Modified", "ETag: \"x\"")),
    "close_delimited": response_seed(False, [2], http("HTTP/1.0 200 OK", "Connection: close", body="till the end")),
    "continue": response_seed(
        False, [], http("HTTP/1.1 100 Continue") + http("HTTP/1.1 200 OK", "Content-Length: 2", body="ok")
    ),
    "cmsd": response_seed(
        False,
        [],
        http(
            "HTTP/1.1 200 OK",
            "Content-Length: 3",
            "CMSD-Static: br=750,d=4000,ot=v,st=v",
            'CMSD-Dynamic: "vodlab";etp=48210;mb=1750;rd=0',
            body="abc",
        ),
    ),
    "multipart": response_seed(
        False,
        [64],
        http(
            "HTTP/1.1 206 Partial Content",
            "Content-Type: multipart/byteranges; boundary=B",
            "Content-Length: 150",
            body="--B\r\nContent-Range: bytes 0-0/10\r\n\r\na\r\n--B\r\nContent-Range: bytes 9-9/10\r\n\r\nj\r\n--B--\r\n",
        ),
    ),
}

# session_script.rs: vodlab gen's output (tests/data/dash-vod-tiny.toml, the
# youtube-2011 and cloudsuite-2016 presets), its httperf and CloudSuite exports
# (vodlab script export), and docs/formats.md's keys
SESSION_SCRIPT = {
    "dash_vod_tiny": """# vodlab session script (docs/formats.md): workload dash-vod-tiny, seed 1, shard 0 of 1

#@session id=0 class=fast title=t00000 rank=1 rep=360p bitrate=800000 request_s=4
/t00000/360p/00000.m4s timeout=4
/t00000/360p/00001.m4s timeout=4
/t00000/360p/00002.m4s timeout=4
/t00000/360p/00003.m4s timeout=4 pacing=4
""",
    "youtube": """#@session id=1 class=3.5mbit title=t02985 rank=39 rep=sd bitrate=419430 request_s=10
/t02985/sd/00000.m4s timeout=10
/t02985/sd/00001.m4s timeout=10
/t02985/sd/00002.m4s timeout=10 pacing=10
""",
    "cloudsuite_ranges": """#@session id=1 class=10-15mbit title=t02182 rank=1069 rep=720p bitrate=5242880 request_s=10
/t02182/720p.mp4 range=0-6553599 timeout=10
/t02182/720p.mp4 range=6553600-13107199 timeout=10 pacing=10
/t02182/720p.mp4 range=13107200- timeout=10 stop_after=1000 read_kbps=800 detach=1
""",
    "httperf": """/t00000/360p/00000.m4s
/t00000/360p/00001.m4s
/t00000/360p/00002.m4s think=4
/t00000/360p/00003.m4s method=POST contents="a\\r\\nb" cookie='c=1' http=1.0

/t00000/360p/00000.m4s
  /t00000/360p/00001.m4s
""",
    "cloudsuite": """session server=127.0.0.1 port=8080 ssl=off
/t00000/360p/00000.m4s timeout=4 headers="Range: bytes=0-99\\r\\nX-A: b" size=100
/t00000/360p/00001.m4s timeout=4 pace_time=4 conn=1 # comment
""",
}

# cmcd.rs: the four CMCD headers in the order Object, Request, Status, Session
# (one per line), a query, CMSD (docs/cmcd.md)
CMCD = {
    "headers": "br=3200,d=4004,ot=v,tb=6000\nbl=21300,dl=18500,mtp=48100,nor=\"..%2F00002.m4s\",su\nbs,rtp=15000\ncid=\"faec5fc2-ac30-11ea-bb37-0242ac130002\",pr=1.08,sf=d,sid=\"6e2fb550-c457-11e9-bb97-0800200c9a66\",st=v",
    "list": "br=800,bl=21300,d=4000,ot=v,sid=\"s\",v=2",
    "query": "/t1/00000.m4s?CMCD=br%3D3200%2Cbl%3D21300%2Cot%3Dv",
    "cmsd_static": "d=4000,ot=v,st=v,su",
    "cmsd_dynamic": '"origin";rtt=40,"cdn-a";etp=96000;mb=3000;rd=12',
    "tokens": "ot=av,sf=h,st=l,nrr=\"100-200\",com.example-key=\"x\",bs,su=?0",
}


def write(out, target, seeds):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    return len(seeds)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fuzz", "seeds")
    n = 0
    for target, seeds in [
        ("request_head", REQUEST_HEAD),
        ("range", RANGE),
        ("response", RESPONSE),
        ("session_script", SESSION_SCRIPT),
        ("cmcd", CMCD),
    ]:
        n += write(out, target, seeds)
    print(f"fuzz-seeds: {n} seeds in {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
