"""A topology as a SimGrid platform (platform v4.1, SimGrid 3.32), from the
topology file read by wanmpi.topo: one source of truth.

Naming (the same names as the testbed, docs/testbed.md):
  cluster c   a SimGrid <cluster> with id c; host {c}{i} for node i, each with
              a private SPLITDUPLEX link at the cluster's NIC rate (each
              direction the full rate) and NIC_LATENCY_US; no backbone: the
              switch is non-blocking (the testbed's bridge never limits; a
              FATPIPE backbone at 100 x the NIC rate gave the same times to
              4-5 digits and made SimGrid's solver 3-5x slower, every flow of
              a cluster sharing it); the router {c}-r is the cluster's gateway
  WAN link    one SPLITDUPLEX link wan-{a}-{b} per link of the file, at its
              rate and one-way delay; direction UP carries a -> b
  routes      for every ordered pair of clusters, a zoneRoute between their
              routers over the links of the topology's shortest path
              (Topology.next_hops, as the testbed routes)
  relays      a topology with relays (its own, or --relays): relayed.py, every
              route between two clusters through a relay of each
Not modelled: port buffers, WAN queues and loss (SimGrid's flow model has no
packets), the shim's pacing (docs/scale.md, B5).

One rank per node, in cluster order (the hostfile); `rank_clusters` tells
libwanmpi which cluster each rank is in (SMPI ranks have no addresses).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..topo import Node, Relay, Topology, WanLink
from ..topo.reader import MAX_RELAYS_PER_CLUSTER
from . import relayed

# SimGrid caps every flow at TCP-gamma / RTT (a 4 MiB window by default:
# 1.66 Gbit/s at 10 ms one way), per message, not per connection: one large
# message (an MPI algorithm's) was held to it where a pipeline of small ones
# (ours) was not. Real hosts on a long fast WAN are tuned to windows of the
# bandwidth-delay product; this covers 100 Gbit/s at 30 ms one way (750 MB).
TCP_WINDOW = 1 << 30
NIC_LATENCY_US = 50                 # a host's link to its switch, by default (the feasibility study's value)
HOST_SPEED = "1Gf"                  # flop/s; computation is not modelled (docs/scale.md, "CPU time")
MAX_NODES_PER_CLUSTER = 1024        # the simulator's own limit (the testbed's is 200: one /24)


class PlatformError(ValueError):
    """A topology or override the simulator cannot use; the message names it."""


@dataclass(frozen=True)
class Overrides:
    """`wanmpi sim`'s changes to the topology file; None: the file's value."""
    nodes_per_cluster: int | None = None
    nic_bps: int | None = None
    wan_bps: int | None = None
    delay_us: int | None = None
    nic_latency_us: int | None = None       # one way, each host's link to its switch (a hop: twice)
    relays: int | None = None               # per cluster (0: none, every connection direct)
    relay_nic_bps: int | None = None        # every relay's two NICs

    def __post_init__(self):
        n = self.nodes_per_cluster
        if n is not None and not 1 <= n <= MAX_NODES_PER_CLUSTER:
            raise PlatformError(f"--nodes-per-cluster: {n} is outside [1, {MAX_NODES_PER_CLUSTER}]")
        if self.relays is not None and not 0 <= self.relays <= MAX_RELAYS_PER_CLUSTER:
            raise PlatformError(f"--relays: {self.relays} is outside [0, {MAX_RELAYS_PER_CLUSTER}]")

    @property
    def nic_latency(self) -> int:
        return NIC_LATENCY_US if self.nic_latency_us is None else self.nic_latency_us

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def simulated(t: Topology, o: Overrides) -> Topology:
    """The topology with the overrides applied to every cluster and WAN link."""
    clusters = []
    for c in t.clusters:
        nodes = c.nodes
        if o.nodes_per_cluster is not None:
            nodes = tuple(Node(f"{c.name}{i}", c.name, i, "") for i in range(o.nodes_per_cluster))
        nic = o.nic_bps or c.nic_bps
        clusters.append(replace(c, nodes=nodes, nic_bps=nic, **relays_of(c, o, nic)))
    links = tuple(replace(l, rate_bps=o.wan_bps or l.rate_bps,
                          delay_us=l.delay_us if o.delay_us is None else o.delay_us) for l in t.links)
    return replace(t, clusters=tuple(clusters), links=links)


def relays_of(c, o: Overrides, nic: int) -> dict:
    """The cluster's relays after the overrides: --relays N of them (none: the
    file's), each at --relay-nic, else the file's relays' rate (--nic-rate
    leaves it), else, in a cluster the file gives none, the NIC's; neither
    override: the file's relays as they are."""
    if o.relays is None and o.relay_nic_bps is None:
        return {}
    count = c.relays if o.relays is None else o.relays
    rate = o.relay_nic_bps or (c.relay_nodes[0].nic_bps if c.relay_nodes else nic)
    return {"relays": count, "relay_nodes": tuple(Relay(f"{c.name}-relay{k}", c.name, k, "", "", rate)
                                                  for k in range(count))}


def route(t: Topology, src: str, dst: str) -> list[tuple[WanLink, str]]:
    """The WAN links from cluster `src` to `dst`, each with its direction
    (UP: from its a to its b)."""
    hops, here = [], src
    while here != dst:
        link = t.next_hops(here).get(dst)
        if link is None:
            raise PlatformError(f"{t.source}: wan: no WAN route from cluster {src!r} to {dst!r}")
        hops.append((link, "UP" if link.a == here else "DOWN"))
        here = link.b if link.a == here else link.a
    return hops


def check_routes(t: Topology) -> None:
    """Every ordered pair of clusters has a WAN route, and a relayed platform
    is small enough to list every route (PlatformError names the problem)."""
    if t.has_relays and len(t.nodes) > relayed.MAX_HOSTS:
        raise PlatformError(f"{len(t.nodes)} nodes with relays: a relayed platform lists a route per pair of "
                            f"nodes, at most {relayed.MAX_HOSTS} nodes")
    for a in t.clusters:
        for b in t.clusters:
            route(t, a.name, b.name)


def hop_latency_us(nic_latency_us: int) -> int:
    """The latency between two ranks of a cluster on the platform: two host
    links (WANMPI_LAN_LATENCY for libwanmpi's chain-or-tree choice)."""
    return 2 * nic_latency_us


def path_latency_s(nic_latency_us: int) -> float:
    """What a route between two clusters adds to the WAN's latency: the two
    hosts' links (the lower bound's path latency, bench/bounds.py)."""
    return hop_latency_us(nic_latency_us) * 1e-6


def platform_xml(t: Topology, nic_latency_us: int = NIC_LATENCY_US) -> str:
    lines = ['<?xml version="1.0"?>', '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
             f"<!-- generated by wanmpi sim from {t.source} -->", '<platform version="4.1">']
    if t.has_relays:
        return "\n".join(lines + relayed.zone(t, nic_latency_us, HOST_SPEED, route) + ["</platform>"]) + "\n"
    lines.append('<zone id="world" routing="Full">')
    for c in t.clusters:
        lines.append(f'  <cluster id="{c.name}" prefix="{c.name}" suffix="" radical="0-{len(c.nodes) - 1}" '
                     f'speed="{HOST_SPEED}" bw="{c.nic_bps}bps" lat="{nic_latency_us}us" '
                     'sharing_policy="SPLITDUPLEX" '
                     f'router_id="{c.router}"/>')
    for l in t.links:
        lines.append(f'  <link id="wan-{l.name}" bandwidth="{l.rate_bps}bps" latency="{l.delay_us}us" '
                     'sharing_policy="SPLITDUPLEX"/>')
    for a in t.clusters:
        for b in t.clusters:
            if a is b:
                continue
            # symmetrical="NO" both ways: the return route is listed on its own
            hops = "".join(f'<link_ctn id="wan-{l.name}" direction="{d}"/>' for l, d in route(t, a.name, b.name))
            lines.append(f'  <zoneRoute src="{a.name}" dst="{b.name}" gw_src="{a.router}" gw_dst="{b.router}" '
                         f'symmetrical="NO">{hops}</zoneRoute>')
    lines += ["</zone>", "</platform>"]
    return "\n".join(lines) + "\n"


def hostfile(t: Topology) -> str:
    """One line per rank: every node once, in cluster order."""
    return "".join(f"{n.name}\n" for n in t.nodes)


def rank_clusters(t: Topology) -> str:
    """WANMPI_RANK_CLUSTERS ("a:0-3;b:4-7") for one rank per node in cluster order."""
    parts, first = [], 0
    for c in t.clusters:
        parts.append(f"{c.name}:{first}-{first + len(c.nodes) - 1}")
        first += len(c.nodes)
    return ";".join(parts)


def write(t: Topology, directory: Path, nic_latency_us: int = NIC_LATENCY_US) -> tuple[Path, Path]:
    """platform.xml and hostfile in `directory`; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    xml, hosts = directory / "platform.xml", directory / "hostfile"
    xml.write_text(platform_xml(t, nic_latency_us))
    hosts.write_text(hostfile(t))
    return xml, hosts
