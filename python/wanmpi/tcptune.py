"""What a topology asks of TCP: the WAN paths between clusters, their
bandwidth-delay products, and the socket buffer limits that let one
connection fill the longest, fastest of them.

The testbed applies the limits to its nodes (testbed/net.py); `wanmpi
doctor` checks a node's settings against them (job/doctor.py). Nothing here
touches the system.

Buffer limit = BUFFER_BDP_FACTOR x the largest bandwidth-delay product (path
rate x round-trip time) from a node's cluster, where the path rate is the
slowest of its WAN links and the NICs at both ends (one connection runs from
one node to one node). Two BDPs because Linux gives
only part of a socket's receive buffer to the window (tcp_adv_win_scale = 1:
half), and the send buffer holds the data in flight plus what waits to be
sent. A limit is only ever raised: the kernel's own (the floor) stays if it
is larger.
"""
from __future__ import annotations

from dataclasses import dataclass

from .topo import Topology, WanLink

BUFFER_BDP_FACTOR = 2
# Per-namespace sysctls that bound TCP's buffer autotuning ("min default max").
TCP_BUFFER_SYSCTLS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
# Bounds of SO_RCVBUF / SO_SNDBUF set by applications (read-only outside the
# host's namespace since Linux 6.x: one value for every namespace).
CORE_BUFFER_SYSCTLS = ("net.core.rmem_max", "net.core.wmem_max")


@dataclass(frozen=True)
class WanPath:
    """The route from a node of one cluster to a node of another, over one or more WAN links."""
    source: str
    dest: str
    links: tuple[WanLink, ...]
    nic_bps: int                 # the slower NIC of the two ends

    @property
    def rate_bps(self) -> int:
        return min(self.nic_bps, *(l.rate_bps for l in self.links))

    @property
    def rtt_us(self) -> int:
        """Round-trip propagation delay (no queueing)."""
        return 2 * sum(l.delay_us for l in self.links)

    @property
    def bdp_bytes(self) -> int:
        return self.rate_bps * self.rtt_us // 8_000_000

    @property
    def name(self) -> str:
        return f"{self.source}->{self.dest}" + (f" (via {', '.join(l.name for l in self.links)})"
                                                if len(self.links) > 1 else "")


def wan_paths(topo: Topology, source: str | None = None) -> list[WanPath]:
    """Every path from `source` (default: every cluster) to each other cluster,
    along the routes the testbed sets up (fewest links, topo.next_hops)."""
    paths = []
    for c in topo.clusters:
        if source is not None and c.name != source:
            continue
        for dest in topo.next_hops(c.name):
            links, here = [], c.name
            while here != dest and len(links) <= len(topo.clusters):
                link = topo.next_hops(here)[dest]
                links.append(link)
                here = link.b if link.a == here else link.a
            nic = min(c.nic_bps, topo.cluster(dest).nic_bps)
            paths.append(WanPath(c.name, dest, tuple(links), nic))
    return paths


def largest_path(topo: Topology, source: str | None = None) -> WanPath | None:
    """The path with the largest bandwidth-delay product (None: a single cluster)."""
    paths = wan_paths(topo, source)
    return max(paths, key=lambda p: p.bdp_bytes) if paths else None


def buffer_limit(topo: Topology, source: str | None = None) -> int:
    """Bytes a socket buffer must be allowed to grow to for one connection to
    fill the largest path from `source` (default: from any cluster)."""
    path = largest_path(topo, source)
    return BUFFER_BDP_FACTOR * path.bdp_bytes if path else 0


def parse_triple(value: str) -> tuple[int, int, int] | None:
    """'4096 131072 6291456' (tcp_rmem, tcp_wmem) -> (min, default, max); None if malformed."""
    parts = value.split()
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def raised_triple(value: str, limit: int) -> str | None:
    """The tcp_rmem/tcp_wmem value with its max raised to `limit`; None if it
    is already at least that (or malformed)."""
    triple = parse_triple(value)
    if triple is None or triple[2] >= limit:
        return None
    return f"{triple[0]} {triple[1]} {limit}"
