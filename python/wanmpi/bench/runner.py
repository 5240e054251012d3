"""The runner every `wanmpi bench` suite of MPI jobs shares: it runs a plan of
cases (cases.py) on the testbed each case needs, with a progress line per
case and failures recorded instead of fatal; the records go into the one
result format (results.py).

A benchmark builds the plan (a list of cases) and an `execute(case) ->
metrics` function; the runner does the rest:

- **Topology per case.** The runner groups the cases by their
  `TopologySpec` (in plan order, the topology already up first), brings each
  group's testbed up, runs the group, and at the end leaves the machine as it
  found it: the testbed that was up is up again (with its link settings), or
  none.
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
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Callable, Protocol

from .. import topo
from ..testbed import emulator, net, probe
from ..topo import Topology
from .cases import BenchError, Case, Record, TopologySpec

BEHIND_LATE_200US = 0.01        # share of releases late: the emulator fell behind (every bench)
BEHIND_LATE_1MS = 0.001


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


def require_testbed(t: Topology) -> None:
    """The testbed of `t` is up and healthy, or BenchError says why not."""
    state = net.State.load()
    if state is None or state.topology_text != t.text:
        raise BenchError(f"the testbed of {t.source} is not up: run `wanmpi testbed up`")
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
