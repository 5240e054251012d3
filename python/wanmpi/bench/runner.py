"""The runner every `wanmpi bench` suite of MPI jobs shares: a plan of cases,
the testbed each case needs, a progress line per case, failures recorded
instead of fatal, and one result format (docs/benchmarks.md, "Result format").

A **case** is one measurement: one job (kernel x variant x MPI x one-way delay
x repetition, plus what the benchmark adds in `params`). A benchmark builds
the plan (a list of cases) and an `execute(case) -> metrics` function; the
runner does the rest:

- **Topology per case.** Every case names a `TopologySpec`: the testbed's own
  topology, or one derived from it by a transform of the topology file
  (`single_cluster`: one cluster with all the nodes, the normalisation of the
  suite; `with_relays(n)`: every cluster with n relay nodes). The runner
  groups the cases by topology (in plan order, the topology already up
  first), brings each group's testbed up, runs the group, and at the end
  leaves the machine as it found it: the testbed that was up is up again
  (with its link settings), or none.
- **Delay.** Before a case the WAN links are set to the case's one-way delay
  (`delay_ms` None: left as they are); the topology's settings are put back
  after each group, also on failure or Ctrl-C.
- **Environment per case.** The 1-minute load average at its start, the
  machine's CPU idle share over it, and what the emulator counted during it
  (drops, releases more than 0.2 ms and 1 ms late, and `behind` when it fell
  behind: docs/wanem.md's thresholds).
- **Failures.** An exception in `execute` (a job that failed, timed out or
  printed no result) marks the case failed with the error; the run goes on.
  Before every case the testbed is checked: if something took it down or
  broke it, it is brought up again (or the case fails, saying so). The
  records of an interrupted run stay in `Runner.records`, for the results.
- **Progress.** One line per finished case on stderr: its number, the
  elapsed time, an ETA (mean case time of its kind so far x cases left), the
  case and its outcome.

Topology transforms work on the parsed file (a dict), so a new technique
that needs a different testbed is a new `TopologySpec`: see `with_relays`.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Protocol

from .. import paths, topo
from ..testbed import emulator, net, probe
from ..topo import Topology

FORMAT = "wanmpi-bench/1"
BEHIND_LATE_200US = 0.01        # share of releases late: the emulator fell behind (every bench)
BEHIND_LATE_1MS = 0.001


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


def with_relays(n: int, relay_nic_bps: int | None = None, public: bool = False) -> TopologySpec:
    """Every cluster of the base topology with `n` relay nodes (`relays = n`),
    at `relay_nic_bps` (None: the node NIC), made public if `public` (so
    the same testbed also runs jobs directly, `--no-relays`). `wanmpi run`
    starts the relays when the topology has them."""
    def transform(raw: dict) -> dict:
        out = {k: v for k, v in raw.items() if k != "relay"}
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


# ---- the testbed, injectable (tests drive the runner without one) -----------------------
class Testbed(Protocol):
    def current(self) -> Topology | None: ...
    def bring_up(self, t: Topology) -> None: ...
    def take_down(self) -> None: ...
    def set_delay(self, delay_ms: float) -> None: ...
    def link_settings(self) -> dict: ...
    def restore_links(self, saved: dict) -> None: ...
    def emulator_counters(self) -> dict: ...
    def healthy(self) -> bool: ...


class NetnsTestbed:
    """The emulated testbed of this machine (testbed/net.py, testbed/emulator.py)."""

    def current(self) -> Topology | None:
        state = net.State.load()
        if state is None:
            return None
        return topo.loads(state.topology_text, state.topology_source)

    def bring_up(self, t: Topology) -> None:
        state = net.State.load()
        if state is not None and state.topology_text != t.text:
            net.teardown(state)
        net.Net(t).up()
        problems = net.health(net.State.load())
        if problems:
            raise BenchError("the testbed is not healthy: " + "; ".join(problems))

    def take_down(self) -> None:
        net.teardown(net.State.load())

    def set_delay(self, delay_ms: float) -> None:
        for (link, direction), values in emulator.settings().items():
            emulator.request({"cmd": "set", "link": link, "dir": direction, **values,
                              "delay_us": int(round(delay_ms * 1000))})

    def link_settings(self) -> dict:
        return emulator.settings()

    def restore_links(self, saved: dict) -> None:
        emulator.apply(saved)

    def emulator_counters(self) -> dict:
        return emulator.counters()

    def healthy(self) -> bool:
        state = net.State.load()
        return state is not None and not net.health(state)


def require_testbed(topo: Topology) -> None:
    """The testbed of `topo` is up and healthy, or BenchError says why not."""
    state = net.State.load()
    if state is None or state.topology_text != topo.text:
        raise BenchError(f"the testbed of {topo.source} is not up: run `wanmpi testbed up`")
    problems = net.health(state)
    if problems:
        raise BenchError("the testbed is not healthy: " + "; ".join(problems))


# ---- environment ------------------------------------------------------------------------
def emulator_totals(counters: dict) -> dict[str, int]:
    keys = ("drop_queue", "drop_loss", "late_200us", "late_1ms", "tx_packets")
    return {k: sum(c.get(k, 0) for c in counters.values()) for k in keys}


def emulator_share(before: dict, after: dict) -> dict:
    b, a = emulator_totals(before), emulator_totals(after)
    d = {k: a[k] - b[k] for k in a}
    released = d["tx_packets"]
    return {"drops": d["drop_queue"] + d["drop_loss"], "late_200us": d["late_200us"], "late_1ms": d["late_1ms"],
            "released": released,
            "behind": bool(d["late_200us"] > BEHIND_LATE_200US * released
                           or d["late_1ms"] > BEHIND_LATE_1MS * released)}


def cpu_idle_share(before: dict, after: dict) -> float | None:
    d = [x - y for x, y in zip(after.get("cpu", []), before.get("cpu", []))]
    return round(sum(d[3:5]) / sum(d), 3) if d and sum(d) else None


def git_commit() -> dict:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(paths.REPO), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""
    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "-uno"))}


def machine() -> dict:
    return {"host": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(),
            "load_avg": [round(x, 2) for x in os.getloadavg()]}


def now_iso() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


# ---- progress ----------------------------------------------------------------------------
def clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """One line per finished case on a stream (stderr): number, elapsed, ETA."""

    def __init__(self, cases: list[Case], stream=None):
        self.cases = cases
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.monotonic()
        self.durations: dict[tuple, list[float]] = {}
        self.every: list[float] = []
        self.done = 0

    def eta(self, index: int) -> float:
        if not self.every:
            return 0.0
        mean = statistics.fmean(self.every)
        left = 0.0
        for c in self.cases[index + 1:]:
            alike = next((self.durations[k] for k in c.kinds() if k in self.durations), None)
            left += statistics.fmean(alike) if alike else mean
        return left

    def finished(self, index: int, record: Record) -> str:
        self.done += 1
        self.every.append(record.seconds)
        for k in record.case.kinds():
            self.durations.setdefault(k, []).append(record.seconds)
        outcome = (f"ok {record.seconds:.1f} s" if record.ok
                   else f"FAILED after {record.seconds:.1f} s: {record.error}")
        env = record.env
        notes = []
        if env.get("emulator", {}).get("behind"):
            notes.append("emulator behind")
        line = (f"[{index + 1:>{len(str(len(self.cases)))}}/{len(self.cases)}] "
                f"{clock(time.monotonic() - self.started)} elapsed, ETA {clock(self.eta(index))} | "
                f"{record.case.label()}: {outcome}" + (f" ({', '.join(notes)})" if notes else ""))
        print(line, file=self.stream, flush=True)
        return line

    def note(self, text: str) -> None:
        print(f"{' ' * (2 * len(str(len(self.cases))) + 3)}{clock(time.monotonic() - self.started)} "
              f"elapsed | {text}", file=self.stream, flush=True)


# ---- the runner ---------------------------------------------------------------------------
class Runner:
    """Runs a plan of cases on the testbed; see the module's docstring."""

    def __init__(self, base: Topology, testbed: Testbed | None = None, stream=None):
        self.base = base
        self.testbed = testbed if testbed is not None else NetnsTestbed()
        self.stream = stream
        self.derived: dict[str, Topology] = {}
        self.records: list[Record] = []      # of the last run, also when it was interrupted
        self.rebuilt = 0                     # testbeds brought up again under the run

    def topology(self, spec: TopologySpec) -> Topology:
        if spec.name not in self.derived:
            self.derived[spec.name] = spec.derive(self.base)
        return self.derived[spec.name]

    def groups(self, cases: list[Case]) -> list[tuple[TopologySpec, list[int]]]:
        """Case indices per topology, in plan order, the topology that is up first."""
        order: dict[str, tuple[TopologySpec, list[int]]] = {}
        for i, c in enumerate(cases):
            order.setdefault(c.topology.name, (c.topology, []))[1].append(i)
        up = self.testbed.current()
        groups = list(order.values())

        def is_up(spec: TopologySpec) -> bool:
            try:
                return up is not None and self.topology(spec).text == up.text
            except (topo.TopologyError, BenchError):
                return False                      # run() reports it for the group
        groups.sort(key=lambda g: 0 if is_up(g[0]) else 1)
        return groups

    def run(self, cases: list[Case], execute: Callable[[Case, Topology], dict]) -> list[Record]:
        records = self.records = [Record(c) for c in cases]
        progress = Progress(cases, self.stream)
        found = self.testbed.current()
        found_links = self.testbed.link_settings() if found is not None else None
        try:
            for spec, indices in self.groups(cases):
                try:
                    t = self.topology(spec)
                    up = self.testbed.current()
                    if up is None or up.text != t.text:
                        progress.note(f"testbed up: {spec.name} ({spec.description})")
                        self.testbed.bring_up(t)
                except Exception as e:           # noqa: BLE001 - the whole group fails, the run goes on
                    for i in indices:
                        records[i].status, records[i].error = "failed", f"testbed {spec.name}: {e}"
                        progress.finished(i, records[i])
                    continue
                saved = self.testbed.link_settings()
                try:
                    for i in indices:
                        if self.still_up(t, spec, progress):
                            self.run_case(records[i], t, execute)
                        else:
                            records[i].status = "failed"
                            records[i].error = f"testbed {spec.name} is gone and could not be brought up again"
                        progress.finished(i, records[i])
                finally:
                    try:
                        self.testbed.restore_links(saved)
                    except Exception as e:       # noqa: BLE001 - the testbed may be gone; results come first
                        progress.note(f"could not restore the link settings: {e}")
        finally:
            self.restore(found, found_links, progress)
        return records

    def still_up(self, t: Topology, spec: TopologySpec, progress: Progress) -> bool:
        """The group's testbed is up and healthy before a case, or brought up
        again (something else took it down or broke it: the case says so in
        its environment)."""
        try:
            up = self.testbed.current()
            if up is not None and up.text == t.text and self.testbed.healthy():
                return True
            progress.note(f"the testbed {spec.name} was taken down or broke under the run: bringing it up again")
            self.rebuilt += 1
            self.testbed.bring_up(t)
            return True
        except Exception as e:                   # noqa: BLE001 - this case fails, the run goes on
            progress.note(f"testbed {spec.name} could not be brought up again: {e}")
            return False

    def run_case(self, record: Record, t: Topology, execute: Callable[[Case, Topology], dict]) -> None:
        case = record.case
        started = time.monotonic()
        record.env = {"load_avg_1m": round(os.getloadavg()[0], 2)}
        ticks = probe.cpu_ticks()
        counters = None
        try:
            if case.delay_ms is not None and t.links:
                self.testbed.set_delay(case.delay_ms)
            counters = self.testbed.emulator_counters()
            record.metrics = execute(case, t) or {}
            record.status = "ok"
        except KeyboardInterrupt:
            raise
        except Exception as e:                   # noqa: BLE001 - recorded, the run goes on
            record.status, record.error = "failed", str(e) or type(e).__name__
        finally:
            record.seconds = time.monotonic() - started
            record.env["cpu_idle"] = cpu_idle_share(ticks, probe.cpu_ticks())
            try:
                if counters is not None:
                    record.env["emulator"] = emulator_share(counters, self.testbed.emulator_counters())
            except Exception as e:               # noqa: BLE001 - the environment is best effort
                record.env["emulator_error"] = str(e)

    def restore(self, found: Topology | None, links: dict | None, progress: Progress) -> None:
        """Leave the testbed as it was found: the same topology up with the same
        link settings, or nothing up."""
        up = self.testbed.current()
        try:
            if found is None:
                if up is not None:
                    progress.note("testbed down")
                    self.testbed.take_down()
            elif up is None or up.text != found.text:
                progress.note(f"testbed up again: {found.source}")
                self.testbed.bring_up(found)
                if links:
                    self.testbed.restore_links(links)
        except Exception as e:                   # noqa: BLE001 - said, not fatal: results come first
            print(f"wanmpi: could not restore the testbed ({e}); check `wanmpi testbed status`",
                  file=progress.stream, flush=True)


# ---- results -------------------------------------------------------------------------------
def best_and_median(values: list[float]) -> tuple[float | None, float | None]:
    return (min(values), statistics.median(values)) if values else (None, None)


def result_document(bench: str, base: Topology, settings: dict, records: list[Record], summary: list[dict],
                    started_iso: str, seconds: float, argv: list[str] | None = None) -> dict:
    """The one result format of `wanmpi bench` (docs/benchmarks.md, "Result format")."""
    failed = [r for r in records if not r.ok]
    return {
        "format": FORMAT,
        "bench": bench,
        "command": shlex.join(["wanmpi", *(sys.argv[1:] if argv is None else argv)]),
        "started": started_iso,
        "seconds": round(seconds, 1),
        "git": git_commit(),
        "machine": machine(),
        "topology": {"source": base.source, "text": base.text},
        "settings": settings,
        "counts": {"cases": len(records), "ok": len(records) - len(failed), "failed": len(failed)},
        "cases": [r.as_dict(i) for i, r in enumerate(records)],
        "summary": summary,
    }


def finish(bench: str, base: Topology, settings: dict, records: list[Record], summary: list[dict],
           started_iso: str, started: float, json_path: str | Path | None) -> dict:
    """The end of a `wanmpi bench` run: each failed case and the environment
    on stdout, then the result document, written to `json_path` if given."""
    for r in records:
        if not r.ok:
            print(f"failed: {r.case.label()}: {r.error}")
    print("environment: " + environment_summary(records))
    document = result_document(bench, base, settings, records, summary, started_iso, time.monotonic() - started)
    if json_path:
        write_json(json_path, document)
    return document


def exit_status(document: dict) -> int:
    """1 if a case failed, else 0."""
    return 1 if document["counts"]["failed"] else 0


def write_json(path: str | Path, document: dict) -> None:
    try:
        Path(path).write_text(json.dumps(document, indent=1) + "\n")
    except OSError as e:
        raise BenchError(f"--json: cannot write {path}: {e.strerror}") from None


def read_json(path: str | Path) -> dict:
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BenchError(f"{path}: not a result file: {e}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BenchError(f"{path}: not a {FORMAT} result file")
    return document


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    def cell(v) -> str:
        return "-" if v is None else str(v).replace("|", "\\|")
    out = ["| " + " | ".join(map(cell, headers)) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(out) + "\n"


def environment_summary(records: list[Record]) -> str:
    """One paragraph: load, idle share, emulator drops and lateness, failures."""
    loads = [r.env["load_avg_1m"] for r in records if "load_avg_1m" in r.env]
    idle = [r.env["cpu_idle"] for r in records if r.env.get("cpu_idle") is not None]
    emu = [r.env["emulator"] for r in records if "emulator" in r.env]
    behind = sum(1 for e in emu if e["behind"])
    failed = [r for r in records if not r.ok]
    parts = []
    if loads:
        parts.append(f"load average (1 min) {min(loads):.1f}-{max(loads):.1f}, median {statistics.median(loads):.1f}")
    if idle:
        parts.append(f"CPU idle {100 * min(idle):.0f}-{100 * max(idle):.0f} %, median {100 * statistics.median(idle):.0f} %")
    if emu:
        parts.append(f"emulator: {sum(e['drops'] for e in emu)} drops, "
                     f"{sum(e['late_1ms'] for e in emu)} releases > 1 ms late in all, "
                     f"behind in {behind} of {len(emu)} cases")
    parts.append(f"{len(failed)} of {len(records)} cases failed" if failed else f"all {len(records)} cases ok")
    return "; ".join(parts) + "."


# ---- one MPI job ------------------------------------------------------------------------------
def job_output(t: Topology, mpi: str, argv: list[str], nodes: list, *, env: dict | None = None,
               extra_args: Iterable[str] = (), wanmpi: bool = True, timeout: float = 600,
               use_relays: bool = True) -> tuple[str, str]:
    """Run one job on the testbed that is up; return what it printed on
    stdout and on stderr. BenchError (with the reason from its output) if it
    failed; its stderr is captured, so a failed case records why."""
    import tempfile
    from ..job import launch
    program = Path(argv[0])
    if not program.exists():
        raise BenchError(f"{program} is not built: run `make build`")
    job = launch.Job(t, [str(program), *argv[1:]], list(nodes), dict(env or {}), list(extra_args), wanmpi=wanmpi,
                     use_relays=use_relays)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            status = launch.run_job(launch.launcher(mpi), job, timeout=timeout, stdout=out)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if status != 0:
        raise BenchError(f"exit status {status}: {reason(errors, text)}")
    return text, errors


def job_rows(t: Topology, mpi: str, argv: list[str], nodes: list, **options) -> list[dict]:
    """job_output(), as the JSON lines the job printed; BenchError if none."""
    rows = []
    text, errors = job_output(t, mpi, argv, nodes, **options)
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if not rows:
        raise BenchError(f"no result line: {reason(errors, text)}")
    return rows


LAUNCHER_NOISE = ("---", "[", "NOTE:", "MPI_ABORT was invoked", "with errorcode", "You may or may not",
                  "exactly when", "Primary job", "a non-zero exit", "mpirun", "Process name", "Exit code",
                  "process rank", "===", "BAD TERMINATION", "CLEANING UP", "YOUR APPLICATION", "This typically")


def reason(errors: str, text: str) -> str:
    """The lines of a failed job's output that say why (the launchers' own
    boilerplate left out), at most 400 characters."""
    lines = [l.strip() for l in (errors + "\n" + text).splitlines()]
    said = [l for l in lines if l and not l.startswith(LAUNCHER_NOISE) and not l.startswith("{")]
    return " | ".join(dict.fromkeys(said[:3]))[:400] or "(no output)"
