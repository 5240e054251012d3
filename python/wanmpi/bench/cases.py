"""What a `wanmpi bench` run is made of, before anything runs: its cases and
the testbed each one needs.

A **case** is one measurement: one job (kernel x variant x MPI x one-way delay
x repetition, plus what the benchmark adds in `params`); `plan` builds the
cross product, a `Record` holds what came of a case.

Every case names a `TopologySpec`: the testbed's own topology (`BASE`), or
one derived from it by a transform of the topology file (`SINGLE_CLUSTER`:
one cluster with all the nodes, the normalisation of the suite;
`with_relays(n)`: every cluster with n relay nodes). Transforms work on the
parsed file (a dict), so a new technique that needs a different testbed is a
new `TopologySpec`: see `with_relays`.
"""
from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from typing import Callable, Iterable

from .. import topo
from ..topo import Topology


class BenchError(RuntimeError):
    """The benchmark cannot run as asked; the message says why."""


# ---- topologies ---------------------------------------------------------------------------
Transform = Callable[[dict], dict]


@dataclass(frozen=True)
class TopologySpec:
    """Which testbed a case runs on: the base topology, or a transform of its file.
    `idle_clusters`: clusters of the derived topology that run no rank."""
    name: str
    transform: Transform | None = None
    idle_clusters: tuple[str, ...] = ()
    description: str = "the testbed's own topology"

    def derive(self, base: Topology) -> Topology:
        if self.transform is None:
            return base
        raw = tomllib.loads(base.text)
        text = (f"# derived by `wanmpi bench` from {base.source}: {self.description}\n"
                + to_toml(self.transform(raw)))
        return topo.loads(text, f"{base.source} [{self.name}]")

    def rank_nodes(self, t: Topology) -> list:
        return [n for c in t.clusters if c.name not in self.idle_clusters for n in c.nodes]


BASE = TopologySpec("testbed")
IDLE_CLUSTER = "idle"


def single_cluster_transform(raw: dict) -> dict:
    """One cluster with every node of the base topology (the first cluster's
    NIC and port buffer), for the normalisation: the same ranks on one LAN.
    wanem refuses a testbed without WAN links, so a one-node cluster `idle`
    that runs nothing keeps one link alive; it carries no traffic."""
    clusters = raw["cluster"]
    first = dict(clusters[0])
    nodes = sum(int(c.get("nodes", topo.CLUSTER_DEFAULTS["nodes"])) for c in clusters)
    one = {k: v for k, v in first.items() if k in ("nic", "port_buffer")}
    out = {k: v for k, v in raw.items() if k not in ("cluster", "wan")}
    out["cluster"] = [{"name": "one", "nodes": nodes, **one}, {"name": IDLE_CLUSTER, "nodes": 1}]
    return out


SINGLE_CLUSTER = TopologySpec("single-cluster", single_cluster_transform, (IDLE_CLUSTER,),
                              "one cluster with all the nodes (the normalisation)")


RELAY_KEYS_KEPT = ("busy_poll",)      # [relay] keys of the base topology with_relays keeps


def with_relays(n: int, relay_nic_bps: int | None = None, public: bool = False) -> TopologySpec:
    """Every cluster of the base topology with `n` relay nodes (`relays = n`),
    at `relay_nic_bps` (None: the node NIC), made public if `public` (so
    the same testbed also runs jobs directly, `--no-relays`). `wanmpi run`
    starts the relays when the topology has them."""
    def transform(raw: dict) -> dict:
        out = {k: v for k, v in raw.items() if k != "relay"}
        # how the relays run (busy_poll) stays the base's; how they carry
        # traffic (connections, pacing, transport) is the benchmark's
        kept = {k: v for k, v in raw.get("relay", {}).items() if k in RELAY_KEYS_KEPT}
        if kept:
            out["relay"] = kept
        clusters = []
        for c in raw["cluster"]:
            c = {k: v for k, v in c.items() if k != "relay_nic" and not (public and k == "private")}
            c["relays"] = n
            if relay_nic_bps:
                c["relay_nic"] = f"{relay_nic_bps}bit"
            clusters.append(c)
        out["cluster"] = clusters
        return out
    nic = f"-{relay_nic_bps // 1_000_000}Mbit" if relay_nic_bps else ""
    return TopologySpec(f"relays-{n}{nic}{'-public' if public else ''}", transform, (),
                        f"{'public clusters' if public else 'every cluster'} with {n} relay node(s)"
                        + (f" at {relay_nic_bps // 1_000_000} Mbit/s" if relay_nic_bps else ""))


def to_toml(raw: dict) -> str:
    """A topology file's dict back to TOML: scalars, lists of scalars, tables
    and arrays of tables (all a topology file has)."""
    def scalar(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list) and all(not isinstance(x, dict) for x in v):
            return "[" + ", ".join(scalar(x) for x in v) + "]"
        raise BenchError(f"cannot write {v!r} to TOML")

    def is_table_array(v) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)

    lines: list[str] = []

    def emit(table: dict, prefix: str) -> None:
        for k, v in table.items():
            if not isinstance(v, dict) and not is_table_array(v):
                lines.append(f"{k} = {scalar(v)}")
        for k, v in table.items():
            name = f"{prefix}.{k}" if prefix else k
            if isinstance(v, dict):
                lines.append(f"\n[{name}]")
                emit(v, name)
            elif is_table_array(v):
                for item in v:
                    lines.append(f"\n[[{name}]]")
                    emit(item, name)
    emit(raw, "")
    return "\n".join(lines).lstrip("\n") + "\n"


# ---- cases ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    kernel: str                       # what runs: a kernel, a program, a pattern
    variant: str                      # how: plain, all, ompi-tuned, ...
    mpi: str
    delay_ms: float | None            # one-way WAN delay set before the case; None: as it is
    rep: int = 1                      # 1-based repetition
    topology: TopologySpec = BASE
    params: tuple[tuple[str, object], ...] = ()   # the benchmark's own (class, cc, ...)

    def param(self, key: str, default=None):
        return dict(self.params).get(key, default)

    def kinds(self) -> list[tuple]:
        """Cases that should take about as long, most alike first (the ETA's
        estimate: the mean of the first kind that has finished cases)."""
        return [(self.kernel, self.variant, self.mpi, self.delay_ms, self.topology.name, self.params),
                (self.kernel, self.mpi, self.delay_ms), (self.kernel, self.mpi), (self.kernel,)]

    def label(self) -> str:
        delay = "-" if self.delay_ms is None else f"{self.delay_ms:g} ms"
        extra = "".join(f" {k}={v}" for k, v in self.params)
        where = "" if self.topology is BASE else f" [{self.topology.name}]"
        return f"{self.kernel} {self.mpi} {self.variant} {delay} rep {self.rep}{extra}{where}"

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "variant": self.variant, "mpi": self.mpi, "delay_ms": self.delay_ms,
                "rep": self.rep, "topology": self.topology.name, "params": dict(self.params)}


@dataclass
class Record:
    """A case and what came of it (one entry of `cases` in the result file)."""
    case: Case
    status: str = "pending"           # ok | failed
    error: str | None = None
    seconds: float = 0.0              # wall time of the case
    metrics: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self, index: int) -> dict:
        return {"id": index, **self.case.as_dict(), "status": self.status, "error": self.error,
                "seconds": round(self.seconds, 3), "metrics": self.metrics, "env": self.env}


def plan(kernels: Iterable[str], variants: Iterable, mpis: Iterable[str], delays: Iterable[float | None],
         reps: int, topology_of: Callable[[object], TopologySpec] = lambda v: BASE,
         params: Callable[[str], tuple] = lambda k: ()) -> list[Case]:
    """The cross product, delay-major (fewest link changes), repetitions
    interleaved across variants (a load that drifts hits every variant alike).
    `variants` are names or objects with a `name`; `topology_of(variant)`
    gives each its testbed."""
    cases = []
    variants = list(variants)
    for delay in delays:
        for kernel in kernels:
            for mpi in mpis:
                for rep in range(1, reps + 1):
                    for v in variants:
                        name = getattr(v, "name", v)
                        cases.append(Case(kernel, name, mpi, delay, rep, topology_of(v), params(kernel)))
    return cases
