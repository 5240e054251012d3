"""One bulk transfer, run inside testbed nodes by `wanmpi bench rbudp`.

  python -m wanmpi.testbed.transfer sink --listen ADDR:PORT [--preamble] [--timeout S]
      accepts one connection (with --preamble: from a relay, whose 48-byte
      delivery preamble is read first), reads it to EOF and prints one JSON
      line: {"bytes": n, "first": t, "end": t} (CLOCK_MONOTONIC seconds: the
      same clock in every namespace of the machine).
  python -m wanmpi.testbed.transfer source --to ADDR:PORT --size N [--cc ALGO]
                                   [--via RELAY:PORT --source-ip IP] [--max-seconds S]
      connects (directly, or through a relay of its cluster with the
      connect preamble, docs/wanproto.md), sends N bytes (or for at most S
      seconds), closes, and prints {"start": t, "sent": n, "partial": bool}.
  python -m wanmpi.testbed.transfer scrape --url URL
      prints the body of an HTTP GET (a relay's metrics inside its namespace).
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import sys
import time
import urllib.request

CHUNK = 1 << 20
PREAMBLE_LEN = 48


def split_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def connect_preamble(dst: tuple[str, int], src: tuple[str, int]) -> bytes:
    """The shim's 48-byte connect preamble (IPv4), docs/wanproto.md section 1."""
    out = bytearray(PREAMBLE_LEN)
    out[0:6] = b"WSHP\x01\x01"
    out[8], out[9] = 4, 4
    out[10:12] = dst[1].to_bytes(2, "big")
    out[12:14] = src[1].to_bytes(2, "big")
    out[16:20] = ipaddress.IPv4Address(dst[0]).packed
    out[32:36] = ipaddress.IPv4Address(src[0]).packed
    return bytes(out)


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        part = s.recv(n - len(buf))
        if not part:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += part
    return buf


def sink(listen: str, preamble: bool, timeout: float) -> dict:
    host, port = split_address(listen)
    listener = socket.create_server((host, port))
    listener.settimeout(timeout)
    print("ready", file=sys.stderr, flush=True)
    conn, _ = listener.accept()
    listener.close()
    conn.settimeout(timeout)
    if preamble:
        head = recv_exact(conn, PREAMBLE_LEN)
        if head[:4] != b"WSHP" or head[5] != 2:
            raise ValueError("not a delivery preamble")
    buf = bytearray(CHUNK)
    count, first = 0, None
    while True:
        n = conn.recv_into(buf)
        if n == 0:
            break
        if first is None:
            first = time.monotonic()
        count += n
    end = time.monotonic()
    conn.close()
    return {"bytes": count, "first": first, "end": end}


def source(to: str, size: int, cc: str | None, via: str | None, source_ip: str | None,
           max_seconds: float) -> dict:
    dst = split_address(to)
    start = time.monotonic()
    if via:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((source_ip or "0.0.0.0", 0))
        s.connect(split_address(via))
        s.sendall(connect_preamble(dst, s.getsockname()))
        reply = recv_exact(s, 4)
        if reply[:3] != b"WR\x01" or reply[3] != 0:
            raise ConnectionError(f"the relay refused the connection (reason {reply[3]})")
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if cc:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        s.connect(dst)
    block = memoryview(bytes(range(256)) * (CHUNK // 256))
    sent, deadline, partial = 0, start + max_seconds, False
    while sent < size:
        if time.monotonic() > deadline:
            partial = True
            break
        n = min(CHUNK, size - sent)
        s.sendall(block[:n])
        sent += n
    s.shutdown(socket.SHUT_WR)
    # Wait for the sink's close, so the last bytes are in before we exit.
    s.settimeout(max_seconds + 60)
    while s.recv(65536):
        pass
    s.close()
    return {"start": start, "sent": sent, "partial": partial}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m wanmpi.testbed.transfer")
    sub = p.add_subparsers(dest="cmd", required=True)
    sk = sub.add_parser("sink")
    sk.add_argument("--listen", required=True)
    sk.add_argument("--preamble", action="store_true")
    sk.add_argument("--timeout", type=float, default=600)
    so = sub.add_parser("source")
    so.add_argument("--to", required=True)
    so.add_argument("--size", type=int, required=True)
    so.add_argument("--cc")
    so.add_argument("--via")
    so.add_argument("--source-ip")
    so.add_argument("--max-seconds", type=float, default=600)
    sc = sub.add_parser("scrape")
    sc.add_argument("--url", required=True)
    a = p.parse_args(argv)
    if a.cmd == "sink":
        print(json.dumps(sink(a.listen, a.preamble, a.timeout)), flush=True)
    elif a.cmd == "source":
        print(json.dumps(source(a.to, a.size, a.cc, a.via, a.source_ip, a.max_seconds)), flush=True)
    else:
        with urllib.request.urlopen(a.url, timeout=5) as r:
            sys.stdout.write(r.read().decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
