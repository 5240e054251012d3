"""`wanmpi bench flap`: a WAN outage during a running job (docs/benchmarks.md,
"WAN outages"; docs/libwanshim.md, "WAN outages").

A job of one rank per node runs 1 MiB allreduces in a loop (bench/steps.c:
rank 0 prints the wall-clock end of every step, every sum checked); `lead`
seconds after it started, every WAN link of the testbed is cut
(`wanmpi link set ... --down`) for `cut` seconds, then restored. What
counts: the **stall**, from the moment the links carry traffic again to the
end of the first step after it (a job that moves again at once: one step's
time), and whether the job survived. The links are restored whatever happens
(also on failure or Ctrl-C: the runner puts the link settings back too).

Variants: `wanmpi` (libwanmpi and libwanshim, whose WAN sockets cap TCP's
retransmission interval), `plain` (the MPI alone), `relayed` (wanmpi with
every cross-cluster connection through one relay per cluster, whose trunks
resume their sessions on new connections after an outage: docs/wanrelay.md,
"Streams") and `relayed-rbudp` (the same, bulk data blasted over UDP).
"""
from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path

from .. import paths
from ..job import placement
from ..testbed import emulator
from ..topo import Topology
from . import plot
from .cases import BASE, BenchError, Case, TopologySpec, plan, with_relays
from .job_output import job_output
from .results import exit_status, finish, markdown_table, now_iso
from .runner import Runner

# variant: (libwanmpi, relays)
VARIANTS = {"wanmpi": (True, False), "plain": (False, False), "relayed": (True, True), "relayed-rbudp": (True, True)}
RELAYED = with_relays(1, public=True)
RBUDP_RATE = "90Mbit"           # the blast rate of the relay pair: 90 % of the relay node's 100 Mbit/s NIC


def rbudp_relays(raw: dict) -> dict:
    """RELAYED with the relays' bulk data as RBUDP blasts (docs/rbudp.md)."""
    return {**RELAYED.transform(raw), "relay": {"transport": "rbudp", "rbudp_rate": RBUDP_RATE}}


RELAYED_RBUDP = TopologySpec("relays-1-public-rbudp", rbudp_relays,
                             description=f"public clusters with 1 relay node(s), RBUDP at {RBUDP_RATE}")
TOPOLOGIES = {"relayed": RELAYED, "relayed-rbudp": RELAYED_RBUDP}
STEP_BYTES = 1 << 20            # the allreduce of every step
LEAD_S = 8.0                    # job start-up and a few steps before the cut
AFTER_S = 15.0                  # the loop runs this long past the cut's end (the stall must fit)


def set_links(t: Topology, up: bool) -> float:
    """Every WAN link of the testbed up or down, both directions; the time it took effect."""
    for link in t.links:
        emulator.request({"cmd": "set", "link": link.name, "dir": "both", "up": up})
    return time.time()


def stall(ends: list[float], up_at: float) -> float | None:
    """Seconds from the links' return to the end of the first step after it."""
    after = [e for e in ends if e > up_at]
    return after[0] - up_at if after else None


def execute(case: Case, t: Topology, cut_s: float, timeout: float, monitor: Path | None = None,
            step_bytes: int = STEP_BYTES) -> dict:
    """One job through one cut; with `monitor`, the WAN's 1 ms traffic is
    recorded there (a CSV per case) and drawn with the cut shaded."""
    if monitor is None:
        return run_job(case, t, cut_s, timeout, {}, step_bytes)
    monitor.mkdir(parents=True, exist_ok=True)
    csv = monitor / f"flap-{case.mpi}-{case.variant}-{cut_s:g}s-{case.rep}.csv"
    emulator.request({"cmd": "monitor", "file": str(csv.resolve())})
    times = {"monitor": time.time()}
    try:
        metrics = run_job(case, t, cut_s, timeout, times, step_bytes)
    finally:
        emulator.request({"cmd": "monitor", "file": None})
    down, up = ((times[k] - times["monitor"]) * 1000 for k in ("down", "up"))
    png = plot.traffic(str(csv), None, 10, [(down, up, f"WAN cut ({cut_s:g} s)")])
    return {**metrics, "traffic_png": png}


def run_job(case: Case, t: Topology, cut_s: float, timeout: float, times: dict[str, float],
            step_bytes: int) -> dict:
    nodes = placement.placement(t, len(t.nodes))
    argv = [str(paths.program(case.mpi, "steps")), "--bytes", str(step_bytes), "--seconds", str(LEAD_S + cut_s + AFTER_S)]

    def outage() -> None:
        time.sleep(LEAD_S)
        try:
            times["down"] = set_links(t, False)
            time.sleep(cut_s)
        finally:
            times["up"] = set_links(t, True)
    cutter = threading.Thread(target=outage, daemon=True)
    cutter.start()
    try:
        wanmpi, relayed = VARIANTS[case.variant]
        text, _ = job_output(t, case.mpi, argv, nodes, wanmpi=wanmpi, use_relays=relayed, timeout=timeout)
    finally:
        cutter.join()
    rows = [json.loads(l) for l in text.splitlines() if l.startswith("{")]
    ends = [r["end"] for r in rows if "end" in r]
    result = rows[-1] if rows else {}
    if result.get("check") != "ok" or not ends:
        raise BenchError(f"the job printed no checked result: {text[-300:]!r}")
    before = [b - a for a, b in zip(ends, ends[1:]) if b < times["down"]]
    waited = stall(ends, times["up"])
    if waited is None:
        raise BenchError(f"no step ended after the links returned ({cut_s:g} s cut)")
    return {"stall_s": round(waited, 3), "step_s": round(statistics.median(before), 4) if before else None,
            "cut_s": round(times["up"] - times["down"], 3), "steps": result["steps"]}


def summarize(records) -> list[dict]:
    cells: dict[tuple, list] = {}
    for r in records:
        if r.ok:
            cells.setdefault((r.case.mpi, r.case.variant, r.case.param("cut")), []).append(r.metrics)
    out = []
    for (m, v, c), ms in sorted(cells.items()):
        steps = [x["step_s"] for x in ms if x["step_s"] is not None]
        out.append({"mpi": m, "variant": v, "cut_s": c, "reps": len(ms),
                    "stall_s": statistics.median(x["stall_s"] for x in ms),
                    "step_s": statistics.median(steps) if steps else None})
    return out


def run(base: Topology, cuts: list[float], variants: list[str], mpis: list[str], reps: int,
        json_path: str | None, timeout: float, runner: Runner | None = None, monitor: str | None = None,
        step_bytes: int = STEP_BYTES) -> int:
    if not base.emulated or not base.links:
        raise BenchError(f"{base.source}: the flap benchmark needs the emulated testbed with a WAN link to cut")
    cases = [c for cut in cuts for c in plan(["steps"], variants, mpis, [None], reps,
                                              topology_of=lambda v: TOPOLOGIES.get(v, BASE),
                                              params=lambda k, cut=cut: (("cut", cut),))]
    settings = {"cuts_s": cuts, "variants": variants, "mpis": mpis, "reps": reps, "lead_s": LEAD_S,
                "after_s": AFTER_S, "bytes": step_bytes, "timeout_s": timeout}
    started_iso, started = now_iso(), time.monotonic()
    runner = runner or Runner(base)
    where = Path(monitor) if monitor else None
    records = runner.run(cases, lambda case, t: execute(case, t, case.param("cut"), timeout, where, step_bytes))
    summary = summarize(records)
    print(f"\nWAN cut during a {step_bytes} B allreduce loop: seconds from the links' return to the next step's end "
          "(median)\n")
    print(markdown_table(["mpi", "variant", "cut, s", "stall after the return, s", "step, s", "jobs"],
                         [[s["mpi"], s["variant"], f"{s['cut_s']:g}", f"{s['stall_s']:.2f}", s["step_s"] and f"{s['step_s']:.3f}",
                           s["reps"]] for s in summary]))
    return exit_status(finish("flap", base, settings, records, summary, started_iso, started, json_path))
