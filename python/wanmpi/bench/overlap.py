"""`wanmpi bench overlap`: how much of a nonblocking collective's WAN time a
computation hides (docs/nonblocking.md, "Measured"; docs/benchmarks.md,
"Overlap of nonblocking collectives").

One job per variant and MPI, one rank per node, at one WAN delay, runs
bench/overlap.c: the collective alone (t_comm), a compute loop calibrated to
take about as long (t_comp), and both together, the collective started first
and waited for after the compute (t_total), in every repetition;
hidden = (t_comp + t_comm - t_total) / t_comm, from the medians and from the
minima (1: all of the communication hidden; 0: none; below 0: overlapping
costs more than it hides). The table also shows when rank 0's MPI_Test
first saw the collective done (from its start; beside t_comm it tells a
collective that progressed during the compute from one that waited for
MPI_Wait; "-": none did), what was left for the final MPI_Wait (the slowest
rank's time in it) and rank 0's MPI_Test calls, medians of the repetitions. Every result of every repetition is checked
exactly by the program; a job that prints no checked result fails its case.

Variants:
- `mpi`: the MPI library alone (no libwanmpi): its own nonblocking
  collective (Open MPI's libNBC, MPICH's schedules), MPI_Test between
  compute slices;
- `wanmpi-test`: with libwanmpi (and libwanshim), MPI_Test between slices:
  the schedules progress inside MPI_Test;
- `wanmpi-thread`: with libwanmpi and `WANMPI_PROGRESS=thread`, no MPI_Test
  at all: only a progress thread can advance the collective. The MPI thread
  level each job got is recorded (`multiple` once libwanmpi asks for it).

`ranks`: one rank per node by default; fewer go round-robin over the
clusters (2: one per cluster).

CPU: every repetition records the ranks' CPU seconds per section and the
machine's (/proc/stat: the testbed's nodes, emulator and packet processing
share the host's cores) and the emulator's (wanem). The emulated network
costs CPU on the cores the ranks compute on; `net_cores` (the machine's busy
CPU seconds in the overlapped section beyond the compute alone, over t_comm)
is how many cores the communication took while it ran, and with every core
computing hidden cannot exceed `hidden_cpu_bound` = 1 - net_cores / cores.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import time
from dataclasses import dataclass

from .. import paths
from ..job import placement
from ..topo import Topology
from .cases import BenchError, Case, Record, plan
from .job_output import job_rows
from .results import exit_status, finish, markdown_table, now_iso
from .runner import Runner

COLLECTIVES = ("iallreduce", "ibcast", "ialltoall", "iallgather")
PROGRAM = "overlap"


@dataclass(frozen=True)
class Variant:
    name: str
    wanmpi: bool                # preload libwanmpi and libwanshim
    tests: bool                 # MPI_Test between compute slices (else none: a progress thread's case)
    env: tuple[tuple[str, str], ...] = ()


VARIANTS = {v.name: v for v in (
    Variant("mpi", wanmpi=False, tests=True),
    Variant("wanmpi-test", wanmpi=True, tests=True),
    Variant("wanmpi-thread", wanmpi=True, tests=False, env=(("WANMPI_PROGRESS", "thread"),)),
)}


def emulator_pid() -> int | None:
    """The testbed's delay emulator (wanem), whose CPU time the program records; None if none runs."""
    try:
        out = subprocess.run(["pgrep", "-xn", "wanem"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out[0]) if out else None


def program_args(case: Case, reps: int, test_every_ms: float, watch: int | None = None) -> list[str]:
    """bench/overlap's command line for a case (its collective and size in its params)."""
    every = test_every_ms / 1000 if VARIANTS[case.variant].tests else 0
    args = [str(paths.program(case.mpi, PROGRAM)), "--coll", case.param("coll"), "--bytes", str(case.param("bytes")),
            "--reps", str(reps), "--test-every", f"{every:g}"]
    return args + (["--watch", str(watch)] if watch else [])


def execute(case: Case, t: Topology, reps: int, test_every_ms: float, timeout: float,
            ranks: int | None = None) -> dict:
    """One job: the program's summary line, with every repetition's line under `repetitions`."""
    v = VARIANTS[case.variant]
    where = placement.placement(t, ranks, "interleave") if ranks else placement.placement(t, len(t.nodes))
    rows = job_rows(t, case.mpi, program_args(case, reps, test_every_ms, emulator_pid()), where,
                    env=dict(v.env), wanmpi=v.wanmpi, timeout=timeout)
    result = next((r for r in rows if r.get("bench") == PROGRAM), None)
    repetitions = [r for r in rows if "rep" in r]
    if result is None or result.get("check") != "ok" or len(repetitions) != reps:
        raise BenchError(f"the job printed no checked result ({len(repetitions)} of {reps} repetitions)")
    return {**{k: v for k, v in result.items() if k != "bench"}, "repetitions": repetitions}


def summarize(records: list[Record]) -> list[dict]:
    """One row per MPI and variant (the median over jobs if a cell has several)."""
    cells: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        if r.ok:
            cells.setdefault((r.case.mpi, r.case.variant), []).append(r.metrics)
    keys = ("t_comm_median_s", "t_comp_median_s", "t_total_median_s", "t_comm_min_s", "t_comp_min_s",
            "t_total_min_s", "hidden_median", "hidden_min")
    out = []
    for (mpi, variant), ms in cells.items():
        row = {"mpi": mpi, "variant": variant, "jobs": len(ms), "coll": ms[0]["coll"], "bytes": ms[0]["bytes"],
               "ranks": ms[0]["ranks"], "thread_level": ms[0]["thread_level"],
               "tests": statistics.median(rep["tests"] for m in ms for rep in m["repetitions"]),
               "wait_s": statistics.median(rep["wait_s"] for m in ms for rep in m["repetitions"])}
        seen = [rep["done_s"] for m in ms for rep in m["repetitions"] if rep.get("done_s") is not None]
        row["done_s"] = statistics.median(seen) if seen else None
        row.update({k: statistics.median(m[k] for m in ms) for k in keys})
        row.update(cpu_summary([rep for m in ms for rep in m["repetitions"]], row["t_comm_median_s"]))
        out.append(row)
    return out


def cpu_summary(reps: list[dict], t_comm: float) -> dict:
    """Medians of the repetitions' CPU seconds, and what the communication
    cost the machine while it overlapped the compute (see the module notes);
    empty if the program did not record them."""
    if not reps or "host_total_busy_s" not in reps[0]:
        return {}
    med = {k: statistics.median(r[k] for r in reps) for k in reps[0]
           if k.startswith(("cpu_", "host_")) and isinstance(reps[0][k], (int, float))}
    cores = os.cpu_count() or 1
    net = med["host_total_busy_s"] - med["host_comp_busy_s"]
    return {"cpu": med, "cores": cores, "net_cpu_s": net, "net_cores": net / t_comm if t_comm > 0 else None,
            "hidden_cpu_bound": 1 - net / (cores * t_comm) if t_comm > 0 else None}


def print_table(summary: list[dict], delay_ms: float) -> None:
    if not summary:
        return
    first = summary[0]
    print(f"\n{first['coll']} of {first['bytes']} B on {first['ranks']} ranks, one-way delay {delay_ms:g} ms: "
          "seconds, median (min) of the repetitions; hidden = (comp + comm - total) / comm\n")
    print(markdown_table(
        ["variant", "MPI", "t_comm, s", "t_comp, s", "t_total, s", "hidden, %", "seen done at, s",
         "in the last MPI_Wait, s", "MPI_Test calls", "thread level", "net cores", "CPU bound, %"],
        [[s["variant"], s["mpi"], f"{s['t_comm_median_s']:.3f} ({s['t_comm_min_s']:.3f})",
          f"{s['t_comp_median_s']:.3f} ({s['t_comp_min_s']:.3f})",
          f"{s['t_total_median_s']:.3f} ({s['t_total_min_s']:.3f})",
          f"{100 * s['hidden_median']:.1f} ({100 * s['hidden_min']:.1f})",
          None if s["done_s"] is None else f"{s['done_s']:.3f}", f"{s['wait_s']:.3f}", f"{s['tests']:g}",
          s["thread_level"], None if s.get("net_cores") is None else f"{s['net_cores']:.2f}",
          None if s.get("hidden_cpu_bound") is None else f"{100 * s['hidden_cpu_bound']:.1f}"]
         for s in summary]))
    if any(s.get("net_cores") is not None for s in summary):
        print(f"\nnet cores: CPU the communication took from the machine's {summary[0].get('cores')} cores while it "
              "overlapped the compute (busy CPU seconds beyond the compute alone, over t_comm); CPU bound: the most "
              "that can be hidden with every core computing, 1 - net cores / cores")


def run(base: Topology, variants: list[str], mpis: list[str], delay_ms: float, coll: str, size: int, reps: int,
        test_every_ms: float, json_path: str | None, timeout: float, runner: Runner | None = None,
        ranks: int | None = None) -> int:
    """On the testbed of `base` (brought up for the run if it is not up, and
    taken down again): one job per MPI and variant at `delay_ms`, with
    `ranks` ranks (None: one per node)."""
    if not base.emulated or not base.links:
        raise BenchError(f"{base.source}: the overlap benchmark needs the emulated testbed (it sets the WAN delay)")
    if coll not in COLLECTIVES:
        raise BenchError(f"unknown collective {coll!r} (known: {', '.join(COLLECTIVES)})")
    if ranks is not None and not 2 <= ranks <= len(base.nodes):
        raise BenchError(f"--ranks: {ranks} is outside [2, {len(base.nodes)}] (one rank per node at most)")
    cases = plan([PROGRAM], variants, mpis, [delay_ms], 1, params=lambda k: (("coll", coll), ("bytes", size)))
    settings = {"variants": variants, "mpis": mpis, "delay_ms": delay_ms, "coll": coll, "bytes": size,
                "reps": reps, "test_every_ms": test_every_ms, "timeout_s": timeout, "ranks": ranks or len(base.nodes)}
    started_iso, started = now_iso(), time.monotonic()
    records = (runner or Runner(base)).run(cases, lambda case, t: execute(case, t, reps, test_every_ms, timeout, ranks))
    summary = summarize(records)
    print_table(summary, delay_ms)
    return exit_status(finish("overlap", base, settings, records, summary, started_iso, started, json_path))
