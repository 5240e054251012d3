"""The testbed that is up, written as a topology of real sites
(`wanmpi testbed hosts -o FILE`): every node a host given by name and
address (and public address behind 1:1 NAT), every cluster's network, the
WAN links as they are. With `testbed up --ssh`, `wanmpi run -t FILE` from a
testbed node then goes through ssh exactly as on real sites.

`vpn`: the sites as a VPN tunnel between their routers joins them
(testbed/vpn.py): every network reached by routing, so private clusters are
written as public, and no cluster has relays; the hosts file of sites
joined by a VPN."""
from __future__ import annotations

from .. import units
from ..topo import Cluster, Topology
from . import ssh


class RealSitesError(ValueError):
    """The testbed cannot be written as real sites; says why."""


def _host(n) -> str:
    public = f', public = "{n.public}"' if n.public else ""
    return f'{{ host = "{n.name}", address = "{n.address}"{public} }}'


def _cluster(c: Cluster, vpn: bool = False) -> list[str]:
    if c.private and not c.nat and not c.relay_nodes and not vpn:
        raise RealSitesError(f"cluster {c.name!r} is private and has no relays: nothing outside can reach "
                             "its nodes (give it relays = N, or nat = \"1:1\")")
    lines = ["[[cluster]]", f'name = "{c.name}"', f'network = "{c.network}"',
             f'nic = "{units.format_rate(c.nic_bps)}"']
    if c.nat:
        lines.append('nat = "1:1"')
    elif c.private and not vpn:
        lines.append("private = true")
    lines.append("hosts = [\n" + "".join(f"    {_host(n)},\n" for n in c.nodes) + "]")
    if c.relay_nodes and not vpn:
        lines.append("relays = [\n" + "".join(
            f'    {{ host = "{r.name}", inside = "{r.inside}", outside = "{r.outside}" }},\n'
            for r in c.relay_nodes) + "]")
    return lines + [""]


def topology_text(t: Topology, vpn: bool = False) -> str:
    lines = [f"# The testbed built from {t.source}, as real sites: its nodes are hosts",
             "# reached over ssh (testbed up --ssh). From a testbed node, for example:",
             f"#   WANMPI_SSH={ssh.WRAPPER} wanmpi run -t THIS_FILE -n 8 PROGRAM",
             ""]
    if vpn:
        lines[-1:] = ["# Joined by a VPN tunnel between the routers: every network routed, no relays.", ""]
    for c in t.clusters:
        lines += _cluster(c, vpn)
    for link in t.links:
        lines += ["[[wan.link]]", f'clusters = ["{link.a}", "{link.b}"]',
                  f'rate = "{units.format_rate(link.rate_bps)}"',
                  f'delay = "{units.format_duration_us(link.delay_us)}"',
                  f'queue = "{units.format_size(link.queue_bytes)}"', f"loss = {link.loss!r}", ""]
    return "\n".join(lines)
