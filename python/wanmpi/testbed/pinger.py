"""ICMP echo with microsecond resolution, run inside a testbed namespace.

  python -m wanmpi.testbed.pinger ADDRESS [--count N] [--interval S] [--timeout S]
      prints one JSON line: {"rtt_ms": [...], "sent": N, "lost": L,
                             "kernel_stamped": K}

`ping` prints 0.1 ms steps above 10 ms and 1 ms steps above 100 ms: too coarse
to check the emulator's delay to 0.2 ms. It also reads the send time in user
space before sendto(), so its RTT includes the interpreter and the system call
on the way out (measured on this 2-vCPU VM: 37-44 us for this Python program on
loopback, where the kernel-to-kernel RTT is 20 us). So both ends are stamped by
the kernel with SO_TIMESTAMPING: the software transmit stamp the driver takes
as the echo request leaves (read back from the socket's error queue) and the
software receive stamp of the reply. `kernel_stamped` counts the echoes whose
transmit stamp came from the kernel; for the others (a driver that takes no
transmit stamp) the send time is read in user space just before sendto().
Needs root (raw socket).
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

SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
# linux/net_tstamp.h: software stamps on transmit (driver) and receive,
# reported as software; OPT_TSONLY: the error queue carries no packet copy.
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_RX_SOFTWARE = 1 << 3
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11
STAMPING = (SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE
            | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY)
MSG_ERRQUEUE = getattr(socket, "MSG_ERRQUEUE", 0x2000)
TX_STAMP_WAIT_S = 0.02          # a driver that stamps does so within microseconds
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


def software_stamp(ancillary: list) -> int | None:
    """Nanoseconds (CLOCK_REALTIME) of the software stamp in a SCM_TIMESTAMPING
    message: the first of its three timespecs."""
    for level, ctype, cdata in ancillary:
        if level == socket.SOL_SOCKET and ctype == SO_TIMESTAMPING and len(cdata) >= 16:
            sec, nsec = struct.unpack("qq", cdata[:16])
            if sec or nsec:
                return sec * 1_000_000_000 + nsec
    return None


def transmit_stamp(s: socket.socket) -> int | None:
    """The kernel's transmit stamp of the datagram just sent, or None."""
    deadline = time.monotonic() + TX_STAMP_WAIT_S
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [s], left)
        try:
            _, ancillary, _, _ = s.recvmsg(64, socket.CMSG_SPACE(64), MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            continue
        stamp = software_stamp(ancillary)
        if stamp is not None:
            return stamp
    return None


def ping(address: str, count: int, interval: float, timeout: float) -> dict:
    ident = os.getpid() & 0xFFFF
    rtts, lost, kernel_stamped = [], 0, 0
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, STAMPING)
        start = time.monotonic()
        for seq in range(count):
            request = echo_request(ident, seq)
            user_sent_ns = time.clock_gettime_ns(time.CLOCK_REALTIME)    # the stamps' clock
            s.sendto(request, (address, 0))
            sent_ns = transmit_stamp(s)
            if sent_ns is None:
                sent_ns = user_sent_ns
            else:
                kernel_stamped += 1
            rtt = wait_reply(s, ident, seq, sent_ns, timeout)
            if rtt is None:
                lost += 1
            else:
                rtts.append(rtt)
            pause = start + (seq + 1) * interval - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    return {"rtt_ms": rtts, "sent": count, "lost": lost, "kernel_stamped": kernel_stamped}


def wait_reply(s: socket.socket, ident: int, seq: int, sent_ns: int, timeout: float) -> float | None:
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([s], [], [], left)[0]:
            return None
        try:
            data, ancillary, _, _ = s.recvmsg(2048, socket.CMSG_SPACE(64), socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            continue                      # readable only for the error queue
        ihl = (data[0] & 0x0F) * 4
        kind, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if kind != ECHO_REPLY or rid != ident or rseq != seq:
            continue
        received_ns = software_stamp(ancillary)
        if received_ns is None:
            received_ns = time.clock_gettime_ns(time.CLOCK_REALTIME)
        return (received_ns - sent_ns) / 1e6
    return None


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m wanmpi.testbed.pinger")
    p.add_argument("address")
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--timeout", type=float, default=2.0)
    a = p.parse_args()
    print(json.dumps(ping(a.address, a.count, a.interval, a.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
