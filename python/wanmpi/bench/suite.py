"""`wanmpi bench suite`: the NAS-like kernels across the clusters, as the papers
judge a grid MPI: performance relative to a single cluster of the same size as
the one-way WAN delay grows, and the gain of each technique.

Cases (cases.py, run by runner.py): every kernel x one-way delay x MPI x
variant x repetition on the testbed's topology, plus, per kernel and MPI, the
same job on one cluster holding all the nodes (the `single-cluster`
reference, run with the MPI alone). Relative performance = reference time / time (1.0: as
fast as one cluster), from the best repetition of each (and from the medians).

Variants (libwanmpi's techniques switched by WANMPI_* settings, docs/libwanmpi.md
and docs/pacing.md):
  plain        the MPI library alone, nothing preloaded
  collectives  libwanmpi's algorithms (multi-lane collectives, the scheduled
               all-to-all), nothing paced
  pacing       the MPI library's own algorithms, every all-to-all paced by
               libwanmpi ("paced", auto rates)
  all          libwanmpi with the topology's settings (algorithms and pacing)
  relays       the MPI library alone, every connection between clusters
               through two relay pairs (a testbed with relays = 2)
A technique that needs another testbed is a variant with a `topology`
(cases.TopologySpec), as relays; the runner brings that testbed up
for its cases.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import topo
from ..topo import Topology
from . import plot
from .cases import BASE, SINGLE_CLUSTER, BenchError, Case, Record, TopologySpec, plan, with_relays
from .job_output import job_rows
from .kernels import KERNELS
from .results import environment_summary, markdown_table, now_iso, result_document, rules_settings, write_json
from .runner import Runner

MPIS = ("openmpi", "mpich")
DEFAULT_DELAYS = "0,2,5,10"
QUICK = {"class": "S", "delays": "0,10", "reps": 1}

_ALGORITHMS_TO_MPI = {f"WANMPI_{c.upper()}": "mpi" for c in topo.COLLECTIVES}


@dataclass(frozen=True)
class Variant:
    name: str
    wanmpi: bool                          # preload libwanmpi and libwanshim
    env: dict = field(default_factory=dict)
    topology: TopologySpec = BASE
    description: str = ""


VARIANTS = {v.name: v for v in (
    Variant("plain", False, description="the MPI library alone"),
    Variant("collectives", True, {"WANMPI_ALLTOALL_RATE": "off", "WANMPI_PACING_RATE": "0"},
            description="libwanmpi's algorithms (multi-lane collectives, scheduled all-to-all), nothing paced"),
    Variant("pacing", True, {**_ALGORITHMS_TO_MPI, "WANMPI_ALLTOALL": "paced", "WANMPI_ALLTOALLV": "paced",
                             "WANMPI_ALLTOALL_RATE": "auto", "WANMPI_PACING_RATE": "0"},
            description="the MPI library's algorithms, every all-to-all paced (auto rates)"),
    Variant("all", True, description="libwanmpi with the topology's settings"),
    Variant("relays", False, topology=with_relays(2),
            description="the MPI library alone, every connection between clusters split by two relay pairs"),
)}
REFERENCE = Variant("single-cluster", False, topology=SINGLE_CLUSTER,
                    description="one cluster with all the nodes, the MPI library alone")
TECHNIQUES = ("collectives", "pacing", "all", "relays")      # bars of the improvement chart, against plain


def cases(kernels: list[str], variants: list[str], mpis: list[str], delays: list[float], reps: int,
          klass: str) -> list[Case]:
    """The testbed's cases, then the single-cluster references (one per kernel,
    MPI and repetition; no delay)."""
    params = lambda k: (("class", klass),)   # noqa: E731
    chosen = [VARIANTS[v] for v in variants]
    testbed = plan(kernels, chosen, mpis, delays, reps, lambda v: v.topology, params)
    reference = plan(kernels, [REFERENCE], mpis, [None], reps, lambda v: v.topology, params)
    return testbed + reference


def variant_of(name: str) -> Variant:
    return REFERENCE if name == REFERENCE.name else VARIANTS[name]


def execute(case: Case, t: Topology, timeout: float, rules: str | None = None) -> dict:
    v = variant_of(case.variant)
    kernel = KERNELS[case.kernel]
    rows = job_rows(t, case.mpi, kernel.argv(case.mpi, case.param("class")), case.topology.rank_nodes(t),
                    env=v.env, wanmpi=v.wanmpi, timeout=timeout, rules=rules)
    row = rows[-1]
    if row.get("check") != "ok":
        raise BenchError(f"the self-check did not pass: {row}")
    return {"per_iter_s": row["per_iter_s"], "seconds": row["seconds"], "iters": row["iters"],
            "ranks": row["ranks"]}


# ---- summary ---------------------------------------------------------------------------------
def summarize(records: list[Record]) -> list[dict]:
    """One row per kernel x MPI x variant x delay: best and median time per
    iteration over the repetitions that passed, relative performance against
    the single-cluster reference (best/best, median/median), and the speed-up
    over `plain` at the same delay."""
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        c = r.case
        groups.setdefault((c.kernel, c.mpi, c.variant, c.delay_ms, c.param("class")), []).append(r)
    rows = []
    for (kernel, mpi, variant, delay, klass), rs in groups.items():
        times = [r.metrics["per_iter_s"] for r in rs if r.ok]
        rows.append({"kernel": kernel, "mpi": mpi, "variant": variant, "delay_ms": delay, "class": klass,
                     "reps": len(rs), "ok": len(times),
                     "best_s": min(times) if times else None,
                     "median_s": statistics.median(times) if times else None})
    ref = {(r["kernel"], r["mpi"]): r for r in rows if r["variant"] == REFERENCE.name}
    plain = {(r["kernel"], r["mpi"], r["delay_ms"]): r for r in rows if r["variant"] == "plain"}
    for r in rows:
        single, base = ref.get((r["kernel"], r["mpi"])), plain.get((r["kernel"], r["mpi"], r["delay_ms"]))
        r["relative_best"] = ratio(single and single["best_s"], r["best_s"])
        r["relative_median"] = ratio(single and single["median_s"], r["median_s"])
        r["speedup_over_plain"] = ratio(base and base["best_s"], r["best_s"])
    return rows


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 4) if a and b else None


def markdown(summary: list[dict], records: list[Record], settings: dict) -> str:
    """Per MPI: relative performance per kernel and delay, for each variant
    (best of the repetitions; the median's in parentheses), then the
    single-cluster times, the speed-ups over plain, and the environment."""
    out = []
    variants = list(settings["variants"])
    for mpi in settings["mpis"]:
        rows = [r for r in summary if r["mpi"] == mpi]
        if not rows:
            continue
        keyed = {(r["kernel"], r["variant"], r["delay_ms"]): r for r in rows}
        out.append(f"### {mpi}: performance relative to a single cluster (best of {settings['reps']}; median)\n")
        table = []
        for kernel in settings["kernels"]:
            for delay in settings["delays"]:
                cells = []
                for v in variants:
                    r = keyed.get((kernel, v, delay))
                    if r is None or r["relative_best"] is None:
                        cells.append("failed" if r is not None and r["ok"] == 0 else None)
                    else:
                        cells.append(f"{r['relative_best']:.2f} ({r['relative_median']:.2f})")
                ref = keyed.get((kernel, REFERENCE.name, None))
                table.append([kernel, f"{delay:g} ms", *cells,
                              f"{ref['best_s'] * 1e3:.1f}" if ref and ref["best_s"] else None])
        out.append(markdown_table(["kernel", "delay", *variants, "single cluster, ms/iter"], table))
        techniques = [v for v in variants if v != "plain"]
        if "plain" in variants and techniques:
            out.append(f"\n{mpi}: speed-up over plain (best of each), largest delay "
                       f"({max(settings['delays']):g} ms)\n")
            top = max(settings["delays"])
            table = []
            for kernel in settings["kernels"]:
                cells = []
                for v in techniques:
                    r = keyed.get((kernel, v, top))
                    cells.append(f"{r['speedup_over_plain']:.2f}x" if r and r["speedup_over_plain"] else None)
                table.append([kernel, *cells])
            out.append(markdown_table(["kernel", *techniques], table))
        drops = {}
        for r in records:
            c = r.case
            if c.mpi == mpi and c.variant in variants and "emulator" in r.env:
                drops.setdefault((c.kernel, c.variant), []).append(r.env["emulator"]["drops"])
        if drops:
            out.append(f"\n{mpi}: packets the emulator dropped at the WAN bottleneck per job (median over the "
                       "delays and repetitions)\n")
            out.append(markdown_table(["kernel", *variants], [
                [kernel, *(f"{statistics.median(drops[(kernel, v)]):g}" if (kernel, v) in drops else None
                           for v in variants)] for kernel in settings["kernels"]]))
        out.append("")
    failed = [r for r in records if not r.ok]
    if failed:
        out.append("Failed cases:\n")
        out += [f"- {r.case.label()}: {r.error}" for r in failed]
        out.append("")
    out.append("Environment: " + environment_summary(records))
    return "\n".join(out) + "\n"


# ---- run ---------------------------------------------------------------------------------------
def run(base: Topology, kernels: list[str], variants: list[str], mpis: list[str], delays: list[float],
        reps: int, klass: str, out_dir: str | None, json_path: str | None, timeout: float,
        runner: Runner | None = None, rules: str | None = None) -> int:
    """`rules`: a rules file for the variants that load libwanmpi (docs/tuning.md)."""
    if not base.emulated:
        raise BenchError(f"{base.source} lists real hosts: the suite runs on the emulated testbed")
    if not base.links:
        raise BenchError(f"{base.source} has one cluster: the suite needs clusters joined by a WAN")
    all_cases = cases(kernels, variants, mpis, delays, reps, klass)
    settings = {"kernels": kernels, "variants": variants, "mpis": mpis, "delays": delays, "reps": reps,
                "class": klass, "timeout_s": timeout, "reference": REFERENCE.name,
                "kernel_args": {k: KERNELS[k].args[klass] for k in kernels},
                "variant_env": {v: VARIANTS[v].env for v in variants}, **rules_settings(rules)}
    started_iso, started = now_iso(), time.monotonic()
    runner = runner or Runner(base)
    try:
        records = runner.run(all_cases, lambda case, t: execute(case, t, timeout, rules))
    except KeyboardInterrupt:                 # keep what was measured: the cases not run stay "pending"
        if json_path:
            write_json(json_path, result_document("suite", base, settings, runner.records,
                                                  summarize(runner.records), started_iso,
                                                  time.monotonic() - started))
            print(f"wanmpi: interrupted; the cases so far are in {json_path}")
        raise
    summary = summarize(records)
    document = result_document("suite", base, settings, records, summary, started_iso, time.monotonic() - started)
    document["testbed_rebuilt"] = runner.rebuilt
    text = markdown(summary, records, settings)
    print(text)
    if json_path:
        write_json(json_path, document)
    if out_dir:
        write_outputs(document, Path(out_dir))
    failed = document["counts"]["failed"]
    if failed:
        print(f"wanmpi: {failed} of {len(records)} cases failed (recorded in the results)")
    return 1 if failed else 0


def write_outputs(document: dict, out_dir: Path, stem: str = "suite") -> list[str]:
    """suite.json, suite.md and the plots (plot.py) into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / f"{stem}.json", document)
    records = records_of(document)
    (out_dir / f"{stem}.md").write_text(f"Command: `{document['command']}`\n\n"
                                        + markdown(document["summary"], records, document["settings"]))
    written = [str(out_dir / f"{stem}.json"), str(out_dir / f"{stem}.md")]
    written += plot.suite(document, out_dir, stem)
    return written


def records_of(document: dict) -> list[Record]:
    """Records back from a result document (for the markdown of a saved run)."""
    out = []
    for c in document["cases"]:
        case = Case(c["kernel"], c["variant"], c["mpi"], c["delay_ms"], c["rep"],
                    BASE if c["topology"] == BASE.name else TopologySpec(c["topology"]), tuple(c["params"].items()))
        out.append(Record(case, c["status"], c["error"], c["seconds"], c["metrics"], c["env"]))
    return out


def merge(documents: list[dict]) -> dict:
    """Suite results run in parts (e.g. one MPI at a time, so that others get
    the testbed in between) as one document: the cases together, the summary
    recomputed. The parts must agree on kernels, variants, delays, reps and
    class."""
    first = documents[0]
    same = ("kernels", "variants", "delays", "reps", "class")
    for d in documents[1:]:
        if d["bench"] != "suite":
            raise BenchError(f"cannot merge a {d['bench']!r} result into suite results")
        differ = [k for k in same if d["settings"][k] != first["settings"][k]]
        if differ:
            raise BenchError(f"the parts differ in {', '.join(differ)}: run them with the same settings")
    merged = dict(first)
    merged["settings"] = {**first["settings"],
                          "mpis": list(dict.fromkeys(m for d in documents for m in d["settings"]["mpis"]))}
    merged["command"] = " ; ".join(d["command"] for d in documents)
    merged["parts"] = [{k: d[k] for k in ("command", "started", "seconds", "git", "machine")} for d in documents]
    merged["seconds"] = round(sum(d["seconds"] for d in documents), 1)
    cases = [c for d in documents for c in d["cases"]]
    merged["cases"] = [{**c, "id": i} for i, c in enumerate(cases)]
    failed = sum(1 for c in cases if c["status"] != "ok")
    merged["counts"] = {"cases": len(cases), "ok": len(cases) - failed, "failed": failed}
    merged["summary"] = summarize(records_of(merged))
    return merged
