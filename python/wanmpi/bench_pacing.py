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
"""
from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import emulator, launch, net, paths, shell, tcpstats
from .bench_coll import BenchError, emulator_totals, require_testbed, set_delay
from .topo import Topology

KERNELS = {"is": ["--iters", "10"], "ft": ["--iters", "3"], "lu": ["--iters", "4"]}
CONGESTION_CONTROLS = ("cubic", "bbr")
ALLOWED_CC = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


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


def parse_list(text: str, known, what: str) -> list[str]:
    chosen = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in chosen if x not in known]
    if unknown or not chosen:
        raise BenchError(f"--{what}: unknown {', '.join(map(repr, unknown)) or 'empty list'} "
                         f"(choose from {', '.join(known)})")
    return chosen


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


def run_job(topo: Topology, v: Variant, kernel: str, timeout: float) -> tuple[dict, tcpstats.Snapshot, int]:
    program = paths.BUILD / "openmpi" / "patterns"
    if not program.exists():
        raise BenchError(f"{program} is not built: run `make build`")
    env = dict(v.env)
    if v.p2p_senders_divisor:
        env["WANMPI_PACING_RATE"] = str(wan_rate_bytes(topo) // (senders(topo) * v.p2p_senders_divisor))
    ranks = launch.placement(topo, len(topo.nodes))
    job = launch.Job(topo, [str(program), kernel, *KERNELS[kernel]], ranks, env, wanmpi=v.wanmpi)
    d0, _ = emulator_totals()
    with tcpstats.measure(topo, ranks) as m, tempfile.TemporaryFile("w+") as out:
        status = launch.run_job(launch.launcher("openmpi"), job, timeout=timeout, stdout=out)
        out.seek(0)
        text = out.read()
    d1, _ = emulator_totals()
    if status != 0:
        raise BenchError(f"{kernel} / {v.name}: the job failed with status {status}: {text[-400:]}")
    rows = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    if not rows or rows[-1].get("check") != "ok":
        raise BenchError(f"{kernel} / {v.name}: no result line: {text[-400:]}")
    return rows[-1], m.delta, d1 - d0


def run(topo: Topology, variants: list[str], kernels: list[str], delays: list[float], ccs: list[str],
        reps: int, json_path: str | None, timeout: float) -> int:
    require_testbed(topo)
    saved_links = emulator.settings()
    allowed_before = Path(ALLOWED_CC).read_text().strip()
    results: list[Result] = []
    started = time.monotonic()
    try:
        missing = [cc for cc in ccs if cc not in allowed_before.split()]
        if missing:
            Path(ALLOWED_CC).write_text(" ".join([*allowed_before.split(), *missing]))
        for cc in ccs:
            set_congestion_control(topo, cc)
            for delay in delays:
                set_delay(delay)
                for kernel in kernels:
                    for name in variants:
                        r = Result(cc, delay, kernel, name, [], [], [], [])
                        for rep in range(reps):
                            print(f"[{time.monotonic() - started:6.0f} s] {cc}, {delay:g} ms, {kernel}, {name}, "
                                  f"run {rep + 1}/{reps}", flush=True)
                            row, delta, drops = run_job(topo, VARIANTS[name], kernel, timeout)
                            r.per_iter_s.append(row["per_iter_s"])
                            r.rto.append(delta.total.rto)
                            r.retrans_segs.append(delta.total.retrans_segs)
                            r.drops.append(drops)
                        results.append(r)
    finally:
        try:
            emulator.apply(saved_links)
            set_congestion_control(topo, "bbr" if "bbr" in allowed_before.split() else allowed_before.split()[0])
        except (emulator.EmulatorError, OSError, BenchError) as e:
            print(f"wanmpi: could not restore the testbed's settings ({e}); check `wanmpi link show`")
        if Path(ALLOWED_CC).read_text().strip() != allowed_before:
            Path(ALLOWED_CC).write_text(allowed_before)
    print_table(results, variants)
    if json_path:
        Path(json_path).write_text(json.dumps(
            [{**asdict(r), "median_s": r.median_s, "median_rto": r.median_rto} for r in results], indent=1))
    return 0


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
