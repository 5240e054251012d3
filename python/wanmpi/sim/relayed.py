"""A topology with relays as a SimGrid platform: every connection between two
clusters goes through a relay of each (wanrelay's split TCP, as libwanshim
sends it), so the relays' NICs carry all the traffic between clusters.

SimGrid's <cluster> routes every host of a cluster through one gateway, so a
relayed platform lists its hosts and every route between two of them in one
zone (routing="Full"): hosts {c}{i} with their SPLITDUPLEX link as in
platform.py, and per relay {c}-relay{k} two SPLITDUPLEX links at its NIC rate
and the platform's host-link latency, its inside interface (on the cluster's
LAN) and its outside one (toward the router), as on the testbed. A
connection from node i of cluster a to node j of cluster b takes relay
k = j mod N_a of a (libwanshim: the relay by the destination's address, the
IMPI relay paper's trunking scheme #1) and its peer k mod N_b of b (relay k
pairs with relay k of every other cluster):

    a{i} UP, a-relay{k}-in DOWN, a-relay{k}-out UP, WAN links,
    b-relay{k'}-out DOWN, b-relay{k'}-in UP, b{j} DOWN

Not modelled: the relay's own processing (wanrelay adds 8-25 us per relay,
docs/benchmarks.md), its pacing, trunk connections' windows (the platform's
are tuned: platform.TCP_WINDOW). A Full zone holds a route per ordered pair
of hosts, so relayed platforms stop at MAX_HOSTS.
"""
from __future__ import annotations

from ..topo import Cluster, Topology

MAX_HOSTS = 256                     # 65,280 routes


def relay_links(c: Cluster, k: int) -> tuple[str, str]:
    """The inside and outside links of relay k of cluster c."""
    return f"{c.name}-relay{k}-in", f"{c.name}-relay{k}-out"


def hops(src: Cluster, i: int, dst: Cluster, j: int, wan: list) -> list[tuple[str, str]]:
    """(link, direction) from node i of src to node j of dst; `wan` the WAN
    links between the clusters with their directions (platform.route)."""
    path = [(src.nodes[i].name, "UP")]
    if src is not dst:
        k = j % len(src.relay_nodes)
        inside, outside = relay_links(src, k)
        path += [(inside, "DOWN"), (outside, "UP")]
        path += [(f"wan-{l.name}", d) for l, d in wan]
        inside, outside = relay_links(dst, k % len(dst.relay_nodes))
        path += [(outside, "DOWN"), (inside, "UP")]
    path.append((dst.nodes[j].name, "DOWN"))
    return path


def zone(t: Topology, nic_latency_us: int, host_speed: str, route) -> list[str]:
    """The lines of the Full zone: hosts, links, one route per ordered pair
    of hosts (`route(t, a, b)`: the WAN links from cluster a to b)."""
    lines = ['<zone id="world" routing="Full">']
    for c in t.clusters:
        for n in c.nodes:
            lines.append(f'  <host id="{n.name}" speed="{host_speed}"/>')
    for c in t.clusters:
        for n in c.nodes:
            lines.append(f'  <link id="{n.name}" bandwidth="{c.nic_bps}bps" latency="{nic_latency_us}us" '
                         'sharing_policy="SPLITDUPLEX"/>')
        for r in c.relay_nodes:
            for name in relay_links(c, r.index):
                lines.append(f'  <link id="{name}" bandwidth="{r.nic_bps}bps" latency="{nic_latency_us}us" '
                             'sharing_policy="SPLITDUPLEX"/>')
    for l in t.links:
        lines.append(f'  <link id="wan-{l.name}" bandwidth="{l.rate_bps}bps" latency="{l.delay_us}us" '
                     'sharing_policy="SPLITDUPLEX"/>')
    for a in t.clusters:
        for b in t.clusters:
            wan = [] if a is b else route(t, a.name, b.name)
            for i, src in enumerate(a.nodes):
                for j, dst in enumerate(b.nodes):
                    if src is dst:
                        continue
                    links = "".join(f'<link_ctn id="{name}" direction="{d}"/>'
                                    for name, d in hops(a, i, b, j, wan))
                    lines.append(f'  <route src="{src.name}" dst="{dst.name}" symmetrical="NO">{links}</route>')
    lines.append("</zone>")
    return lines
