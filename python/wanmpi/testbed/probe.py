"""Measurement probes shared by the benchmarks (`bench net`, `bench emulator`),
run inside the testbed's namespaces:

  ping        RTT samples between two namespaces
  TCP flows   wanmpi.testbed.flow senders and receivers, with a chosen congestion control
  UDP probe   udpprobe (crates/udpprobe): paced, sequence-numbered datagrams
  counters    a namespace's interface and UDP drop counters, the CPU's idle share
"""
from __future__ import annotations

import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from .. import paths, shell
from . import net

TCP_PORT = 5201
TCP_IP_HEADERS = 52             # IPv4 + TCP with timestamps: a full segment carries MTU - 52 bytes
UDP_PORT = 5301
# Probes run at a higher CPU priority than whatever else the machine runs, so
# they measure the network, not the competition for CPU (wanem itself runs at
# real-time priority on a CPU of its own: docs/testbed.md).
HARNESS = ["nice", "-n", "-10"]


class ProbeError(net.TestbedError):
    """A probe could not run or its output could not be read."""


# ---- ping ------------------------------------------------------------------------------
def rtt_samples_ms(src_ns: str, address: str, count: int = 20, interval: float = 0.05) -> list[float]:
    """Sorted RTTs of `count` ICMP echoes (wanmpi.testbed.pinger: microseconds, where
    ping rounds to 0.1 ms), after one that warms up neighbour tables."""
    pinger = [*HARNESS, sys.executable, "-m", "wanmpi.testbed.pinger", address, "--interval", str(interval)]
    shell.run(net.in_netns(src_ns, [*pinger, "--count", "1"]), check=False)
    done = shell.run(net.in_netns(src_ns, [*pinger, "--count", str(count)]),
                     timeout=30 + count * (interval + 2), check=False)
    try:
        times = sorted(json.loads(done.stdout)["rtt_ms"])
    except (json.JSONDecodeError, KeyError):
        times = []
    if not times:
        raise ProbeError(f"ping {address} from {src_ns} got no answer: {(done.stdout + done.stderr).strip()[-200:]}")
    return times


def rtt_ms(src_ns: str, address: str, count: int = 20) -> float:
    """Median RTT of `count` pings."""
    return statistics.median(rtt_samples_ms(src_ns, address, count))


# ---- TCP ---------------------------------------------------------------------------------
@dataclass
class FlowResult:
    bits_per_s: float            # all flows together, first byte to last
    steady_bits_per_s: float     # after the warm-up


def tcp_flows(pairs: list[tuple[str, str, str]], seconds: float, cc: str | None = None,
              warmup: float = 0.0, between=None) -> FlowResult:
    """Flows (sender netns, receiver netns, receiver address) run at once, each to
    its own port; each sends for warmup + seconds with congestion control `cc`
    (None: the namespace's default). `between(event)` is called with "start"
    when the warm-up is over and "end" when the senders are done."""
    flow = [*HARNESS, sys.executable, "-m", "wanmpi.testbed.flow"]
    servers = [subprocess.Popen(net.in_netns(dst, [*flow, "serve", "--port", str(TCP_PORT + i),
                                                   "--warmup", str(warmup)]),
                                stdout=subprocess.PIPE, text=True) for i, (_, dst, _) in enumerate(pairs)]
    senders = []
    try:
        senders = [subprocess.Popen(net.in_netns(src, [*flow, "send", "--host", addr, "--port", str(TCP_PORT + i),
                                                       "--seconds", str(warmup + seconds),
                                                       *(["--cc", cc] if cc else [])]),
                                    stderr=subprocess.PIPE, text=True)
                   for i, (src, _, addr) in enumerate(pairs)]
        if between:
            time.sleep(warmup)
            between("start")
        for s in senders:
            _, err = s.communicate(timeout=warmup + seconds + 30)
            if s.returncode != 0:
                raise ProbeError(f"TCP sender failed (exit {s.returncode}): {err.strip()[-300:]}")
        if between:
            between("end")
        results = [json.loads(s.communicate(timeout=30)[0]) for s in servers]
    finally:
        for p in senders + servers:
            if p.poll() is None:
                p.kill()
                p.wait()
    span = max(r["seconds"] for r in results)
    steady = max(r["steady_seconds"] for r in results)
    return FlowResult(8 * sum(r["bytes"] for r in results) / span if span > 0 else 0.0,
                      8 * sum(r["steady_bytes"] for r in results) / steady if steady > 0 else 0.0)


# ---- UDP ---------------------------------------------------------------------------------
def udp_probe(src_ns: str, dst_ns: str, dst_address: str, payload: int, *, pps: float | None = None,
              seconds: float | None = None, count: int | None = None, gso: bool = False,
              between=None) -> tuple[dict, dict]:
    """Send sequence-numbered datagrams of `payload` bytes from src_ns to dst_ns
    (paced to `pps`, else as fast as possible; for `seconds` or `count` packets)
    and count what arrives. `between(event)` is called with "start" just before
    the sender starts and "end" just after it ends. Returns the sender's and the
    receiver's JSON reports (crates/udpprobe)."""
    if not paths.UDPPROBE.is_file():
        raise ProbeError(f"the UDP probe {paths.UDPPROBE} is not built (run `make build`)")
    run_id = str(secrets.randbits(63))
    recv = subprocess.Popen(net.in_netns(dst_ns, [*HARNESS, str(paths.UDPPROBE), "recv", "--bind", f"{dst_address}:{UDP_PORT}",
                                                  "--run", run_id, "--wait", "10", "--idle", "0.5"]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = recv.stdout.readline()
        if '"ready"' not in ready:
            raise ProbeError(f"UDP probe receiver did not start: {recv.communicate(timeout=5)[1].strip()[-300:]}")
        argv = [*HARNESS, str(paths.UDPPROBE), "send", "--to", f"{dst_address}:{UDP_PORT}", "--size", str(payload),
                "--run", run_id, "--gso", "on" if gso else "off"]
        argv += ["--pps", f"{pps:.0f}"] if pps else []
        argv += ["--seconds", str(seconds)] if seconds else []
        argv += ["--count", str(count)] if count else []
        if between:
            between("start")
        sent = shell.run(net.in_netns(src_ns, argv), timeout=(seconds or 0) + (count or 0) / (pps or 1e4) + 60)
        if between:
            between("end")
        out, err = recv.communicate(timeout=30)
        if recv.returncode != 0:
            raise ProbeError(f"UDP probe receiver failed: {err.strip()[-300:]}")
        return json.loads(sent.stdout), json.loads(out)
    except (shell.CommandError, json.JSONDecodeError, subprocess.TimeoutExpired) as e:
        raise ProbeError(f"UDP probe: {e}") from None
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()


# ---- counters ----------------------------------------------------------------------------
def tx_dropped(netns: str, dev: str) -> int:
    """Packets the device refused to transmit (for a TUN device: its reader was too slow)."""
    out = shell.output(["ip", "-n", netns, "-s", "-j", "link", "show", "dev", dev])
    return int(json.loads(out)[0]["stats64"]["tx"]["dropped"])


def udp_receive_errors(netns: str) -> int:
    """UDP datagrams the namespace dropped on receive (socket buffer full, bad checksum)."""
    lines = [l.split() for l in shell.output(net.in_netns(netns, ["cat", "/proc/net/snmp"])).splitlines()
             if l.startswith("Udp:")]
    fields = dict(zip(lines[0][1:], (int(v) for v in lines[1][1:])))
    return fields["InErrors"]


def cpu_ticks() -> dict[str, list[int]]:
    """Jiffies per CPU line of /proc/stat ("cpu" = all): user, nice, system,
    idle, iowait, irq, softirq, steal."""
    with open("/proc/stat") as f:
        return {line.split()[0]: [int(v) for v in line.split()[1:9]] for line in f if line.startswith("cpu")}


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
