"""`wanmpi bench net`: measure every WAN link of the running testbed and print
it beside the configured values, with the error in percent.

Per link and direction (a private cluster can only be measured sending out):
  RTT         median of 20 pings between the first nodes, once the link is idle
              (nothing queued or arriving for 0.2 s), vs 2 x one-way delay
  TCP 1 flow  one node to one node, vs min(WAN rate, both NICs)
  TCP N flows N node pairs at once (N = up to 4), vs min(WAN rate, sum of NICs)
  drops       the emulator's queue and loss drops during the TCP tests
TCP goodput is also compared with its bound: the configured rate less the
headers every segment carries (52 B of IP+TCP with timestamps per MTU-sized
packet on the WAN, plus 14 B of Ethernet on a NIC).
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass

from .. import units
from ..testbed import emulator, probe
from ..topo import Cluster, Topology, WanLink
from .results import now_iso, result_document, write_json
from .runner import require_testbed

MAX_FLOWS = 4
ETHERNET_HEADER = 14


@dataclass
class LinkMeasurement:
    link: str
    what: str
    direction: str
    configured: float
    measured: float
    unit: str
    bound: float
    drops: int | None = None

    @property
    def error_percent(self) -> float:
        return 100.0 * (self.measured - self.configured) / self.configured

    @property
    def of_bound_percent(self) -> float:
        return 100.0 * self.measured / self.bound


def drop_counts() -> dict[tuple[str, str], int]:
    return {key: c["drop_queue"] + c["drop_loss"] for key, c in emulator.counters().items()}


def measure_direction(topo: Topology, link: WanLink, src: Cluster, dst: Cluster,
                      seconds: float) -> list[LinkMeasurement]:
    key = (link.name, "a_to_b" if src.name == link.a else "b_to_a")
    s0, d0 = src.nodes[0], dst.nodes[0]
    rtt = 2 * link.delay_us / 1000
    if not emulator.wait_idle(link.name):       # the flows of the other direction have drained
        print(f"wanmpi: link {link.name} still busy after 10 s; the RTT below includes its queue", file=sys.stderr)
    out = [LinkMeasurement(link.name, "RTT", f"{s0.name}->{d0.name}", rtt, probe.rtt_ms(s0.netns, d0.address), "ms",
                           rtt)]
    payload = topo.mtu - probe.TCP_IP_HEADERS
    flows = min(MAX_FLOWS, len(src.nodes), len(dst.nodes))
    for n in sorted({1, flows}):
        pairs = [(src.nodes[i].netns, dst.nodes[i].netns, dst.nodes[i].address) for i in range(n)]
        nic = n * min(src.nic_bps, dst.nic_bps)
        expected = min(link.rate_bps, nic)
        bound = min(link.rate_bps * payload / topo.mtu, nic * payload / (topo.mtu + ETHERNET_HEADER))
        before = drop_counts()[key]
        goodput = probe.tcp_flows(pairs, seconds).bits_per_s
        drops = drop_counts()[key] - before
        label = f"{s0.name}->{d0.name}" if n == 1 else f"{src.name}->{dst.name}"
        out.append(LinkMeasurement(link.name, f"TCP {n} flow{'s' if n > 1 else ''}", label,
                                   expected / 1e6, goodput / 1e6, "Mbit/s", bound / 1e6, drops))
    return out


def measure_links(topo: Topology, seconds: float) -> tuple[list[LinkMeasurement], list[str]]:
    results, skipped = [], []
    for link in topo.links:
        a, b = topo.cluster(link.a), topo.cluster(link.b)
        for src, dst in ((a, b), (b, a)):
            if dst.private:
                skipped.append(f"{link.name} {src.name}->{dst.name}: {dst.name} is private "
                               "(nothing can connect into it)")
                continue
            results += measure_direction(topo, link, src, dst, seconds)
    return results, skipped


def run(topo: Topology, seconds: float = 3.0, json_path: str | None = None) -> int:
    require_testbed(topo)
    started, t0 = now_iso(), time.monotonic()
    results, skipped = measure_links(topo, seconds)
    print_table(topo, results, skipped)
    if json_path:       # the result format (results.py); the measurements are its summary
        rows = [{**asdict(r), "error_percent": r.error_percent, "of_bound_percent": r.of_bound_percent}
                for r in results]
        write_json(json_path, result_document("net", topo, {"seconds": seconds, "skipped": skipped}, [], rows,
                                              started, time.monotonic() - t0))
    return 0


def print_table(topo: Topology, results: list[LinkMeasurement], skipped: list[str]) -> None:
    for link in topo.links:
        print(f"link {link.name}: {units.format_rate(link.rate_bps)}, "
              f"{units.format_duration_us(link.delay_us)} one-way, queue "
              f"{units.format_size(link.queue_bytes)}, loss {link.loss:g}")
        print(f"  {'measurement':<12} {'direction':<10} {'configured':>15} {'measured':>15} "
              f"{'error':>8} {'bound':>8} {'of bound':>8} {'drops':>6}")
        for r in results:
            if r.link != link.name:
                continue
            drops = "" if r.drops is None else str(r.drops)
            print(f"  {r.what:<12} {r.direction:<10} {r.configured:>8.2f} {r.unit:<6} "
                  f"{r.measured:>8.2f} {r.unit:<6} {r.error_percent:>+7.1f}% {r.bound:>8.2f} "
                  f"{r.of_bound_percent:>7.1f}% {drops:>6}")
    for s in skipped:
        print(f"  skipped {s}")
    print("configured: RTT = 2 x one-way delay, throughput = min(WAN rate, NICs); "
          "bound: the most TCP can carry (headers deducted)")
