"""`wanmpi bench vpn`: relays + wanmpi against what admins use today to join a
private cluster, a WireGuard tunnel between the two sites' routers carrying
the plain MPI, side by side in one run, on the testbed in real-host mode.

The testbed of a topology with a public and a private cluster with relays
(examples/relays.toml) is brought up with an sshd in every node and relay
(`testbed up --ssh`) and written as real sites twice: as it is (the private
cluster reached through its relays), and as sites joined by a VPN (the
private network routed, no `private`, no relays). Every
job is `wanmpi run -t THAT_FILE` launched over ssh from the public cluster's
first node, as on real sites:

  relays     through the relays (started over ssh for the job), with libwanmpi
  wireguard  `--no-wanmpi`, through a WireGuard tunnel (testbed/vpn.py) set up
             for the job between the routers and removed after it

Parts (`--parts`, all by default), each measured with both, back to back,
the order flipping every round (`--reps` rounds):
  latency  pingpong between the public and the private cluster's first nodes
           (2 ranks): half the median round trip of small messages, what it
           adds to the WAN's one-way delay, and the one-way rate of 1 MiB
  stream   wanflow, one pair (the same two nodes), 16 MB
  streams  wanflow, every node of the public cluster to its partner in the
           private one at once (four pairs on relays.toml): aggregate rate
  kernels  the NAS-like kernels (bench suite's, class `--class`), on every
           node of both clusters (8 ranks on relays.toml)
"""
from __future__ import annotations

import contextlib
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import paths
from ..testbed import net, real_sites, ssh, vpn
from ..topo import Cluster, Topology
from .cases import BASE, BenchError, Case, Record
from .job_output import reason
from .kernels import KERNELS
from .results import exit_status, finish, markdown_table, now_iso
from .runner import NetnsTestbed, Runner

PARTS = ("latency", "stream", "streams", "kernels")
VARIANTS = ("relays", "wireguard")
LABEL = {"relays": "relays + wanmpi", "wireguard": "WireGuard, the MPI alone"}
PINGPONG_ARGS = ["-s", str(1 << 20), "-r", "8"]
STREAM_BYTES = 16_000_000
STOP_GRACE_S = 20.0                        # a job's `wanmpi run` stops its relays and ranks on SIGTERM


class SshTestbed(NetnsTestbed):
    """The emulated testbed with an sshd in every node and relay (testbed up --ssh)."""

    def bring_up(self, t: Topology) -> None:
        state = net.State.load()
        if state is not None and state.topology_text != t.text:
            net.teardown(state)
        net.Net(t, ssh=True).up()
        super().bring_up(t)                    # up already: only checks its health

    def healthy(self) -> bool:
        state = net.State.load()
        return super().healthy() and state is not None and state.ssh


def sites(t: Topology) -> tuple[Cluster, Cluster]:
    """(public, private) of the topology, or BenchError naming what is missing."""
    try:
        public, private = vpn.ends(t)
    except vpn.VpnError as e:
        raise BenchError(f"{e} (examples/relays.toml has both)") from None
    if not private.relay_nodes:
        raise BenchError(f"{t.source}: cluster {private.name!r} is private and has no relays (relays = N): "
                         "the relays side of the comparison needs them")
    return public, private


def cases(parts: list[str], mpis: list[str], delay_ms: float, reps: int, klass: str,
          kernels: list[str]) -> list[Case]:
    """Rounds of every measurement, each measured both ways back to back; the
    order flips every round (a load that drifts hits both alike)."""
    planned = []
    measures = [(p, ()) for p in parts if p != "kernels"]
    if "kernels" in parts:
        measures += [(k, (("class", klass),)) for k in kernels]
    for rep in range(1, reps + 1):
        order = VARIANTS if rep % 2 else VARIANTS[::-1]
        for mpi in mpis:
            for kernel, params in measures:
                planned += [Case(kernel, v, mpi, delay_ms, rep, BASE, params) for v in order]
    return planned


# ---- one job over ssh ---------------------------------------------------------------------
def run_from(node, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """argv in `node`'s namespace (with the testbed's ssh as WANMPI_SSH); on
    Ctrl-C or a timeout it gets SIGTERM first, so that `wanmpi run` stops
    its ranks and relays on every host."""
    proc = subprocess.Popen(net.node_command(node, ["env", f"WANMPI_SSH={ssh.WRAPPER}", *argv]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as e:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            raise BenchError(f"the job took more than {timeout:g} s") from None
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class Jobs:
    """Runs the cases: every job launched over ssh from the public cluster's
    first node, with the hosts file of its variant."""

    def __init__(self, t: Topology, directory: Path, timeout: float):
        self.public, self.private = sites(t)
        self.timeout = timeout
        self.hosts = {"relays": directory / "relays.toml", "wireguard": directory / "wireguard.toml"}
        self.hosts["relays"].write_text(real_sites.topology_text(t))
        self.hosts["wireguard"].write_text(real_sites.topology_text(t, vpn=True))

    def nodes(self, case: Case) -> list:
        if case.kernel in ("latency", "stream"):
            return [self.public.nodes[0], self.private.nodes[0]]
        pairs = min(len(self.public.nodes), len(self.private.nodes))
        return [*self.public.nodes[:pairs], *self.private.nodes[:pairs]]

    def program(self, case: Case) -> list[str]:
        if case.kernel == "latency":
            return [str(paths.program(case.mpi, "pingpong")), *PINGPONG_ARGS]
        if case.kernel in ("stream", "streams"):
            return [str(paths.program(case.mpi, "wanflow")), "--bytes", str(STREAM_BYTES)]
        return KERNELS[case.kernel].argv(case.mpi, case.param("class"))

    def job(self, case: Case) -> str:
        nodes, program = self.nodes(case), self.program(case)
        if not Path(program[0]).exists():
            raise BenchError(f"{program[0]} is not built: run `make build`")
        argv = [sys.executable, "-m", "wanmpi", "run", "--mpi", case.mpi, "-t", str(self.hosts[case.variant]),
                "-n", str(len(nodes)), "--map", ",".join(n.name for n in nodes), "--timeout", str(self.timeout),
                "--no-host-check", *(["--no-wanmpi"] if case.variant == "wireguard" else []), *program]
        done = run_from(self.public.nodes[0], argv, self.timeout + 60)
        if done.returncode != 0:
            raise BenchError(f"exit status {done.returncode}: {reason(done.stderr, done.stdout)}")
        return done.stdout

    def execute(self, case: Case, t: Topology) -> dict:
        with vpn.Tunnel(t) if case.variant == "wireguard" else contextlib.nullcontext() as tunnel:
            before = tunnel.transfer() if tunnel else None
            out = self.job(case)
            carried = sum(tunnel.transfer().values()) - sum(before.values()) if tunnel else None
        metrics = measure(case, out)
        if tunnel:
            metrics["tunnel_bytes"] = carried
        return metrics


def measure(case: Case, out: str) -> dict:
    """The case's metrics from what its job printed."""
    if case.kernel == "latency":
        m = re.search(r"latency_us ([\d.]+) bandwidth_mbit ([\d.]+) ok", out)
        if not m:
            raise BenchError(f"pingpong printed no checked result: {out.strip()[-300:]}")
        latency = float(m.group(1))
        return {"latency_us": latency, "added_us": round(latency - 1000 * (case.delay_ms or 0), 1),
                "bandwidth_mbit": float(m.group(2))}
    rows = [json_row(line) for line in out.splitlines() if line.startswith("{")]
    rows = [r for r in rows if r]
    if not rows or rows[-1].get("check") != "ok":
        raise BenchError(f"{case.kernel}: no checked result: {out.strip()[-300:]}")
    row = rows[-1]
    if case.kernel in ("stream", "streams"):
        return {"aggregate_mbit": row["aggregate_mbit"], "seconds": row["seconds"], "pairs": row["pairs"]}
    return {"seconds": row["seconds"], "per_iter_s": row["per_iter_s"], "iters": row["iters"],
            "ranks": row["ranks"]}


def json_row(line: str) -> dict | None:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    return row if isinstance(row, dict) else None


# ---- results ----------------------------------------------------------------------------------
# measurement -> (metric, unit, lower is better); a kernel's: its seconds
METRICS = {"latency": (("latency_us", "us", True), ("added_us", "us", True), ("bandwidth_mbit", "Mbit/s", False)),
           "stream": (("aggregate_mbit", "Mbit/s", False),),
           "streams": (("aggregate_mbit", "Mbit/s", False),)}
KERNEL_METRICS = (("seconds", "s", True),)


def summary(records: list[Record]) -> list[dict]:
    """Per measurement, MPI and metric: both sides' values in round order,
    their medians, and relays / WireGuard of the medians."""
    values: dict[tuple, dict[str, list]] = {}
    for r in records:
        c = r.case
        for metric, unit, lower in METRICS.get(c.kernel, KERNEL_METRICS) if r.ok else ():
            key = (c.kernel, c.mpi, metric, unit, lower, c.delay_ms)
            values.setdefault(key, {v: [] for v in VARIANTS})[c.variant].append(r.metrics[metric])
    rows = []
    for (part, mpi, metric, unit, lower, delay), by in values.items():
        med = {v: statistics.median(by[v]) if by[v] else None for v in VARIANTS}
        ratio = (round(med["relays"] / med["wireguard"], 3)
                 if med["relays"] is not None and med["wireguard"] else None)
        rows.append({"measure": part, "mpi": mpi, "metric": metric, "unit": unit, "lower_is_better": lower,
                     "delay_ms": delay, "relays": by["relays"], "wireguard": by["wireguard"],
                     "relays_median": med["relays"], "wireguard_median": med["wireguard"],
                     "relays_over_wireguard": ratio})
    return rows


NAMES = {("latency", "latency_us"): "latency (half the round trip)",
         ("latency", "added_us"): "latency beyond the WAN's one-way delay",
         ("latency", "bandwidth_mbit"): "ping-pong bandwidth, 1 MiB",
         ("stream", "aggregate_mbit"): "one pair, 16 MB stream",
         ("streams", "aggregate_mbit"): "every pair at once, aggregate"}


def markdown(document: dict) -> str:
    """The report of a result document: per MPI, one table of the network
    measurements and one of the kernels."""
    rows, settings = document["summary"], document["settings"]
    out = [f"Relays + wanmpi against a WireGuard tunnel carrying the MPI alone: {settings['reps']} "
           f"alternating rounds, {settings['delay_ms']:g} ms one way, launched over ssh from "
           f"{settings['launch_node']}.\n"]

    def cells(r: dict, fmt: str) -> list[str]:
        shown = [", ".join(format(x, fmt) for x in r[v]) or "-" for v in VARIANTS]
        ratio = r["relays_over_wireguard"]
        return [*shown, "-" if ratio is None else f"{ratio:.2f}"]
    order = list(NAMES)
    for mpi in settings["mpis"]:
        net_rows = sorted((r for r in rows if r["mpi"] == mpi and (r["measure"], r["metric"]) in NAMES),
                          key=lambda r: order.index((r["measure"], r["metric"])))
        if net_rows:
            out.append(f"\n{mpi}: {settings['launch_node']} -> {settings['far_node']}, and every pair across\n")
            out.append(markdown_table(["measure", f"{LABEL['relays']}", f"{LABEL['wireguard']}",
                                       "relays / WireGuard (medians)"],
                                      [[f"{NAMES[(r['measure'], r['metric'])]}, {r['unit']}",
                                        *cells(r, ".0f" if r["unit"] == "us" else ".1f")] for r in net_rows]))
        kernel_rows = sorted((r for r in rows if r["mpi"] == mpi and r["metric"] == "seconds"),
                             key=lambda r: r["measure"])
        if kernel_rows:
            out.append(f"\n{mpi}: NAS-like kernels, class {settings['class']}, "
                       f"{settings['ranks']} ranks, seconds (speed-up: WireGuard / relays)\n")
            out.append(markdown_table(
                ["kernel", LABEL["relays"], LABEL["wireguard"], "speed-up of the relays"],
                [[r["measure"].upper(), *cells(r, ".3f")[:2],
                  "-" if not r["relays_over_wireguard"] else f"{1 / r['relays_over_wireguard']:.2f}x"]
                 for r in kernel_rows]))
    return "".join(out)


def run(base: Topology, parts: list[str], mpis: list[str], delay_ms: float | None, reps: int, klass: str,
        kernels: list[str], json_path: str | None, timeout: float) -> int:
    public, private = sites(base)
    try:
        vpn.require_tools()
    except vpn.VpnError as e:
        raise BenchError(str(e)) from None
    delay_ms = delay_ms if delay_ms is not None else max(l.delay_us for l in base.links) / 1000
    started_iso, started = now_iso(), time.monotonic()
    state = net.State.load()
    if state is not None and state.topology_text == base.text and not state.ssh:
        net.Net(base, ssh=True).up()           # up without ssh: add the servers (the runner keeps it up)
    with tempfile.TemporaryDirectory(prefix="wanmpi-bench-vpn.") as directory:
        jobs = Jobs(base, Path(directory), timeout)
        runner = Runner(base, SshTestbed())
        records = runner.run(cases(parts, mpis, delay_ms, reps, klass, kernels), jobs.execute)
        hosts = {v: p.read_text() for v, p in jobs.hosts.items()}
    rows = summary(records)
    settings = {"parts": parts, "mpis": mpis, "delay_ms": delay_ms, "reps": reps, "class": klass,
                "kernels": kernels if "kernels" in parts else [], "pingpong": PINGPONG_ARGS,
                "stream_bytes": STREAM_BYTES, "public": public.name, "private": private.name,
                "launch_node": public.nodes[0].name, "far_node": private.nodes[0].name,
                "ranks": 2 * min(len(public.nodes), len(private.nodes)), "hosts": hosts}
    document = finish("vpn", base, settings, records, rows, started_iso, started, json_path)
    print(markdown(document))
    return exit_status(document)

