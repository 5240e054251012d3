"""`wanmpi tune`: measure where libwanmpi's algorithms beat the MPI's own, on
the testbed, and write the crossovers as a rules file (docs/tuning.md).

For every MPI and one-way delay, bench/collbench runs over every node of the
topology (one rank each) with three settings, one job each:
  multi   our multi-lane collectives (WANMPI_SMALL=0: no single-lane path
          for small messages) and the scheduled all-to-all
  single  our single-lane collectives and the paced all-to-all
  mpi     the MPI library's own algorithm for every collective, with
          libwanmpi still preloaded (the same preload cost)
The three jobs alternate in rounds, so a load that drifts hits all alike;
per (MPI, delay, collective, size, setting) the best median over the rounds
counts. Cases run on the runner (runner.py: testbed up and put back, delay per
case, failures recorded), the rules come from crossovers.py.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from .. import paths, units
from ..job import placement
from ..rules import ALGORITHMS, format_bytes
from ..topo import Topology
from .cases import BenchError, Case, Record, plan
from .crossovers import MARGIN, SETTINGS, Cell, algorithm, choose, rules_text
from .job_output import job_rows
from .results import finish, git_commit, now_iso
from .runner import Runner

OPS = tuple(ALGORITHMS)                       # every collective libwanmpi wraps, alltoall(v) last
MPIS = ("openmpi", "mpich")
DEFAULT_DELAYS = "0,10"
DEFAULT_SIZES = "8,64,512,4K,32K,256K,1M,4M"  # the small-message matrix and the large sizes
ITERS = 5                                     # timed iterations per size, at most
BUDGET_S = 0.5                                # per size: stop repeating once the iterations took this long
PROGRAM = "collbench"


def setting_env(setting: str) -> dict[str, str]:
    """The WANMPI_* variables of a setting: every collective forced to its algorithm."""
    env = {f"WANMPI_{op.upper()}": algorithm(op, setting) for op in OPS}
    if setting == "multi":
        env["WANMPI_SMALL"] = "0"
    return env


def cases(mpis: list[str], delays: list[float], rounds: int) -> list[Case]:
    """Delay-major; per MPI, the three settings alternate in every round."""
    return plan([PROGRAM], SETTINGS, mpis, delays, rounds)


def execute(case: Case, t: Topology, args: list[str], timeout: float) -> dict:
    argv = [str(paths.program(case.mpi, PROGRAM)), *args]
    return {"rows": job_rows(t, case.mpi, argv, placement.placement(t, len(t.nodes)),
                             env=setting_env(case.variant), timeout=timeout)}


def cells_of(records: list[Record]) -> tuple[list[Cell], int]:
    """The best median of every setting per (MPI, delay, collective, size), in
    the order measured; and the ranks the jobs ran with. The barrier moves
    no data: its sizes are one (0 bytes)."""
    best: dict[tuple, dict[str, float]] = {}
    ranks = 0
    for r in records:
        if not r.ok:
            continue
        for row in r.metrics["rows"]:
            size = 0 if row["op"] == "barrier" else row["bytes"]
            times = best.setdefault((r.case.mpi, r.case.delay_ms, row["op"], size), {})
            times[r.case.variant] = min(times.get(r.case.variant, float("inf")), row["median_s"])
            ranks = row["ranks"]
    return [Cell(*key, times) for key, times in best.items()], ranks


def summary(cells: list[Cell]) -> list[dict]:
    rows = []
    for c in cells:
        chosen = choose(c.times)
        rows.append({**asdict(c), "choice": chosen and algorithm(c.op, chosen.setting),
                     "ours_over_mpi": chosen and chosen.ratio})
    return rows


def print_table(cells: list[Cell]) -> None:
    """Per MPI and delay: each collective and size, the three times, best of
    ours / the MPI's own, and the choice."""
    for mpi, delay in dict.fromkeys((c.mpi, c.delay_ms) for c in cells):
        print(f"\n{mpi}, one-way delay {delay:g} ms: best median, ms")
        print(f"  {'collective':<20} {'size':>7} {'multi':>9} {'single':>9} {'mpi':>9} {'ours/mpi':>8}  choice")
        for c in (c for c in cells if (c.mpi, c.delay_ms) == (mpi, delay)):
            chosen = choose(c.times)
            times = " ".join(f"{c.times[s] * 1e3:>9.3f}" if s in c.times else f"{'failed':>9}" for s in SETTINGS)
            ratio = f"{chosen.ratio:>8.2f}" if chosen and chosen.ratio else f"{'-':>8}"
            size = "-" if c.op == "barrier" else format_bytes(c.bytes)
            print(f"  {c.op:<20} {size:>7} {times} {ratio}  {algorithm(c.op, chosen.setting) if chosen else '-'}")


def header(t: Topology, settings: dict, ranks: int, started_iso: str, command: str) -> list[str]:
    git = git_commit()
    links = ", ".join(f"{l.name} {units.format_rate(l.rate_bps)} {units.format_duration_us(l.delay_us)}"
                      for l in t.links)
    return [
        "written by `wanmpi tune`; use it with `wanmpi run --rules FILE` (docs/tuning.md)",
        f"command: {command}",
        f"date: {started_iso}, commit {git['commit'] or 'unknown'}{' (uncommitted changes)' if git['dirty'] else ''}",
        f"topology: {t.source}: {len(t.clusters)} clusters, {len(t.nodes)} nodes; WAN {links}",
        f"measured: {PROGRAM} with {ranks} ranks (one per node), MPIs {', '.join(settings['mpis'])}, "
        f"one-way delays {', '.join(f'{d:g}' for d in settings['delays'])} ms",
        f"  sizes {settings['sizes']}; median of up to {settings['iters']} iterations "
        f"({settings['budget_s']:g} s per size), best of {settings['rounds']} round(s)",
        "  multi: multilane / scheduled (WANMPI_SMALL=0), single: singlelane / paced, mpi: the MPI's own",
        f"choice: the MPI's own unless the best of ours takes under {100 * (1 - MARGIN):g} % of its time",
        "  sizes merged into ranges split at the geometric mean, delays at the midpoint",
        "  the last byte range ends with the largest size measured: past it, the built-in choice",
        "",
    ]


def run(t: Topology, mpis: list[str], delays: list[float], ops: list[str], sizes: str, rounds: int,
        out: str | Path, json_path: str | None, timeout: float, command: str,
        runner: Runner | None = None) -> int:
    """Measure on the testbed of `t`, print the table, write the rules to
    `out` (and the results to `json_path`); 1 if a job failed, else 0."""
    if not t.emulated:
        raise BenchError(f"{t.source} lists real hosts: `wanmpi tune` measures on the emulated testbed")
    if not t.links:
        raise BenchError(f"{t.source} has one cluster: tuning needs clusters joined by a WAN")
    for mpi in mpis:
        if not paths.program(mpi, PROGRAM).exists():
            raise BenchError(f"{paths.program(mpi, PROGRAM)} is not built: run `make build`")
    args = ["--ops", ",".join(ops), "--sizes", sizes, "--iters", str(ITERS), "--warmup", "1",
            "--budget", str(BUDGET_S)]
    settings = {"mpis": mpis, "delays": delays, "ops": ops, "sizes": sizes, "rounds": rounds, "iters": ITERS,
                "budget_s": BUDGET_S, "timeout_s": timeout, "settings": {s: setting_env(s) for s in SETTINGS},
                "margin": MARGIN, "rules": str(out)}
    started_iso, started = now_iso(), time.monotonic()
    records = (runner or Runner(t)).run(cases(mpis, delays, rounds),
                                        lambda case, topo: execute(case, topo, args, timeout))
    cells, ranks = cells_of(records)
    print_table(cells)
    document = finish("tune", t, settings, records, summary(cells), started_iso, started, json_path)
    if not cells:
        raise BenchError("no job gave a result: no rules written")
    text = rules_text(cells, len(t.clusters), ranks, header(t, settings, ranks, started_iso, command))
    try:
        Path(out).write_text(text)
    except OSError as e:
        raise BenchError(f"-o: cannot write {out}: {e.strerror}") from None
    print(f"\nrules: {out} ({sum(1 for l in text.splitlines() if l and not l.startswith(('#', 'wanmpi-')))} "
          f"rules); use them with `wanmpi run --rules {out} ...`, "
          f"`wanmpi bench suite --rules {out}` or [collectives] rules = \"...\" in the topology")
    return 1 if document["counts"]["failed"] else 0
