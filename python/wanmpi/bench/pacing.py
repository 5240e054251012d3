"""`wanmpi bench pacing`: NAS-like communication patterns with and without
pacing, side by side, with the TCP retransmission timeouts that explain them.

Kernels (bench/patterns.c): IS (alltoall of counts, then alltoallv of about
128 KiB per pair), FT (alltoall of 1 MiB per pair), LU (pipelined wavefront of
1 KiB messages over a 2-row grid whose rows are the two clusters). For every
congestion control, one-way delay, kernel and variant, `reps` jobs run; the
table shows the median time per iteration, the speed-up over Open MPI alone
and the job's RTOs (TCPTimeouts summed over the nodes), retransmitted
segments and the emulator's drops.

Variants (all Open MPI; each a set of WANMPI_* settings):
  ompi        the MPI library alone, nothing preloaded
  paper       the pacing paper: the MPI library's own all-to-all with every
              WAN socket paced at MATB = B / N for its duration, and every WAN
              socket at B / N for the whole run (its LU setting)
  paper-2n    the same at B / 2N (the paper's better IS setting)
  wanmpi      libwanmpi's scheduled all-to-all with "auto" rates (WAN share
              by volume and destination host, local flows kept within the
              receivers' NICs); point-to-point traffic not paced
  wanmpi-unpaced  the same schedule, nothing paced: what the schedule alone
              gives, so the difference to `wanmpi` is pacing's own
  wanmpi-p2p  the same, plus every WAN socket at B / N for the whole run

Congestion control is set in every node namespace; cubic needs the host's
tcp_allowed_congestion_control to list it, so the benchmark adds it for the
run and puts the list back afterwards (also on Ctrl-C).

Every job is a case of the runner (progress on stderr, a failed job
recorded and the others run, the JSON in the result format of results.py
with the cells below as the summary).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import paths, shell
from ..job import placement, tcpstats
from ..testbed import congestion, emulator, net
from ..topo import Topology
from . import plot
from .cases import BenchError, Case, Record
from .job_output import job_rows
from .results import exit_status, finish, now_iso
from .runner import Runner, emulator_totals

KERNELS = {"is": ["--iters", "10"], "ft": ["--iters", "3"], "lu": ["--iters", "4"]}
CONGESTION_CONTROLS = ("cubic", "bbr")


@dataclass(frozen=True)
class Variant:
    name: str
    wanmpi: bool
    env: dict = field(default_factory=dict)
    p2p_senders_divisor: int = 0          # > 0: every WAN socket at B / (N x this) for the whole run


PAPER = {"WANMPI_ALLTOALL": "paced", "WANMPI_ALLTOALLV": "paced", "WANMPI_ALLTOALL_RATE": "matb"}
OURS = {"WANMPI_ALLTOALL": "scheduled", "WANMPI_ALLTOALLV": "scheduled", "WANMPI_ALLTOALL_RATE": "auto"}
VARIANTS = {v.name: v for v in (
    Variant("ompi", False),
    Variant("paper", True, {**PAPER, "WANMPI_MATB_DIVISOR": "1"}, 1),
    Variant("paper-2n", True, {**PAPER, "WANMPI_MATB_DIVISOR": "2"}, 2),
    Variant("wanmpi-unpaced", True, {**OURS, "WANMPI_ALLTOALL_RATE": "off", "WANMPI_PACING_RATE": "0"}),
    Variant("wanmpi", True, {**OURS, "WANMPI_PACING_RATE": "0"}),
    Variant("wanmpi-p2p", True, OURS, 1),
)}
REFERENCE = "ompi"


@dataclass
class Result:
    cc: str
    delay_ms: float
    kernel: str
    variant: str
    per_iter_s: list[float]
    rto: list[int]
    retrans_segs: list[int]
    drops: list[int]

    @property
    def median_s(self) -> float:
        return statistics.median(self.per_iter_s)

    @property
    def median_rto(self) -> float:
        return statistics.median(self.rto)


def senders(topo: Topology) -> int:
    return max(len(c.nodes) for c in topo.clusters)


def wan_rate_bytes(topo: Topology) -> int:
    return min(l.rate_bps for l in topo.links) // 8


def set_congestion_control(topo: Topology, cc: str) -> None:
    for node in topo.nodes:
        done = shell.run(net.in_netns(node.netns, ["sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={cc}"]),
                         check=False)
        if done.returncode != 0:
            raise BenchError(f"cannot set congestion control {cc} on {node.name}: {done.stderr.strip()}")


def run_pattern(topo: Topology, v: Variant, kernel: str, timeout: float) -> tuple[dict, tcpstats.Snapshot, int]:
    """One job of a kernel and variant on the running testbed: its result line,
    the TCP counters of its nodes over it, and the emulator's drops."""
    env = dict(v.env)
    if v.p2p_senders_divisor:
        env["WANMPI_PACING_RATE"] = str(wan_rate_bytes(topo) // (senders(topo) * v.p2p_senders_divisor))
    ranks = placement.placement(topo, len(topo.nodes))
    before = emulator_totals(emulator.counters())
    with tcpstats.measure(topo, ranks) as m:
        rows = job_rows(topo, "openmpi", [str(paths.program("openmpi", "patterns")), kernel, *KERNELS[kernel]],
                        ranks, env=env, wanmpi=v.wanmpi, timeout=timeout)
    after = emulator_totals(emulator.counters())
    if rows[-1].get("check") != "ok":
        raise BenchError(f"{kernel} / {v.name}: the self-check did not pass: {rows[-1]}")
    drops = after["drop_queue"] + after["drop_loss"] - before["drop_queue"] - before["drop_loss"]
    return rows[-1], m.delta, drops


def cases(variants: list[str], kernels: list[str], delays: list[float], ccs: list[str], reps: int) -> list[Case]:
    """Congestion control outermost (set once per value), then delay, kernel,
    repetition; the variants of a repetition side by side."""
    return [Case(kernel, name, "openmpi", delay, rep, params=(("cc", cc),))
            for cc in ccs for delay in delays for kernel in kernels for rep in range(1, reps + 1)
            for name in variants]


def results_of(records: list[Record]) -> list[Result]:
    """The repetitions of a cell together (failed ones left out)."""
    cells: dict[tuple, Result] = {}
    for r in records:
        c = r.case
        cell = cells.setdefault((c.param("cc"), c.delay_ms, c.kernel, c.variant),
                                Result(c.param("cc"), c.delay_ms, c.kernel, c.variant, [], [], [], []))
        if r.ok:
            cell.per_iter_s.append(r.metrics["per_iter_s"])
            cell.rto.append(r.metrics["rto"])
            cell.retrans_segs.append(r.metrics["retrans_segs"])
            cell.drops.append(r.metrics["drops"])
    return [cell for cell in cells.values() if cell.per_iter_s]


def restore_congestion_control(topo: Topology, current: str | None, allowed_before: list[str]) -> None:
    """The nodes' congestion control back to the host's default (bbr if it was allowed), if the run changed it."""
    state = net.State.load()
    if current is not None and state is not None and state.topology_text == topo.text:
        try:
            set_congestion_control(topo, "bbr" if "bbr" in allowed_before else allowed_before[0])
        except (OSError, BenchError) as e:
            print(f"wanmpi: could not restore the nodes' congestion control ({e})")


def run(topo: Topology, variants: list[str], kernels: list[str], delays: list[float], ccs: list[str],
        reps: int, json_path: str | None, timeout: float, plot_dir: str | None = None) -> int:
    """With the runner on the testbed of `topo` (brought up for the run if it
    is not up); the host's allowed congestion controls and the nodes' own are
    put back at the end."""
    current = {"cc": None}
    started_iso, started = now_iso(), time.monotonic()

    def execute(case: Case, t: Topology) -> dict:
        if current["cc"] != case.param("cc"):
            set_congestion_control(t, case.param("cc"))
            current["cc"] = case.param("cc")
        row, delta, drops = run_pattern(t, VARIANTS[case.variant], case.kernel, timeout)
        return {"per_iter_s": row["per_iter_s"], "seconds": row["seconds"], "iters": row["iters"],
                "rto": delta.total.rto, "retrans_segs": delta.total.retrans_segs, "drops": drops}

    with congestion.allowing(ccs) as allowed_before:
        try:
            records = Runner(topo).run(cases(variants, kernels, delays, ccs, reps), execute)
        finally:
            restore_congestion_control(topo, current["cc"], allowed_before)
    results = results_of(records)
    print_table(results, variants)
    settings = {"variants": variants, "kernels": kernels, "delays": delays, "cc": ccs, "reps": reps,
                "kernel_args": {k: KERNELS[k] for k in kernels}, "timeout_s": timeout}
    document = finish("pacing", topo, settings, records, summary(results), started_iso, started, json_path)
    if plot_dir and results:
        for path in plot.pacing(summary(results), Path(plot_dir)):
            print(f"plot: {path}")
    return exit_status(document)


def summary(results: list[Result]) -> list[dict]:
    return [{**asdict(r), "median_s": r.median_s, "best_s": min(r.per_iter_s), "median_rto": r.median_rto}
            for r in results]


def print_table(results: list[Result], variants: list[str]) -> None:
    keyed = {(r.cc, r.delay_ms, r.kernel, r.variant): r for r in results}
    print("\nmedian time per iteration (speed-up over Open MPI alone) [RTOs per job, median; retransmitted "
          "segments; emulator drops]")
    header = f"{'cc':6} {'delay':>6} {'kernel':6} " + " ".join(f"{v:>30}" for v in variants)
    print(header)
    for (cc, delay, kernel) in dict.fromkeys((r.cc, r.delay_ms, r.kernel) for r in results):
        ref = keyed.get((cc, delay, kernel, REFERENCE))
        cells = []
        for v in variants:
            r = keyed.get((cc, delay, kernel, v))
            if r is None:
                cells.append(f"{'-':>30}")
                continue
            speed = f"{ref.median_s / r.median_s:4.2f}x" if ref else "  -  "
            cell = (f"{r.median_s * 1e3:7.1f} ms ({speed}) [{r.median_rto:g}; "
                    f"{statistics.median(r.retrans_segs):g}; {statistics.median(r.drops):g}]")
            cells.append(f"{cell:>30}")
        print(f"{cc:6} {delay:5g}ms {kernel:6} " + " ".join(cells))
