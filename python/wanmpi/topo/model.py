"""The topology as pure data: clusters, their nodes and relays, WAN links and
the settings of libwanmpi, libwanshim and the relays. Nothing here reads a
file or touches the system (reader.py reads and checks the file).

Naming and addressing are derived from indices (documented in docs/testbed.md):
  cluster c (index ci)  LAN 198.18.ci.0/24 (public) or 10.ci.0.0/24 (private)
  node      {c}{i}      address .i+1 of the LAN, netns wm-{c}{i}, interface eth0
  router    {c}-r       LAN address .254, public address 198.19.0.ci+1
  relay     {c}-relay{k} inside address .220+k of the LAN, outside address
                        198.19.(ci+1).(k+1) on the router's relay network
  1:1 NAT   node {c}{i} of a nat = "1:1" cluster: public address 198.19.(128+ci).(i+1),
                        translated by its router
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

NETNS_PREFIX = "wm-"
COLLECTIVES = ("bcast", "allreduce", "reduce", "allgather", "allgatherv", "reduce_scatter_block", "barrier",
               "gather", "gatherv", "scatter", "scatterv", "scan", "exscan", "reduce_scatter")
ALLTOALLS = ("alltoall", "alltoallv", "alltoallw")  # rate-managed (lib/src/coll/alltoall.c, alltoallw.c)
UNPACED = ("alltoallw",)                           # scheduled or mpi: no paced algorithm
RELAY_INSIDE_PORT = 7400            # where a relay takes its cluster's connections
RELAY_OUTSIDE_PORT = 7401           # where it takes its peer relays' trunks
RELAY_METRICS_PORT = 9464           # its Prometheus counters (docs/wanrelay.md)
UDP_IP_HEADERS = 28                 # IPv4 + UDP: the largest datagram payload is MTU - 28


class TopologyError(ValueError):
    """A topology that cannot be used; str() is 'FILE: KEY: PROBLEM'."""

    def __init__(self, source: str, key: str, problem: str):
        super().__init__(f"{source}: {key}: {problem}" if key else f"{source}: {problem}")
        self.source, self.key, self.problem = source, key, problem


@dataclass(frozen=True)
class Node:
    name: str
    cluster: str
    index: int
    address: str            # IPv4 address inside its cluster (a real host's name if not given)
    emulated: bool = True
    slots: int = 1          # ranks the node takes before the next one gets any (real hosts)
    public: str | None = None   # 1:1 NAT: the address other clusters reach it at

    @property
    def netns(self) -> str:
        return NETNS_PREFIX + self.name


@dataclass(frozen=True)
class Relay:
    """A relay node (wanrelay): an inside interface on the cluster's LAN and an
    outside one the other clusters' relays reach (on the testbed, the router's
    relay network; on real sites, a host named in the topology)."""
    name: str
    cluster: str
    index: int
    inside: str             # address on the cluster's LAN
    outside: str            # address on the router's relay network (public)
    nic_bps: int            # each of its two interfaces
    host: str | None = None     # a real relay host (reached over ssh); None: a testbed relay node

    @property
    def emulated(self) -> bool:
        return self.host is None

    @property
    def netns(self) -> str:
        return NETNS_PREFIX + self.name

    @property
    def inside_endpoint(self) -> str:
        return f"{self.inside}:{RELAY_INSIDE_PORT}"

    @property
    def outside_endpoint(self) -> str:
        return f"{self.outside}:{RELAY_OUTSIDE_PORT}"


@dataclass(frozen=True)
class Cluster:
    name: str
    index: int
    nic_bps: int
    port_buffer: int
    private: bool
    relays: int
    network: str            # CIDR of the cluster's nodes
    nodes: tuple[Node, ...]
    relay_nodes: tuple[Relay, ...] = ()
    nat: bool = False       # 1:1 NAT: every node has a public address (Node.public)
    lan_latency_us: int | None = None   # one way between two of its nodes' ranks (None: libwanmpi's default)

    @property
    def emulated(self) -> bool:
        return all(n.emulated for n in self.nodes)

    @property
    def router(self) -> str:
        return f"{self.name}-r"

    @property
    def router_netns(self) -> str:
        return NETNS_PREFIX + self.router

    @property
    def switch_netns(self) -> str:
        return NETNS_PREFIX + f"{self.name}-sw"

    @property
    def gateway(self) -> str:
        return str(ipaddress.ip_network(self.network).network_address + 254)

    @property
    def public_address(self) -> str:
        """The router's address on the WAN (the NAT address of a private cluster)."""
        return f"198.19.0.{self.index + 1}"

    @property
    def prefixlen(self) -> int:
        return ipaddress.ip_network(self.network).prefixlen

    @property
    def relay_network(self) -> str:
        """The router's network for its relays' outside interfaces (public)."""
        return f"198.19.{self.index + 1}.0/24"

    @property
    def relay_gateway(self) -> str:
        return f"198.19.{self.index + 1}.254"

    @property
    def nat_network(self) -> str:
        """The testbed's public addresses of a 1:1 NAT cluster's nodes (node i: .i+1)."""
        return f"198.19.{128 + self.index}.0/24"


@dataclass(frozen=True)
class WanLink:
    """A WAN link between two clusters; settings apply to each direction."""
    a: str
    b: str
    rate_bps: int
    delay_us: int
    queue_bytes: int
    loss: float

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"

    @property
    def bdp_bytes(self) -> int:
        return self.rate_bps * 2 * self.delay_us // 8_000_000


@dataclass(frozen=True)
class Collectives:
    """How libwanmpi runs the collectives ([collectives] in the file)."""
    lanes: int | None = None        # k, WAN senders per cluster; None: the measured best per collective
    chunk_bytes: int = 32 * 1024    # pipeline chunk
    small_bytes: int = 8 * 1024     # up to this size: the single-lane path
    algorithms: tuple[tuple[str, str], ...] = (tuple((c, "multilane") for c in COLLECTIVES)
                                               + tuple((c, "scheduled") for c in ALLTOALLS))
    rules: str | None = None        # rules file (docs/tuning.md), absolute; None: no rules

    def non_default_algorithms(self) -> tuple[tuple[str, str], ...]:
        """The collectives whose algorithm differs from the default: only these
        are forced on every rank (an explicit WANMPI_<COLL> wins over the rules)."""
        default = dict(Collectives.algorithms)
        return tuple((c, a) for c, a in self.algorithms if a != default[c])


@dataclass(frozen=True)
class Pacing:
    """The rate libwanshim starts every rank's WAN sockets at ([pacing] in the file).

    off:   not paced (libwanmpi may still pace while a program runs)
    fixed: `rate_bps`
    matb:  the paper's maximum allowable transmission bandwidth, B / n: the
           slowest WAN link's rate over `senders` (None: the nodes of the
           largest cluster, every node sending across at once)
    While an MPI_Alltoall(v) runs, libwanmpi paces by `alltoall` ("auto":
    from the call's volumes, local flows too; "matb": B / (senders x
    divisor), the paper; "off"), then returns to the rate above.
    """
    mode: str = "off"
    rate_bps: int | None = None
    senders: int | None = None
    alltoall: str = "auto"
    divisor: int = 1


@dataclass(frozen=True)
class RelaySettings:
    """How the relays carry traffic between clusters ([relay] in the file).

    Relay k of one cluster pairs with relay k (modulo their number) of every
    other cluster: with N relays per cluster, N relay pairs (the IMPI relay
    paper's trunks). `connections`: TCP connections per relay pair.
    `pacing_bps`: each relay's total rate toward one peer; None: not paced;
    "auto" (the default) resolves per pair to 95 % of the smaller of the
    relays' NIC rate and the WAN path's share per relay pair.

    `transport = "rbudp"` marks the WAN between the relays dedicated: bulk
    data may go as RBUDP blasts at `rbudp_rate_bps` per relay pair (explicit:
    RBUDP is not TCP-friendly) in datagrams of `rbudp_payload` bytes, for
    every connection (`rbudp_streams = "all"`) or only those whose ranks
    asked with the WANMPI_UDP_PARAMS attribute ("requested"). `busy_poll_us`:
    each relay keeps polling its sockets this long after it last moved bytes
    instead of sleeping (0: off; docs/wanrelay.md, "Busy polling").
    """
    connections: int = 1
    pacing: str | int = "auto"      # "auto", "off" or bits/s
    transport: str = "tcp"
    rbudp_rate_bps: int | None = None
    rbudp_payload: int | None = None
    rbudp_streams: str = "all"
    standing: bool = False          # real sites: relays kept running (`wanmpi relay up`), not per job
    busy_poll_us: int = 0           # wanrelay's busy_poll: polling, not sleeping, this long after traffic


@dataclass(frozen=True)
class Topology:
    source: str
    clusters: tuple[Cluster, ...]
    links: tuple[WanLink, ...]
    mtu: int = 1500
    collectives: Collectives = Collectives()
    text: str = field(default="", compare=False, repr=False)
    pacing: Pacing = Pacing()
    relay: RelaySettings = RelaySettings()

    @property
    def relays(self) -> tuple[Relay, ...]:
        return tuple(r for c in self.clusters for r in c.relay_nodes)

    @property
    def has_relays(self) -> bool:
        return any(c.relay_nodes for c in self.clusters)

    def relay_node(self, name: str) -> Relay:
        for r in self.relays:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def nodes(self) -> tuple[Node, ...]:
        return tuple(n for c in self.clusters for n in c.nodes)

    @property
    def emulated(self) -> bool:
        return all(c.emulated for c in self.clusters)

    @property
    def pacing_rate(self) -> int:
        """Starting rate of every WAN socket, bytes/s; 0: not paced."""
        p = self.pacing
        if p.mode == "fixed":
            return max(p.rate_bps // 8, 1)
        if p.mode == "matb":
            wan = min((l.rate_bps for l in self.links), default=0)
            senders = p.senders or max(len(c.nodes) for c in self.clusters)
            return max(wan // 8 // senders, 1) if wan else 0
        return 0

    def cluster(self, name: str) -> Cluster:
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(name)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def cluster_of(self, node: Node) -> Cluster:
        return self.cluster(node.cluster)

    def links_of(self, cluster: str) -> list[WanLink]:
        return [l for l in self.links if cluster in (l.a, l.b)]

    def next_hops(self, source: str) -> dict[str, WanLink]:
        """For every cluster reachable from `source`, the first WAN link on a
        shortest path (fewest links) toward it."""
        hops: dict[str, WanLink] = {}
        frontier = [(source, None)]
        seen = {source}
        while frontier:
            following = []
            for here, first in frontier:
                for link in self.links_of(here):
                    there = link.b if link.a == here else link.a
                    if there not in seen:
                        seen.add(there)
                        hop = first or link
                        hops[there] = hop
                        following.append((there, hop))
            frontier = following
        return hops
