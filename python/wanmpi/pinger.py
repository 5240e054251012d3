"""ICMP echo with microsecond resolution, run inside a testbed namespace.

  python -m wanmpi.pinger ADDRESS [--count N] [--interval S] [--timeout S]
      prints one JSON line: {"rtt_ms": [...], "sent": N, "lost": L}

`ping` prints 0.1 ms steps above 10 ms and 1 ms steps above 100 ms: too coarse
to check the emulator's delay to 0.2 ms. This does what ping does (a raw ICMP
socket, the send time read just before sending, the receive time stamped by
the kernel with SO_TIMESTAMPNS) and keeps every digit. Needs root (raw socket).
"""
from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
ECHO_REQUEST, ECHO_REPLY = 8, 0
PAYLOAD = bytes(range(56))            # ping's default 56 bytes: 84-byte IP packets


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def echo_request(ident: int, seq: int) -> bytes:
    header = struct.pack("!BBHHH", ECHO_REQUEST, 0, 0, ident, seq)
    return struct.pack("!BBHHH", ECHO_REQUEST, 0, checksum(header + PAYLOAD), ident, seq) + PAYLOAD


def ping(address: str, count: int, interval: float, timeout: float) -> dict:
    ident = os.getpid() & 0xFFFF
    rtts, lost = [], 0
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        start = time.monotonic()
        for seq in range(count):
            sent_ns = time.clock_gettime_ns(time.CLOCK_REALTIME)     # SO_TIMESTAMPNS's clock
            s.sendto(echo_request(ident, seq), (address, 0))
            rtt = wait_reply(s, ident, seq, sent_ns, timeout)
            if rtt is None:
                lost += 1
            else:
                rtts.append(rtt)
            pause = start + (seq + 1) * interval - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    return {"rtt_ms": rtts, "sent": count, "lost": lost}


def wait_reply(s: socket.socket, ident: int, seq: int, sent_ns: int, timeout: float) -> float | None:
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([s], [], [], left)[0]:
            return None
        data, ancillary, _, _ = s.recvmsg(2048, socket.CMSG_SPACE(16))
        ihl = (data[0] & 0x0F) * 4
        kind, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if kind != ECHO_REPLY or rid != ident or rseq != seq:
            continue
        received_ns = None
        for level, ctype, cdata in ancillary:
            if level == socket.SOL_SOCKET and ctype == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", cdata[:16])
                received_ns = sec * 1_000_000_000 + nsec
        if received_ns is None:
            received_ns = time.clock_gettime_ns(time.CLOCK_REALTIME)
        return (received_ns - sent_ns) / 1e6
    return None


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m wanmpi.pinger")
    p.add_argument("address")
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--timeout", type=float, default=2.0)
    a = p.parse_args()
    print(json.dumps(ping(a.address, a.count, a.interval, a.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
