"""`wanmpi bench coll`: WAN-aware collectives against the MPIs' own, side by side.

For every one-way WAN delay asked for, every variant runs bench/collbench
(one job per variant and delay: all operations and sizes; a case of the
runner, runner.py, whose JSON is the result format of results.py with the rows
below as its summary) on the testbed, and the table shows each median time, its
ratio to the physical lower bound (bounds.py: for two clusters of one WAN
link, bcast max(M/b, M/B) + d, allreduce max(2M(P-1)/(Pb), M/B) + d,
alltoall max((P-1)M/(Pb), (P/2)^2 (M/P)/B) + d) and the speed-up of wanmpi's
multi-lane algorithms over every other variant. The emulator's drops and late releases during
each job are recorded, so a result taken while the emulator fell behind shows;
a job that fails is recorded as failed and the others still run.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import paths, units
from ..job import placement
from ..topo import Topology
from . import plot
from .bounds import lower_bound
from .cases import Case, Record
from .job_output import job_rows
from .results import exit_status, finish, now_iso, rules_settings
from .runner import Runner

OPS = ("bcast", "allreduce", "reduce", "allgather", "allgatherv", "reduce_scatter_block", "reduce_scatter", "alltoall", "alltoallv",
       "alltoallw", "gather", "gatherv", "scatter", "scatterv", "scan", "exscan",
       "ibcast", "iallreduce", "iallgather", "ialltoall")     # nonblocking: MPI_I<op>, then MPI_Wait
# the single-lane baseline (a nonblocking call follows its blocking one; alltoallw has one algorithm of ours)
SINGLE_LANE = {f"WANMPI_{c.upper()}": "paced" if c.startswith("alltoall") else "singlelane"
               for c in OPS if not c.startswith("i") and c != "alltoallw"}
TUNED_BEST = ["--mca", "coll_tuned_use_dynamic_rules", "1",
              "--mca", "coll_tuned_bcast_algorithm", "3",                 # pipeline
              "--mca", "coll_tuned_bcast_algorithm_segmentsize", "32768",
              "--mca", "coll_tuned_allreduce_algorithm", "4"]             # ring


@dataclass(frozen=True)
class Variant:
    name: str
    mpi: str
    wanmpi: bool
    env: dict = field(default_factory=dict)
    extra_args: tuple = ()


VARIANTS = {v.name: v for v in (
    Variant("wanmpi", "openmpi", True),
    Variant("wanmpi-1lane", "openmpi", True, SINGLE_LANE),
    Variant("ompi", "openmpi", False),
    Variant("ompi-han", "openmpi", False, extra_args=("--mca", "coll_han_priority", "100")),
    Variant("ompi-tuned", "openmpi", False, extra_args=tuple(TUNED_BEST)),
    Variant("mpich", "mpich", False),
    Variant("wanmpi-mpich", "mpich", True),
    # Open MPI 5 (`make openmpi5`): its defaults take coll/han (priority 35 over tuned's 30)
    Variant("ompi5", "openmpi5", False),
    Variant("ompi5-tuned", "openmpi5", False, extra_args=("--mca", "coll_han_priority", "0", *TUNED_BEST)),
    Variant("ompi5-adapt", "openmpi5", False, extra_args=("--mca", "coll_adapt_priority", "100")),
    Variant("ompi5-links", "openmpi5", False, extra_args=("--mca", "btl_tcp_links", "4")),
    Variant("wanmpi-ompi5", "openmpi5", True),
    # Intel MPI (`make intelmpi`)
    Variant("impi", "intelmpi", False),
    Variant("wanmpi-impi", "intelmpi", True),
)}
DEFAULT_VARIANTS = ("wanmpi", "wanmpi-1lane", "ompi", "ompi-han", "ompi-tuned", "mpich", "wanmpi-mpich")
REFERENCE = "wanmpi"
DEFAULT_SIZES = "1K,16K,256K,1M,4M,8M"
QUICK_SIZES = "1K,64K,1M"


@dataclass
class Result:
    delay_ms: float
    variant: str
    op: str
    bytes: int
    ranks: int
    iters: int
    median_s: float
    min_s: float
    bound_s: float
    drops: int
    late_1ms: int

    @property
    def of_bound(self) -> float:
        return self.median_s / self.bound_s


def run_variant(topo: Topology, v: Variant, ranks: int, mapping: str | None, args: list[str],
                timeout: float, rules: str | None = None) -> list[dict]:
    """One collbench job of a variant on the running testbed: its JSON rows.
    `rules`: a rules file for the variants that load libwanmpi."""
    return job_rows(topo, v.mpi, [str(paths.program(v.mpi, "collbench")), *args],
                    placement.placement(topo, ranks, mapping), env=v.env, extra_args=v.extra_args,
                    wanmpi=v.wanmpi, timeout=timeout, rules=rules)


def cases(variants: list[Variant], delays: list[float]) -> list[Case]:
    """One job per delay and variant (collbench runs every operation and size)."""
    return [Case("collbench", v.name, v.mpi, delay) for delay in delays for v in variants]


def execute(case: Case, t: Topology, ranks: int, mapping: str | None, args: list[str], timeout: float,
            rules: str | None = None) -> dict:
    return {"rows": run_variant(t, VARIANTS[case.variant], ranks, mapping, args, timeout, rules)}


def results_of(topo: Topology, records: list[Record], ranks: int, mapping: str | None) -> list[Result]:
    nodes = placement.placement(topo, ranks, mapping)
    results = []
    for r in records:
        if not r.ok:
            continue
        emu = r.env.get("emulator", {})
        for row in r.metrics["rows"]:
            results.append(Result(r.case.delay_ms, r.case.variant, row["op"], row["bytes"], row["ranks"],
                                  row["iters"], row["median_s"], row["min_s"],
                                  lower_bound(topo, row["op"], row["bytes"], nodes, r.case.delay_ms),
                                  emu.get("drops", 0), emu.get("late_1ms", 0)))
    return results


def run(topo: Topology, variants: list[Variant], delays: list[float], ops: list[str], sizes: str,
        iters: int, ranks: int | None, mapping: str | None, json_path: str | None,
        plot_dir: str | None, timeout: float, rules: str | None = None, start: str = "barrier") -> int:
    """On the testbed of `topo` (brought up for the run if it is not up, and
    taken down again), with the runner: one case per delay and variant."""
    ranks = ranks or len(topo.nodes)
    args = ["--ops", ",".join(ops), "--sizes", sizes, "--iters", str(iters), "--warmup", "1",
            "--budget", "20", "--start", start]
    started_iso, started = now_iso(), time.monotonic()
    records = Runner(topo).run(cases(variants, delays),
                               lambda case, t: execute(case, t, ranks, mapping, args, timeout, rules))
    results = results_of(topo, records, ranks, mapping)
    print_table(results, [v.name for v in variants])
    settings = {"variants": [v.name for v in variants], "delays": delays, "ops": ops, "sizes": sizes,
                "iters": iters, "ranks": ranks, "map": mapping, "timeout_s": timeout, "start": start,
                **rules_settings(rules)}
    document = finish("coll", topo, settings, records, summary(results), started_iso, started, json_path)
    if plot_dir and results:
        for path in plot.collectives(results, Path(plot_dir)):
            print(f"plot: {path}")
    return exit_status(document)


def summary(results: list[Result]) -> list[dict]:
    return [{**asdict(r), "of_bound": r.of_bound} for r in results]


def print_table(results: list[Result], variants: list[str]) -> None:
    keyed = {(r.delay_ms, r.variant, r.op, r.bytes): r for r in results}
    for delay in sorted({r.delay_ms for r in results}):
        for op in dict.fromkeys(r.op for r in results):
            sizes = sorted({r.bytes for r in results if r.op == op and r.delay_ms == delay})
            print(f"\n{op}, one-way delay {delay:g} ms: median seconds (x lower bound)")
            print(f"  {'size':>8} {'bound':>8} " + " ".join(f"{v:>20}" for v in variants))
            for size in sizes:
                cells = []
                for v in variants:
                    r = keyed.get((delay, v, op, size))
                    cells.append(f"{r.median_s:>11.4f} ({r.of_bound:5.2f}x)" if r else f"{'-':>20}")
                any_r = next(r for r in results if r.op == op and r.bytes == size and r.delay_ms == delay)
                print(f"  {units.format_size(size):>8} {any_r.bound_s:>8.4f} " + " ".join(cells))
            ref = [keyed.get((delay, REFERENCE, op, s)) for s in sizes]
            if any(ref):
                print(f"  speed-up of {REFERENCE} (other / {REFERENCE}):")
                for v in variants:
                    if v == REFERENCE:
                        continue
                    ratios = []
                    for s, rr in zip(sizes, ref):
                        o = keyed.get((delay, v, op, s))
                        ratios.append(f"{o.median_s / rr.median_s:6.2f}" if o and rr else "     -")
                    print(f"  {v:>20}: " + " ".join(ratios))
    drops = {}
    for r in results:
        drops[(r.delay_ms, r.variant)] = (r.drops, r.late_1ms)
    worst = max((d for d, _ in drops.values()), default=0)
    late = max((l for _, l in drops.values()), default=0)
    print(f"\nemulator: at most {worst} drops and {late} packets released > 1 ms late in one job")
