"""`wanmpi sim --sweep SPEC`: libwanmpi against SMPI's MPICH and Open MPI
algorithms and the lower bound over a set of simulated platforms (issue 20,
docs/scale.md "The sweep").

The spec (TOML, examples in bench/sweep/) names a base point and axes; every
axis value is simulated with the other parameters at the base (one factor at
a time: the full product of 3 site counts x 4 node counts x 3 NICs x 3 WANs x
3 delays would take weeks on two cores):

    ops = ["bcast", "allreduce", "alltoall"]
    bytes = ["1MiB", "16MiB"]
    selectors = ["mpich", "ompi"]      # each alone is a variant; libwanmpi runs over the first
    timeout = "1800s"                  # per simulation (one platform, one variant)
    max_memory = "16GiB"               # points whose buffers would need more are skipped
    shared_from = "64MiB"              # sizes from here up in buffers the ranks share: not checked
    nic_latency = "50us"               # one way, each node's link to its switch (the default)
    sharing = "tcp"                    # flows share links by latency (SimGrid's default) or "equal"
    [settings.singlelane]              # more variants: libwanmpi with these WANMPI_* settings ("wanmpi-singlelane")
    WANMPI_BCAST = "singlelane"
    [topologies]                       # the topology file for each number of sites
    2 = "../../examples/two-clusters.toml"
    [base]
    sites = 2
    nodes_per_cluster = 16
    nic_rate = "10Gbit"
    wan_rate = "100Gbit"
    delay = "10ms"
    [axes]
    nodes_per_cluster = [4, 64]
    delay = ["1ms", "30ms"]

`relays` (per site; 0: none) is an axis too, and may be set in [base]
(unset: the topology's relays): every connection between sites then goes
through a relay of each (sim/relayed.py).

Each (point, variant) is one smpirun of collbench over every op and size,
with the calls started together on the simulated clock (collbench --start
clock). Summary rows: one per point, op and size, with every variant's
seconds, the bound, and ours over the best of the MPIs' algorithms.
"""
from __future__ import annotations

import os
import re
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import units
from ..bench.bounds import lower_bound
from ..bench.cases import BenchError, Record
from ..bench.results import exit_status, finish, now_iso
from ..rules import format_bytes
from ..topo.reader import MAX_RELAYS_PER_CLUSTER, load
from . import library, platform, run

AXES = ("sites", "nodes_per_cluster", "nic_rate", "wan_rate", "delay")
OPTIONAL_AXES = ("relays",)     # unset: the topology's
KEYS = {"ops", "bytes", "selectors", "timeout", "max_memory", "topologies", "base", "axes", "settings", "nic_latency",
        "shared_from", "sharing"}
BUFFERS_PER_RANK = 4            # collbench's two, libwanmpi's staging, SMPI's copies in flight
STAGING_PER_RANK = 2            # with shared buffers: libwanmpi's staging and SMPI's copies in flight


class SweepError(ValueError):
    """A spec that cannot be run; the message names the file and the key."""


@dataclass(frozen=True)
class Point:
    sites: int
    nodes_per_cluster: int
    nic_bps: int
    wan_bps: int
    delay_us: int
    relays: int | None = None

    def label(self) -> str:
        relays = "" if self.relays is None else f", {self.relays} relays"
        return (f"{self.sites} sites x {self.nodes_per_cluster}, NIC {units.format_rate(self.nic_bps)}, "
                f"WAN {units.format_rate(self.wan_bps)}, {self.delay_us / 1000:g} ms{relays}")

    def as_dict(self) -> dict:
        relays = {} if self.relays is None else {"relays": self.relays}
        return {"sites": self.sites, "nodes_per_cluster": self.nodes_per_cluster, "nic_bps": self.nic_bps,
                "wan_bps": self.wan_bps, "delay_ms": self.delay_us / 1000, **relays}


@dataclass(frozen=True)
class Spec:
    source: str
    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    selectors: tuple[str, ...]
    timeout_s: float
    max_memory: int
    topologies: dict
    base: Point
    points: tuple[Point, ...]
    settings: dict = field(default_factory=dict)     # {variant name: {WANMPI_*: value}}
    nic_latency_us: int = platform.NIC_LATENCY_US
    shared_from: int = 0                             # collbench --shared-from (0: every size checked)
    sharing: str = "tcp"                             # run.SHARING


def _value(source: str, key: str, raw, parse):
    try:
        return parse(raw)
    except (ValueError, TypeError) as e:
        raise SweepError(f"{source}: {key}: {raw!r}: {e}") from None


def _sites(raw) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 2:
        raise ValueError("a number of sites, 2 or more")
    return raw


def _nodes(raw) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or not 1 <= raw <= platform.MAX_NODES_PER_CLUSTER:
        raise ValueError(f"a whole number of nodes in [1, {platform.MAX_NODES_PER_CLUSTER}]")
    return raw


def _relays(raw) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw <= MAX_RELAYS_PER_CLUSTER:
        raise ValueError(f"a whole number of relays per site in [0, {MAX_RELAYS_PER_CLUSTER}]")
    return raw


PARSERS = {"sites": _sites, "nodes_per_cluster": _nodes, "nic_rate": units.parse_rate,
           "wan_rate": units.parse_rate, "delay": units.parse_duration_us, "relays": _relays}


def _point(values: dict) -> Point:
    return Point(values["sites"], values["nodes_per_cluster"], values["nic_rate"], values["wan_rate"],
                 values["delay"], values.get("relays"))


def _list(source: str, key: str, raw) -> list:
    if not isinstance(raw, list) or not raw:
        raise SweepError(f"{source}: {key}: expected a non-empty list, got {raw!r}")
    return raw


def load_spec(path: str | Path) -> Spec:
    """The sweep spec at `path`, every value checked; SweepError names the problem."""
    source = str(path)
    try:
        raw = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise SweepError(f"{source}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{source}: not TOML: {e}") from None
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise SweepError(f"{source}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KEYS))})")
    ops = _list(source, "ops", raw.get("ops", ["bcast", "allreduce", "alltoall"]))
    for op in ops:
        if op not in run.OPS:
            raise SweepError(f"{source}: ops: {op!r} is not one of {', '.join(run.OPS)}")
    sizes = [_value(source, "bytes", b, units.parse_size) for b in _list(source, "bytes", raw.get("bytes", ["1MiB"]))]
    selectors = _list(source, "selectors", raw.get("selectors", list(run.SELECTORS)))
    for s in selectors:
        if s not in run.SELECTORS:
            raise SweepError(f"{source}: selectors: {s!r} is not one of {', '.join(run.SELECTORS)}")
    timeout = _value(source, "timeout", raw.get("timeout", "1800s"), units.parse_duration_us) / 1e6
    memory = _value(source, "max_memory", raw.get("max_memory", "16GiB"), units.parse_size)
    base_raw, axes_raw = raw.get("base"), raw.get("axes", {})
    if not isinstance(base_raw, dict) or not set(AXES) <= set(base_raw) <= set(AXES + OPTIONAL_AXES):
        raise SweepError(f"{source}: [base] must set exactly {', '.join(AXES)} (and may set "
                         f"{', '.join(OPTIONAL_AXES)})")
    if not isinstance(axes_raw, dict) or set(axes_raw) - set(AXES + OPTIONAL_AXES):
        raise SweepError(f"{source}: [axes]: unknown axis in {', '.join(sorted(axes_raw))} "
                         f"(axes: {', '.join(AXES + OPTIONAL_AXES)})")
    base_values = {k: _value(source, f"base.{k}", v, PARSERS[k]) for k, v in base_raw.items()}
    base = _point(base_values)
    points = [base]
    for axis, values in axes_raw.items():
        for v in _list(source, f"axes.{axis}", values):
            p = _point({**base_values, axis: _value(source, f"axes.{axis}", v, PARSERS[axis])})
            if p not in points:
                points.append(p)
    topologies = _topologies(source, raw.get("topologies"), {p.sites for p in points})
    sharing = raw.get("sharing", "tcp")
    if not isinstance(sharing, str) or sharing not in run.SHARING:
        raise SweepError(f"{source}: sharing: {sharing!r} is not one of {', '.join(run.SHARING)}")
    return Spec(source, tuple(ops), tuple(dict.fromkeys(sizes)), tuple(selectors), timeout, memory, topologies,
                base, tuple(points), _settings(source, raw.get("settings", {})),
                _value(source, "nic_latency", raw.get("nic_latency", f"{platform.NIC_LATENCY_US}us"),
                       units.parse_duration_us),
                _value(source, "shared_from", raw["shared_from"], units.parse_size) if "shared_from" in raw else 0,
                sharing)


def _settings(source: str, raw) -> dict:
    """[settings.NAME] tables: libwanmpi variants "wanmpi-NAME" with those WANMPI_* variables."""
    if not isinstance(raw, dict):
        raise SweepError(f"{source}: settings: expected tables [settings.NAME]")
    out = {}
    for name, table in raw.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name) or not isinstance(table, dict) or not table:
            raise SweepError(f"{source}: settings.{name}: expected a table of WANMPI_* variables under a "
                             "lower-case name")
        for key, value in table.items():
            if not re.fullmatch(r"WANMPI_[A-Z0-9_]+", key) or not isinstance(value, (str, int)):
                raise SweepError(f"{source}: settings.{name}.{key}: expected WANMPI_<NAME> = \"value\"")
        out[f"wanmpi-{name}"] = {k: str(v) for k, v in table.items()}
    return out


def _topologies(source: str, raw, needed: set[int]) -> dict:
    """{sites: Topology}, each file relative to the spec and checked to have that many clusters."""
    if not isinstance(raw, dict):
        raise SweepError(f"{source}: [topologies] is missing: a topology file for each number of sites")
    out = {}
    for sites in sorted(needed):
        name = raw.get(str(sites))
        if not isinstance(name, str):
            raise SweepError(f"{source}: [topologies] has no file for {sites} sites")
        path = (Path(source).parent / name).resolve()
        try:
            t = load(path)
        except (OSError, ValueError) as e:
            raise SweepError(f"{source}: topologies.{sites}: {e}") from None
        if len(t.clusters) != sites:
            raise SweepError(f"{source}: topologies.{sites}: {path} has {len(t.clusters)} clusters, not {sites}")
        out[sites] = t
    return out


def platform_of(spec: Spec, p: Point):
    o = platform.Overrides(p.nodes_per_cluster, p.nic_bps, p.wan_bps, p.delay_us, relays=p.relays)
    return platform.simulated(spec.topologies[p.sites], o)


def memory_needed(spec: Spec, p: Point) -> int:
    """Bytes: every rank's buffers for the largest size, or for a size in
    shared buffers, the ranks' staging and the two buffers once."""
    ranks = p.sites * p.nodes_per_cluster
    return max(ranks * STAGING_PER_RANK * size + 2 * size if spec.shared_from and size >= spec.shared_from
               else ranks * BUFFERS_PER_RANK * size for size in spec.sizes)


def variants(spec: Spec) -> list[tuple[str, bool, str | None]]:
    """(selector, with libwanmpi, settings' name): ours over the first
    selector, ours with each [settings.NAME], then each selector alone."""
    first = spec.selectors[0]
    return [(first, True, None), *((first, True, name) for name in spec.settings),
            *((s, False, None) for s in spec.selectors)]


def variant_names(spec: Spec) -> list[str]:
    return ["wanmpi", *spec.settings, *spec.selectors]


def simulate_point(spec: Spec, simgrid: Path | None, p: Point, selector: str, wanmpi: bool,
                   name: str | None) -> Record:
    sim = platform_of(spec, p)
    args = ["--ops", ",".join(spec.ops), "--sizes", ",".join(map(str, spec.sizes)), "--iters", "1",
            "--warmup", "1", "--start", "clock", *(["--shared-from", str(spec.shared_from)] if spec.shared_from else [])]
    record = run.simulate_case(sim, "collbench", selector, wanmpi, run.default_send_overhead(sim),
                               run.program("collbench", wanmpi), args, spec.timeout_s,
                               params=tuple(p.as_dict().items()), variant=name,
                               settings=spec.settings.get(name) if name else None,
                               nic_latency_us=spec.nic_latency_us, sharing=spec.sharing, simgrid=simgrid)
    # the simulated times too: a long sweep's log shows each result as it ends
    times = "; ".join(f"{row['op']} {format_bytes(row['bytes'])} {row['median_s']:.6f} s"
                      for row in record.metrics.get("rows", []))
    state = f"ok: {times}" if record.ok else f"FAILED ({record.error})"
    print(f"  {p.label()}, {record.case.variant}: {record.seconds:.0f} s of wall time, {state}", flush=True)
    return record


def summary(spec: Spec, records: list[Record]) -> list[dict]:
    """One row per point, op and size: each variant's seconds, the bound, and
    ours over the best of the MPIs' algorithms (a speed-up: > 1 is ours faster)."""
    seconds: dict = {}
    asked = [(op, size) for op in spec.ops for size in spec.sizes]     # collbench's order
    for r in records:
        if r.ok:
            # by order: collbench rounds a size down to whole ints per rank (1 MiB over 24 ranks: 1048512 B)
            for row, (op, size) in zip(r.metrics["rows"], asked):
                key = (tuple(r.case.params), op, size)
                seconds.setdefault(key, {})[r.case.variant] = row["median_s"]
    rows, path = [], platform.path_latency_s(spec.nic_latency_us)
    for p in spec.points:
        sim = platform_of(spec, p)
        for op in spec.ops:
            for size in spec.sizes:
                got = seconds.get((tuple(p.as_dict().items()), op, size), {})
                bound = lower_bound(sim, op, size, list(sim.nodes), p.delay_us / 1000, path)
                row = {**p.as_dict(), "ranks": len(sim.nodes), "op": op, "bytes": size, "bound_s": bound,
                       **{f"{v}_s": got.get(v) for v in variant_names(spec)},
                       "checked": not (spec.shared_from and size >= spec.shared_from)}
                best = [got[s] for s in spec.selectors if got.get(s)]
                if got.get("wanmpi"):
                    row["wanmpi_of_bound"] = round(got["wanmpi"] / bound, 3)
                    row["best_mpi_over_wanmpi"] = round(min(best) / got["wanmpi"], 3) if best else None
                rows.append(row)
    return rows


def print_summary(rows: list[dict], others: list[str]) -> None:
    print("\npoint | op, size | bound | wanmpi (x bound) | " + " | ".join(others) + " | best MPI / wanmpi")
    for r in rows:
        cells = [f"{r[f'{s}_s']:.4f}" if r.get(f"{s}_s") else "-" for s in others]
        ours = f"{r['wanmpi_s']:.4f} ({r['wanmpi_of_bound']:.2f}x)" if r.get("wanmpi_s") else "-"
        ratio = f"{r['best_mpi_over_wanmpi']:.2f}" if r.get("best_mpi_over_wanmpi") else "-"
        print(f"{r['sites']}x{r['nodes_per_cluster']} {units.format_rate(r['nic_bps'])}/"
              f"{units.format_rate(r['wan_bps'])} {r['delay_ms']:g}ms"
              f"{'' if r.get('relays') is None else ' ' + str(r['relays']) + ' relays'} | {r['op']} "
              f"{format_bytes(r['bytes'])} | "
              f"{r['bound_s']:.4f} | {ours} | " + " | ".join(cells) + f" | {ratio}")


def sweep(spec: Spec, jobs: int, json_path: str | None, simgrid: Path | None = None) -> int:
    """Every point and variant of `spec`, `jobs` simulations at a time, on
    the SimGrid library `simgrid` (None: Debian's; library.py)."""
    started_iso, started = now_iso(), time.monotonic()
    run.build()
    todo, skipped = [], []
    for p in spec.points:
        need = memory_needed(spec, p)
        if need > spec.max_memory:
            skipped.append({**p.as_dict(), "why": f"buffers need about {units.format_size(need)}, "
                                                  f"over max_memory {units.format_size(spec.max_memory)}"})
            print(f"skipped: {p.label()}: {skipped[-1]['why']}")
            continue
        todo += [(p, *v) for v in variants(spec)]
    print(f"{len(todo)} simulations of {len(spec.points) - len(skipped)} points, {jobs} at a time", flush=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        records = list(pool.map(lambda job: simulate_point(spec, simgrid, *job), todo))
    rows = summary(spec, records)
    print_summary(rows, variant_names(spec)[1:])
    settings = {"simulator": "SimGrid SMPI", "simgrid": library.describe(simgrid), "spec": spec.source,
                "spec_text": Path(spec.source).read_text(), "jobs": jobs, "start": "clock", "skipped": skipped,
                "cpus": os.cpu_count(), "nic_latency_us": spec.nic_latency_us,
                "smpi_options": run.smpi_options(spec.selectors[0], 0.0, spec.sharing),
                "shared_from": spec.shared_from}
    document = finish("sim-sweep", spec.topologies[spec.base.sites], settings, records, rows, started_iso,
                      started, json_path)
    return exit_status(document)


def run_sweep(path: str, jobs: int, json_path: str | None, simgrid: Path | None = None) -> int:
    try:
        spec = load_spec(path)
    except SweepError as e:
        raise BenchError(str(e)) from None
    for p in spec.points:       # every platform checked before anything runs
        platform.check_routes(platform_of(spec, p))
    return sweep(spec, jobs, json_path, simgrid)


