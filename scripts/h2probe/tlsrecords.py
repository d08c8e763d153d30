#!/usr/bin/python3
"""The sizes of the TLS records `vodlab serve` sends, seen on the wire.

Speaks TLS through ssl.MemoryBIO so the raw bytes from the socket can be
read before they are decrypted: every record header (type, length) is
visible even though the payload is encrypted. Over one connection (ALPN
http/1.1) it fetches PATH, waits PAUSE seconds, and fetches it again; it
prints one JSON object: {"responses": [[len, len, ...], [...]]}, the
application-data record lengths (ciphertext: plaintext + 17 bytes with
TLS 1.3's AES-GCM or ChaCha20 tag and content type) of each response.

Usage: tlsrecords.py HOST PORT PATH [PAUSE]
"""

import json
import socket
import ssl
import sys
import time


def main(argv):
    host, port, path = argv[1], int(argv[2]), argv[3]
    pause = float(argv[4]) if len(argv) > 4 else 0.0
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    sock = socket.create_connection((host, port), timeout=10)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname=host)
    raw = bytearray()  # raw bytes not yet split into records
    records = []  # application-data record lengths since the last reset

    def pump_out():
        data = out.read()
        if data:
            sock.sendall(data)

    def pump_in():
        b = sock.recv(1 << 20)
        if not b:
            raise EOFError("server closed")
        raw.extend(b)
        while len(raw) >= 5:
            n = (raw[3] << 8) | raw[4]
            if len(raw) < 5 + n:
                break
            if raw[0] == 23:
                records.append(n)
            del raw[:5 + n]
        inc.write(b)

    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            pump_out()
            pump_in()
    pump_out()
    responses = []
    for i in range(2):
        if i and pause:
            time.sleep(pause)
        records.clear()
        tls.write(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host)).encode())
        pump_out()
        body = bytearray()
        head = None
        length = None
        while length is None or len(body) < length:
            try:
                chunk = tls.read(1 << 20)
            except ssl.SSLWantReadError:
                pump_out()
                pump_in()
                continue
            if head is None:
                body.extend(chunk)
                if b"\r\n\r\n" in body:
                    head, rest = bytes(body).split(b"\r\n\r\n", 1)
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    body = bytearray(rest)
            else:
                body.extend(chunk)
        # (the first response's list also holds the TLS 1.3 session tickets, small records)
        responses.append(list(records))
    print(json.dumps({"responses": responses}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
