"""A TCP throughput probe run inside testbed nodes by `wanmpi bench net`.

  python -m wanmpi.testbed.flow serve --port P [--connections N] [--warmup W]
      accepts N connections, reads each to EOF, then prints one JSON line:
      {"bytes": total, "seconds": first byte to last byte,
       "steady_bytes": bytes received W seconds or more after the first byte,
       "steady_seconds": from then to the last byte}
  python -m wanmpi.testbed.flow send --host H --port P --seconds S [--cc ALGO]
      sends as fast as TCP allows for S seconds, then closes.
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time

CHUNK = 256 * 1024


def serve(port: int, connections: int, timeout: float, warmup: float = 0.0) -> dict:
    listener = socket.create_server(("0.0.0.0", port), backlog=connections)
    listener.settimeout(timeout)
    totals, steadies, firsts, lasts = [], [], [], []
    lock = threading.Lock()
    steady_from: list[float] = []         # first byte of any connection + warmup

    def drain(conn: socket.socket) -> None:
        count, steady, first, last = 0, 0, None, None
        buf = bytearray(CHUNK)
        with conn:
            conn.settimeout(timeout)
            while True:
                n = conn.recv_into(buf)
                if n == 0:
                    break
                last = time.monotonic()
                if first is None:
                    first = last
                    with lock:
                        if not steady_from:
                            steady_from.append(first + warmup)
                count += n
                if last >= steady_from[0]:
                    steady += n
        with lock:
            totals.append(count)
            steadies.append(steady)
            if first is not None:
                firsts.append(first)
                lasts.append(last)

    threads = []
    for _ in range(connections):
        conn, _ = listener.accept()
        t = threading.Thread(target=drain, args=(conn,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    listener.close()
    span = max(lasts) - min(firsts) if firsts else 0.0
    steady_span = max(0.0, max(lasts) - steady_from[0]) if firsts else 0.0
    return {"bytes": sum(totals), "seconds": span,
            "steady_bytes": sum(steadies), "steady_seconds": steady_span}


def send(host: str, port: int, seconds: float, cc: str | None) -> None:
    deadline = time.monotonic() + 5
    while True:
        try:
            s = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    if cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    payload = bytes(CHUNK)
    end = time.monotonic() + seconds
    with s:
        while time.monotonic() < end:
            s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m wanmpi.testbed.flow")
    sub = p.add_subparsers(dest="role", required=True)
    sv = sub.add_parser("serve")
    sv.add_argument("--port", type=int, required=True)
    sv.add_argument("--connections", type=int, default=1)
    sv.add_argument("--timeout", type=float, default=60)
    sv.add_argument("--warmup", type=float, default=0.0,
                    help="seconds after the first byte before steady_bytes start counting")
    sd = sub.add_parser("send")
    sd.add_argument("--host", required=True)
    sd.add_argument("--port", type=int, required=True)
    sd.add_argument("--seconds", type=float, default=3)
    sd.add_argument("--cc", help="congestion control algorithm for this flow")
    a = p.parse_args()
    if a.role == "serve":
        print(json.dumps(serve(a.port, a.connections, a.timeout, a.warmup)), flush=True)
    else:
        send(a.host, a.port, a.seconds, a.cc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
