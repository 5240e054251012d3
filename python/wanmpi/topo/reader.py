"""Reading a topology file: `load(path)` reads the TOML, checks every key and
value, and returns a `Topology` (model.py). Any problem raises
`TopologyError("FILE: KEY: PROBLEM")`: the file, the key path
(`cluster[1].nic`) and the bad value. The keys, their defaults and checks are
described in docs/topology.md.
"""
from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from dataclasses import replace
from pathlib import Path

from .. import units
from . import hosts as host_lists
from ..paths import DEFAULT_TOPOLOGY
from .model import (ALLTOALLS, COLLECTIVES, UDP_IP_HEADERS, UNPACED, Cluster, Collectives, Node, Pacing, Relay, RelaySettings, Topology,
                    TopologyError, WanLink)

MAX_NODES_PER_CLUSTER = 200
MAX_CLUSTERS = 200
CLUSTER_NAME = re.compile(r"^[a-z](?:[a-z0-9]{0,4}[a-z])?$")

TESTBED_KEYS = {"mtu": 1500}
MAX_RELAYS_PER_CLUSTER = 16
CLUSTER_DEFAULTS = {"nodes": 4, "nic": "100Mbit", "port_buffer": "64KB",
                    "private": False, "relays": 0}
CLUSTER_OPTIONAL = {"relay_nic", "nat", "lan_latency"}   # relay_nic default: the cluster's nic
MAX_LAN_LATENCY_US = 1_000_000
HOST_SOURCES = ("hosts", "hostfile", "slurm")     # a real cluster names its hosts with one (hosts.py)
CLUSTER_KEYS = {"name", *HOST_SOURCES, "network", *CLUSTER_DEFAULTS, *CLUSTER_OPTIONAL}
WAN_DEFAULTS = {"rate": "200Mbit", "delay": "10ms", "queue": "100KB", "loss": 0.0}
WAN_KEYS = {*WAN_DEFAULTS, "link"}
LINK_KEYS = {"clusters", *WAN_DEFAULTS}
ALGORITHMS = ("multilane", "singlelane", "mpi")
ALLTOALL_ALGORITHMS = ("scheduled", "paced", "mpi")
COLLECTIVES_DEFAULTS = {"lanes": "auto", "chunk": "32KiB", "small": "8KiB",
                        **{c: "multilane" for c in COLLECTIVES}, **{c: "scheduled" for c in ALLTOALLS}}
PACING_MODES = ("off", "fixed", "matb")
ALLTOALL_RATES = ("auto", "matb", "off")           # how an all-to-all is paced while it runs
PACING_KEYS = {"mode", "rate", "senders", "alltoall", "divisor"}
RELAY_KEYS = {"connections", "pacing", "transport", "rbudp_rate", "rbudp_payload", "rbudp_streams", "standing",
              "busy_poll"}
MAX_BUSY_POLL_US = 10_000           # wanrelay's own limit
RELAY_TRANSPORTS = ("tcp", "rbudp")
RBUDP_STREAMS = ("all", "requested")
TOP_KEYS = {"testbed", "cluster", "wan", "collectives", "pacing", "relay"}


def load(path: str | Path | None = None, slurm: bool = False) -> Topology:
    """Read and validate a topology file (the embedded default if None).

    slurm: inside a Slurm allocation (`wanmpi run --slurm`), every real
    cluster that gives its network but names no hosts takes the nodes of the
    allocation in that network, as if it said slurm = true; clusters that
    name their hosts keep them. Refused for an emulated topology."""
    path = Path(path) if path is not None else DEFAULT_TOPOLOGY
    source = str(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise TopologyError(source, "", f"cannot read file: {e.strerror}") from None
    return loads(text, source, slurm=slurm)


def loads(text: str, source: str = "<topology>", environ: dict[str, str] | None = None,
          slurm: bool = False) -> Topology:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TopologyError(source, "", f"not valid TOML: {e}") from None
    return _Reader(source, os.environ if environ is None else environ, slurm).topology(raw, text)


class _Reader:
    def __init__(self, source: str, environ, slurm: bool = False):
        self.source = source
        self.environ = environ          # SLURM_JOB_NODELIST for slurm = true and --slurm
        self.slurm = slurm              # load(slurm=True): real clusters without hosts take the allocation's
        self.mtu = TESTBED_KEYS["mtu"]

    def fail(self, key: str, problem: str) -> TopologyError:
        return TopologyError(self.source, key, problem)

    def table(self, raw: object, key: str, known: set[str]) -> dict:
        if not isinstance(raw, dict):
            raise self.fail(key or "(top level)", "expected a table")
        for k in raw:
            if k not in known:
                where = f"{key}.{k}" if key else k
                raise self.fail(where, f"unknown key (known keys: {', '.join(sorted(known))})")
        return raw

    def convert(self, key: str, value: object, parse):
        try:
            return parse(value)
        except units.UnitError as e:
            raise self.fail(key, str(e)) from None

    def integer(self, key: str, value: object, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {value!r}")
        if not low <= value <= high:
            raise self.fail(key, f"{value} is outside [{low}, {high}]")
        return value

    def boolean(self, key: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {value!r}")
        return value

    def topology(self, raw: dict, text: str) -> Topology:
        self.table(raw, "", TOP_KEYS)
        testbed = {**TESTBED_KEYS, **self.table(raw.get("testbed", {}), "testbed", set(TESTBED_KEYS))}
        mtu = self.mtu = self.integer("testbed.mtu", testbed["mtu"], 576, 9000)
        raw_clusters = raw.get("cluster")
        if raw_clusters is None:
            raise self.fail("cluster", "no clusters: add at least two [[cluster]] tables")
        if not isinstance(raw_clusters, list):
            raise self.fail("cluster", "expected an array of tables ([[cluster]])")
        if not 1 <= len(raw_clusters) <= MAX_CLUSTERS:
            raise self.fail("cluster", f"{len(raw_clusters)} clusters: need 1 to {MAX_CLUSTERS}")
        clusters = [self.cluster(i, c) for i, c in enumerate(raw_clusters)]
        names: dict[str, int] = {}
        for c in clusters:
            if c.name in names:
                raise self.fail(f"cluster[{c.index}].name",
                                f"duplicate cluster name {c.name!r} (also cluster[{names[c.name]}])")
            names[c.name] = c.index
        if self.slurm and all(c.emulated for c in clusters):
            raise self.fail("", "--slurm takes the hosts of real clusters (each with its network = \"CIDR\") "
                            "from the Slurm allocation, but this is an emulated testbed topology (nodes = N): "
                            "drop --slurm, or describe the sites (docs/real-clusters.md)")
        if len({c.emulated for c in clusters}) > 1:
            raise self.fail("cluster", "mixes emulated clusters (nodes = N) and real ones "
                            "(hosts = [...]); use one kind per topology")
        self.check_unique_hosts(clusters)
        links = self.links(raw.get("wan", {}), clusters)
        collectives = self.collectives(raw.get("collectives", {}))
        pacing = self.pacing(raw.get("pacing", {}))
        relay = self.relay(raw.get("relay", {}), clusters, mtu)
        return Topology(self.source, tuple(clusters), tuple(links), mtu, collectives, text, pacing, relay)

    def relay(self, raw: object, clusters: list[Cluster], mtu: int) -> RelaySettings:
        settings = self.table(raw, "relay", RELAY_KEYS)
        connections = self.integer("relay.connections", settings.get("connections", 1), 1, 64)
        pacing = settings.get("pacing", "auto")
        if pacing not in ("auto", "off"):
            pacing = self.convert("relay.pacing", pacing, units.parse_rate)
        transport = settings.get("transport", "tcp")
        if transport not in RELAY_TRANSPORTS:
            raise self.fail("relay.transport", f"{transport!r} is not a relay transport (choose "
                            f"{', '.join(RELAY_TRANSPORTS)})")
        rbudp: dict = {}
        for key in ("rbudp_rate", "rbudp_payload", "rbudp_streams"):
            if key in settings and transport != "rbudp":
                raise self.fail(f"relay.{key}", f"only with transport = \"rbudp\" (transport is {transport!r})")
        if transport == "rbudp":
            if "rbudp_rate" not in settings:
                raise self.fail("relay.rbudp_rate", "missing: RBUDP blasts at this rate whatever the loss (it is "
                                "not TCP-friendly), so give the dedicated link's rate per relay pair, e.g. "
                                "\"180Mbit\"")
            rbudp["rbudp_rate_bps"] = self.convert("relay.rbudp_rate", settings["rbudp_rate"], units.parse_rate)
            rbudp["rbudp_payload"] = self.integer("relay.rbudp_payload",
                                                  settings.get("rbudp_payload", mtu - UDP_IP_HEADERS),
                                                  64, mtu - UDP_IP_HEADERS)
            rbudp["rbudp_streams"] = settings.get("rbudp_streams", "all")
            if rbudp["rbudp_streams"] not in RBUDP_STREAMS:
                raise self.fail("relay.rbudp_streams", f"{rbudp['rbudp_streams']!r}: choose \"all\" (every "
                                "connection's bulk data) or \"requested\" (connections whose ranks put "
                                "WANMPI_UDP_PARAMS)")
        relaying = [c for c in clusters if c.relays]
        if relaying and len(relaying) != len(clusters):
            without = [c.name for c in clusters if not c.relays]
            raise self.fail(f"cluster[{clusters.index(next(c for c in clusters if not c.relays))}].relays",
                            f"cluster(s) {', '.join(without)} have no relays but {relaying[0].name!r} has: "
                            "with relays, every cluster needs at least one (a connection is relayed at "
                            "both ends)")
        standing = self.boolean("relay.standing", settings.get("standing", False))
        if standing and any(r.emulated for c in clusters for r in c.relay_nodes):
            raise self.fail("relay.standing", "only for relay hosts of real clusters (relays = [{ host = ... }]); "
                            "the testbed starts its relays for each job")
        busy_poll_us = self.convert("relay.busy_poll", settings.get("busy_poll", 0), units.parse_duration_us)
        if busy_poll_us > MAX_BUSY_POLL_US:                 # parse_duration_us refuses negative ones
            raise self.fail("relay.busy_poll", f"{settings['busy_poll']!r}: 0 (off) to 10ms (a relay polls that "
                            "long without sleeping after it last moved bytes)")
        return RelaySettings(connections, pacing, transport, **rbudp, standing=standing, busy_poll_us=busy_poll_us)

    def pacing(self, raw: object) -> Pacing:
        settings = self.table(raw, "pacing", PACING_KEYS)
        mode = settings.get("mode", "off")
        if mode not in PACING_MODES:
            raise self.fail("pacing.mode", f"{mode!r} is not a pacing mode (choose {', '.join(PACING_MODES)})")
        if "rate" in settings and mode != "fixed":
            raise self.fail("pacing.rate", f"only with mode = \"fixed\" (mode is {mode!r})")
        if "senders" in settings and mode != "matb":
            raise self.fail("pacing.senders", f"only with mode = \"matb\" (mode is {mode!r})")
        alltoall = settings.get("alltoall", "auto")
        if alltoall not in ALLTOALL_RATES:
            raise self.fail("pacing.alltoall", f"{alltoall!r} is not an all-to-all rate "
                            f"(choose {', '.join(ALLTOALL_RATES)})")
        divisor = self.integer("pacing.divisor", settings.get("divisor", 1), 1, 64)
        if mode == "fixed":
            if "rate" not in settings:
                raise self.fail("pacing.rate", "missing: mode = \"fixed\" needs a rate, e.g. \"50Mbit\"")
            return Pacing(mode, rate_bps=self.convert("pacing.rate", settings["rate"], units.parse_rate),
                          alltoall=alltoall, divisor=divisor)
        senders = settings.get("senders", "nodes")
        if senders != "nodes":
            senders = self.integer("pacing.senders", senders, 1, MAX_NODES_PER_CLUSTER * MAX_CLUSTERS)
        return Pacing(mode, senders=None if senders == "nodes" else senders, alltoall=alltoall, divisor=divisor)

    def collectives(self, raw: object) -> Collectives:
        settings = {**COLLECTIVES_DEFAULTS, **self.table(raw, "collectives", {*COLLECTIVES_DEFAULTS, "rules"})}
        lanes = settings["lanes"]
        if lanes != "auto":
            lanes = self.integer("collectives.lanes", lanes, 1, MAX_NODES_PER_CLUSTER)
        chunk = self.convert("collectives.chunk", settings["chunk"], units.parse_size)
        if not 1024 <= chunk <= 1 << 30:
            raise self.fail("collectives.chunk", f"{chunk} bytes is outside [1KB, 1GB]")
        small = self.convert("collectives.small", settings["small"], units.parse_size)
        algorithms = []
        for c in COLLECTIVES:
            if settings[c] not in ALGORITHMS:
                raise self.fail(f"collectives.{c}", f"{settings[c]!r} is not an algorithm "
                                f"(choose {', '.join(ALGORITHMS)})")
            algorithms.append((c, settings[c]))
        for c in ALLTOALLS:
            known = tuple(a for a in ALLTOALL_ALGORITHMS if a != "paced" or c not in UNPACED)
            if settings[c] not in known:
                raise self.fail(f"collectives.{c}", f"{settings[c]!r} is not an algorithm "
                                f"(choose {', '.join(known)})")
            algorithms.append((c, settings[c]))
        return Collectives(None if lanes == "auto" else lanes, chunk, small, tuple(algorithms),
                           self.rules_path(settings.get("rules")))

    def rules_path(self, value: object) -> str | None:
        """[collectives] rules: a rules file, relative to the topology file's
        directory; read when a job starts (wanmpi run), not here."""
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail("collectives.rules", f"expected the path of a rules file, got {value!r}")
        return str((Path(self.source).parent / value).resolve())

    def cluster(self, index: int, raw: object) -> Cluster:
        cluster = self.cluster_alone(index, raw)
        if "lan_latency" not in raw:
            return cluster
        key = f"cluster[{index}].lan_latency"
        latency = self.convert(key, raw["lan_latency"], units.parse_duration_us)
        if not 0 <= latency <= MAX_LAN_LATENCY_US:
            raise self.fail(key, f"{raw['lan_latency']!r}: expected 0 to 1s (one way between two of its nodes)")
        return replace(cluster, lan_latency_us=latency)

    def cluster_alone(self, index: int, raw: object) -> Cluster:
        key = f"cluster[{index}]"
        raw = self.table(raw, key, CLUSTER_KEYS)
        if "name" not in raw:
            raise self.fail(f"{key}.name", "missing (every cluster needs a name)")
        name = raw["name"]
        if not isinstance(name, str) or not CLUSTER_NAME.match(name):
            raise self.fail(f"{key}.name", f"{name!r} is not a valid cluster name: 1-6 lowercase "
                            "letters or digits, starting and ending with a letter")
        settings = {**CLUSTER_DEFAULTS, **raw}
        nic = self.convert(f"{key}.nic", settings["nic"], units.parse_rate)
        port_buffer = self.convert(f"{key}.port_buffer", settings["port_buffer"], units.parse_size)
        if port_buffer < self.mtu:
            raise self.fail(f"{key}.port_buffer", f"{port_buffer} bytes is smaller than one packet "
                            f"(testbed.mtu = {self.mtu} B)")
        nat = self.nat(key, raw)
        if nat and raw.get("private") is False:
            raise self.fail(f"{key}.private", 'a cluster behind 1:1 NAT (nat = "1:1") is private: drop private = false')
        private = nat or self.boolean(f"{key}.private", settings["private"])
        real = any(k in raw for k in HOST_SOURCES) or (self.slurm and "network" in raw)
        relays = len(settings["relays"]) if real and isinstance(settings["relays"], list) else \
            self.integer(f"{key}.relays", settings["relays"], 0, MAX_RELAYS_PER_CLUSTER)
        relay_nic = self.convert(f"{key}.relay_nic", settings.get("relay_nic", settings["nic"]),
                                 units.parse_rate)
        if "relay_nic" in raw and not relays:
            raise self.fail(f"{key}.relay_nic", "only with relays = 1 or more")
        if real:
            if relays and not isinstance(settings["relays"], list):
                raise self.fail(f"{key}.relays", "a real cluster names its relay hosts: relays = "
                                '[{ host = "gw1", inside = "10.1.0.250", outside = "203.0.113.5" }, ...]')
            cluster = self.real_cluster(key, index, name, raw, nic, port_buffer, private, relays, nat)
            return self.real_relays(key, cluster, settings["relays"] or [], relay_nic)
        if "network" in raw:
            raise self.fail(f"{key}.network", "only for real clusters, and a real cluster names its hosts: "
                            "hosts = [...], hostfile = \"FILE\" or slurm = true (or, inside a Slurm "
                            "allocation, `wanmpi run --slurm` takes them from it)")
        nodes = self.integer(f"{key}.nodes", settings["nodes"], 0, MAX_NODES_PER_CLUSTER)
        if nodes == 0:
            raise self.fail(f"{key}.nodes", "a cluster needs at least one node")
        network = f"10.{index}.0.0/24" if private else f"198.18.{index}.0/24"
        base = ipaddress.ip_network(network).network_address
        public = ipaddress.ip_network(f"198.19.{128 + index}.0/24").network_address
        members = tuple(Node(f"{name}{i}", name, i, str(base + i + 1), public=str(public + i + 1) if nat else None)
                        for i in range(nodes))
        relay_nodes = tuple(Relay(f"{name}-relay{k}", name, k, str(base + 220 + k),
                                  f"198.19.{index + 1}.{k + 1}", relay_nic) for k in range(relays))
        return Cluster(name, index, nic, port_buffer, private, relays, network, members, relay_nodes, nat)

    def nat(self, key: str, raw: dict) -> bool:
        if "nat" not in raw:
            return False
        if raw["nat"] != "1:1":
            raise self.fail(f"{key}.nat", f'{raw["nat"]!r}: the only NAT wanmpi handles is "1:1" '
                            "(every node's private address mapped to a public one, as in cloud regions)")
        return True

    def check_public(self, key: str, source: str, hosts: list, nat: bool) -> None:
        """1:1 NAT: every host has an IPv4 address and a public one; else none has."""
        for h in hosts:
            if not nat and h.public:
                raise self.fail(f"{key}.{source}", f'host {h.name!r} has a public address: only in a cluster with nat = "1:1"')
            if nat and not h.public:
                raise self.fail(f"{key}.{source}", f'host {h.name!r} has no public address (nat = "1:1": '
                                'give every host as { host = ..., address = ..., public = ... })')
            if nat:
                try:
                    ipaddress.IPv4Address(h.address)
                except ValueError:
                    raise self.fail(f"{key}.{source}", f"host {h.name!r}: 1:1 NAT needs its private IPv4 "
                                    "address (address = ...)") from None

    def real_cluster(self, key, index, name, raw, nic, port_buffer, private, relays, nat) -> Cluster:
        if "nodes" in raw:
            raise self.fail(f"{key}.nodes", "give either nodes = N (emulated) or hosts = [...] (real), not both")
        given = [k for k in HOST_SOURCES if k in raw]
        if len(given) > 1:
            raise self.fail(f"{key}.{given[1]}", f"give one of {', '.join(HOST_SOURCES)}, not {given[0]} and {given[1]}")
        if "network" not in raw:
            raise self.fail(f"{key}.network", "missing: a real cluster needs the CIDR of its nodes' "
                            "addresses (e.g. '10.1.0.0/16')")
        try:
            network = str(ipaddress.ip_network(raw["network"], strict=False))
        except (ValueError, TypeError):
            raise self.fail(f"{key}.network", f"{raw['network']!r} is not a CIDR such as '10.1.0.0/16'") from None
        source = given[0] if given else "network"
        try:
            if given:
                hosts = self.host_list(key, source, raw[source], network)
            else:                       # load(slurm=True): the allocation's nodes in the network
                hosts = host_lists.slurm_hosts(self.environ, network)
        except host_lists.HostError as e:
            raise self.fail(f"{key}.{source}", str(e) if given else f"--slurm: {e}") from None
        self.check_public(key, source, hosts, nat)
        members = tuple(Node(h.name, name, i, h.address, emulated=False, slots=h.slots, public=h.public)
                        for i, h in enumerate(hosts))
        return Cluster(name, index, nic, port_buffer, private, relays, network, members, (), nat)

    def host_list(self, key: str, source: str, value, network: str) -> list[host_lists.Host]:
        """The hosts of a real cluster from its hosts, hostfile or slurm key."""
        if source == "hosts":
            return host_lists.from_value(value)
        if source == "hostfile":
            if not isinstance(value, str) or not value:
                raise host_lists.HostError("expected the path of a hostfile (relative to the topology file)")
            return host_lists.read_hostfile(Path(self.source).parent / value)
        if not self.boolean(f"{key}.slurm", value):
            raise host_lists.HostError("slurm = false names no hosts: give hosts or hostfile instead")
        return host_lists.slurm_hosts(self.environ, network)

    def real_relays(self, key: str, cluster: Cluster, raw: list, nic_bps: int) -> Cluster:
        """The relay hosts of a real cluster: {host, inside, outside} each."""
        relays = []
        for k, item in enumerate(raw):
            where = f"{key}.relays[{k}]"
            if not isinstance(item, dict) or set(item) != {"host", "inside", "outside"}:
                raise self.fail(where, 'expected { host = "...", inside = "IP", outside = "IP" } '
                                "(inside: on the cluster's network; outside: where the other sites' relays reach it)")
            if not isinstance(item["host"], str) or not host_lists.HOST_NAME.match(item["host"]):
                raise self.fail(f"{where}.host", f"{item['host']!r} is not a host name or address")
            for side in ("inside", "outside"):
                try:
                    ipaddress.IPv4Address(item[side])
                except (ValueError, TypeError):
                    raise self.fail(f"{where}.{side}", f"{item[side]!r} is not an IPv4 address") from None
            if ipaddress.ip_address(item["inside"]) not in ipaddress.ip_network(cluster.network):
                raise self.fail(f"{where}.inside", f"{item['inside']} is not in the cluster's network {cluster.network}")
            relays.append(Relay(item["host"], cluster.name, k, item["inside"], item["outside"], nic_bps,
                                host=item["host"]))
        return replace(cluster, relays=len(relays), relay_nodes=tuple(relays))

    def check_unique_hosts(self, clusters: list[Cluster]) -> None:
        seen: dict[str, str] = {}
        for c in clusters:
            for n in c.nodes:
                if n.name in seen:
                    raise self.fail(f"cluster[{c.index}].hosts",
                                    f"duplicate host {n.name!r} (also in cluster {seen[n.name]!r})")
                seen[n.name] = c.name

    def link_settings(self, key: str, raw: dict, defaults: dict) -> dict:
        merged = {**defaults, **{k: v for k, v in raw.items() if k in WAN_DEFAULTS}}
        out = {
            "rate_bps": self.convert(f"{key}.rate", merged["rate"], units.parse_rate),
            "delay_us": self.convert(f"{key}.delay", merged["delay"], units.parse_duration_us),
            "loss": self.convert(f"{key}.loss", merged["loss"], units.parse_loss),
        }
        if merged["queue"] == "bdp":
            out["queue_bytes"] = max(out["rate_bps"] * 2 * out["delay_us"] // 8_000_000, 2 * self.mtu)
        else:
            out["queue_bytes"] = self.convert(f"{key}.queue", merged["queue"], units.parse_size)
        if out["queue_bytes"] < self.mtu:
            raise self.fail(f"{key}.queue", f"{out['queue_bytes']} bytes is smaller than one packet "
                            f"(testbed.mtu = {self.mtu} B)")
        if out["delay_us"] > 1_000_000:
            raise self.fail(f"{key}.delay", "one-way delay above 1 s is not supported")
        return out

    def links(self, raw: object, clusters: list[Cluster]) -> list[WanLink]:
        wan = self.table(raw, "wan", WAN_KEYS)
        defaults = {**WAN_DEFAULTS, **{k: v for k, v in wan.items() if k in WAN_DEFAULTS}}
        mesh = self.link_settings("wan", wan, WAN_DEFAULTS)    # also checks the [wan] values
        names = [c.name for c in clusters]
        raw_links = wan.get("link")
        if raw_links is None:       # full mesh with the [wan] settings
            return [WanLink(a, b, **mesh) for i, a in enumerate(names) for b in names[i + 1:]]
        if not isinstance(raw_links, list):
            raise self.fail("wan.link", "expected an array of tables ([[wan.link]])")
        links: list[WanLink] = []
        pairs: dict[frozenset, int] = {}
        for i, rl in enumerate(raw_links):
            key = f"wan.link[{i}]"
            rl = self.table(rl, key, LINK_KEYS)
            ends = rl.get("clusters")
            if (not isinstance(ends, list) or len(ends) != 2
                    or not all(isinstance(e, str) for e in ends)):
                raise self.fail(f"{key}.clusters", "expected two cluster names, e.g. [\"a\", \"b\"]")
            for e in ends:
                if e not in names:
                    raise self.fail(f"{key}.clusters", f"unknown cluster {e!r} (clusters: {', '.join(names)})")
            if ends[0] == ends[1]:
                raise self.fail(f"{key}.clusters", f"a link needs two different clusters, got {ends[0]!r} twice")
            pair = frozenset(ends)
            if pair in pairs:
                raise self.fail(f"{key}.clusters", f"duplicate link {ends[0]}-{ends[1]} (also wan.link[{pairs[pair]}])")
            pairs[pair] = i
            a, b = sorted(ends, key=names.index)
            links.append(WanLink(a, b, **self.link_settings(key, rl, defaults)))
        topo_links = tuple(links)
        unreachable = [n for n in names[1:]
                       if n not in Topology(self.source, tuple(clusters), topo_links).next_hops(names[0])]
        if unreachable:
            raise self.fail("wan.link", f"cluster(s) {', '.join(unreachable)} cannot be reached from "
                            f"{names[0]!r} over the listed links")
        return links
