"""`wanmpi bench relay`: what the relays cost and what they give, side by side
with direct connections on the same testbed (public clusters, `--no-relays`).

Parts (`--parts`, all by default):
  latency  pingpong between a node of each cluster (2 ranks): half the median
           round trip of 8-byte messages, and the one-way rate of 4 MiB
           messages; direct vs through one relay pair (relay NICs = node
           NICs). Added latency per relay = (relayed - direct) / 2: a message
           crosses two relays.
  path     where that latency goes, without MPI (bench/tcprtt.c: median round
           trip of 8-byte messages over one TCP connection, a0 <-> b0):
           direct; relayed; "forwarded" (the same relay namespaces forwarding
           in the kernel, no process: each direction crosses one); and
           "loopback" (two processes on one node: the cost of waking a
           process, the floor of any user-level relay). Per relay, one way:
           network = (forwarded - direct) / 2 per relay namespace crossed,
           process = (relayed - direct) / 4 - network. At 0 ms only (whatever
           --delays): microseconds are lost in the emulator's jitter at 10 ms.
  trunks   wanflow (bench/wanflow.c): every node of one cluster streams to
           its partner in the other at once (1 MiB messages, 4 in flight per
           pair, so MPI's rendezvous round trip does not idle the path); direct, and through 1, 2 and 4
           relay pairs whose NICs (`--relay-nic`, default a quarter of the
           WAN rate) are slower than the WAN, against the bound min(N x relay
           NIC, WAN rate); `--flow-bytes` per pair (default 64 MB, long
           enough for steady state).
  kernels  NAS-like kernels (bench suite's, class `--class`) at each delay,
           direct vs through two relay pairs, without and with cross
           traffic: one bulk TCP flow between the routers (it crosses the
           emulated WAN and competes with the job).

The testbeds are derived from the one given (its clusters made public, with
relays); the runner (runner.py) brings each up, sets the delays, and
leaves the machine as it found it. Open MPI and MPICH (`--mpis`).
"""
from __future__ import annotations

import contextlib
import json
import re
import statistics
import subprocess
import sys
import time

from .. import paths, shell
from ..job import libwanmpi, relays
from ..testbed import net
from ..topo import Topology
from .cases import BenchError, Case, Record, TopologySpec, with_relays
from .job_output import job_output, job_rows
from .kernels import KERNELS
from .results import exit_status, finish, markdown_table, now_iso
from .runner import Runner

PARTS = ("latency", "path", "trunks", "kernels")
PATH_VARIANTS = ("loopback", "direct", "forwarded", "relayed")
PATH_PORT = 5302
TRUNKS = (1, 2, 4)
RELAY_KERNELS = ("bt", "cg", "lu", "mg", "sp")
PINGPONG_ARGS = ["-s", str(4 << 20), "-r", "6"]
FLOW_BYTES = 64_000_000                  # per wanflow pair (--flow-bytes)
CROSS_PORT = 5301


def relays_spec(n: int, relay_nic_bps: int | None = None) -> TopologySpec:
    """Public clusters with n relay nodes each (at relay_nic_bps, else the node NIC)."""
    return with_relays(n, relay_nic_bps, public=True)


def cases(parts: list[str], mpis: list[str], delays: list[float], reps: int, klass: str,
          relay_nic_bps: int, flow_bytes: int = FLOW_BYTES) -> list[Case]:
    planned = []
    one, two = relays_spec(1), relays_spec(2)
    for rep in range(1, reps + 1):
        for mpi in mpis:
            if "latency" in parts:
                for delay in delays:
                    for v in ("direct", "relayed"):
                        planned.append(Case("pingpong", v, mpi, delay, rep, one))
            if "path" in parts and mpi == mpis[0]:      # no MPI: once, at 0 ms, whatever the delays
                for v in PATH_VARIANTS:
                    planned.append(Case("tcprtt", v, "tcp", 0.0, rep, one))
            if "trunks" in parts:
                slow = {n: relays_spec(n, relay_nic_bps) for n in TRUNKS}
                planned.append(Case("wanflow", "direct", mpi, max(delays), rep, slow[1],
                                    (("bytes", flow_bytes),)))
                for n in TRUNKS:
                    planned.append(Case("wanflow", f"relayed-{n}", mpi, max(delays), rep, slow[n],
                                        (("trunks", n), ("bytes", flow_bytes))))
            if "kernels" in parts:
                for delay in delays:
                    for kernel in RELAY_KERNELS:
                        for cross in (False, True):
                            for v in ("direct", "relayed"):
                                planned.append(Case(kernel, v, mpi, delay, rep, two,
                                                    (("class", klass), ("cross", cross))))
    # cases of one testbed together (the runner groups them so; keep plan order inside)
    return planned


@contextlib.contextmanager
def cross_traffic(t: Topology):
    """One bulk TCP flow from the first cluster's router to the second's, over the
    emulated WAN, for as long as the block runs."""
    a, b = t.clusters[0], t.clusters[1]
    flow = [sys.executable, "-m", "wanmpi.testbed.flow"]
    server = subprocess.Popen(net.in_netns(b.router_netns, [*flow, "serve", "--port", str(CROSS_PORT)]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    sender = subprocess.Popen(net.in_netns(a.router_netns, [*flow, "send", "--host", b.public_address,
                                                             "--port", str(CROSS_PORT), "--seconds", "3600"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)                   # past slow start
        if sender.poll() is not None:
            raise BenchError(f"the cross-traffic flow did not start (exit {sender.returncode})")
        yield
    finally:
        for p in (sender, server):
            if p.poll() is None:
                p.kill()
            p.wait()


def tcprtt(t: Topology, variant: str) -> dict:
    """One `path` measurement (see the module's doc)."""
    a, b = t.clusters[0], t.clusters[1]
    a0, b0, ra, rb = a.nodes[0], b.nodes[0], a.relay_nodes[0], b.relay_nodes[0]
    program = str(paths.tool("tcprtt"))
    shim = {"LD_PRELOAD": str(libwanmpi.shim_library()), "WANMPI_CLUSTER_MAP": libwanmpi.cluster_map(t),
            **relays.environment(t)} if variant == "relayed" else {}
    env = ["env", *[f"{k}={v}" for k, v in shim.items()]]
    where = (a0, "127.0.0.1") if variant == "loopback" else (b0, b0.address)
    undo: list[list[str]] = []
    with contextlib.ExitStack() as stack:
        server = subprocess.Popen(net.node_command(where[0], [*env, program, "serve", where[1], str(PATH_PORT)]),
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        stack.callback(lambda: (server.kill(), server.wait()))
        if not server.stdout.readline().startswith("listening"):
            raise BenchError("tcprtt did not start its echo server")
        if variant == "relayed":
            relay_set = stack.enter_context(relays.RelaySet(t, "bench-path"))
            relay_set.start()
        elif variant == "forwarded":
            # a0 -> a-relay0 -> router a -> WAN -> router b -> b0; back b0 -> b-relay0 -> ... -> a0
            stack.callback(lambda: [subprocess.run(c, capture_output=True) for c in undo])
            for node, relay, far in ((a0, ra, b), (b0, rb, a)):
                shell.run(net.in_netns(relay.netns, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]))
                undo.append(net.in_netns(relay.netns, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=0"]))
                shell.run(net.node_command(node, ["ip", "route", "add", far.network, "via", relay.inside]))
                undo.append(net.node_command(node, ["ip", "route", "del", far.network]))
        done = subprocess.run(net.node_command(a0, [*env, program, "ping", where[1], str(PATH_PORT), "3000"]),
                              capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise BenchError(f"tcprtt {variant}: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout)


def execute(case: Case, t: Topology, timeout: float) -> dict:
    if case.kernel == "tcprtt":
        r = tcprtt(t, case.variant)
        return {"median_us": r["median_us"], "p10_us": r["p10_us"], "p90_us": r["p90_us"]}
    use_relays = case.variant != "direct"
    if case.kernel == "pingpong":
        a, b = t.clusters[0].nodes[0], t.clusters[1].nodes[0]
        out, _ = job_output(t, case.mpi, [str(paths.program(case.mpi, "pingpong")), *PINGPONG_ARGS], [a, b],
                            timeout=timeout, use_relays=use_relays)
        m = re.search(r"latency_us ([\d.]+) bandwidth_mbit ([\d.]+) ok", out)
        if not m:
            raise BenchError(f"pingpong printed no checked result: {out.strip()[-300:]}")
        return {"latency_us": float(m.group(1)), "bandwidth_mbit": float(m.group(2))}
    if case.kernel == "wanflow":
        nodes = list(t.clusters[0].nodes) + list(t.clusters[1].nodes)
        rows = job_rows(t, case.mpi, [str(paths.program(case.mpi, "wanflow")), "--bytes", str(case.param("bytes"))],
                        nodes, timeout=timeout, use_relays=use_relays)
        if rows[-1].get("check") != "ok":
            raise BenchError(f"wanflow: payload check failed: {rows[-1]}")
        return {"aggregate_mbit": rows[-1]["aggregate_mbit"], "seconds": rows[-1]["seconds"]}
    kernel = KERNELS[case.kernel]
    nodes = [n for c in t.clusters for n in c.nodes]
    with cross_traffic(t) if case.param("cross") else contextlib.nullcontext():
        rows = job_rows(t, case.mpi, kernel.argv(case.mpi, case.param("class")), nodes, timeout=timeout,
                        use_relays=use_relays)
    row = rows[-1]
    if row.get("check") != "ok":
        raise BenchError(f"{case.kernel}: the self-check did not pass: {row}")
    return {"seconds": row["seconds"]}


# ---- results ----------------------------------------------------------------------------------
def cells(records: list[Record]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in records:
        if r.ok:
            c = r.case
            out.setdefault((c.kernel, c.variant, c.mpi, c.delay_ms, c.param("cross")), []).append(r.metrics)
    return out


def median(rows: list[dict], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def summary(records: list[Record], base: Topology, relay_nic_bps: int) -> dict:
    c = cells(records)
    out: dict = {"latency": [], "path": [], "trunks": [], "kernels": []}
    for delay in sorted({k[3] for k in c if k[0] == "tcprtt"}):
        rtt = {v: median(c[("tcprtt", v, "tcp", delay, None)], "median_us")
               for v in PATH_VARIANTS if ("tcprtt", v, "tcp", delay, None) in c}
        if len(rtt) == len(PATH_VARIANTS):
            network = (rtt["forwarded"] - rtt["direct"]) / 2
            per_relay = (rtt["relayed"] - rtt["direct"]) / 4
            out["path"].append({"delay_ms": delay, **{f"{v}_rtt_us": rtt[v] for v in PATH_VARIANTS},
                                "per_relay_us": round(per_relay, 1), "network_us": round(network, 1),
                                "process_us": round(per_relay - network, 1),
                                "wakeup_us": round(rtt["loopback"] / 2, 1)})
    for (kernel, variant, mpi, delay, cross), rows in c.items():
        if kernel == "tcprtt":
            continue
        if kernel == "pingpong" and variant == "relayed":
            direct = c.get((kernel, "direct", mpi, delay, cross))
            if direct:
                lat_d, lat_r = median(direct, "latency_us"), median(rows, "latency_us")
                bw_d, bw_r = median(direct, "bandwidth_mbit"), median(rows, "bandwidth_mbit")
                out["latency"].append({"mpi": mpi, "delay_ms": delay, "direct_us": lat_d, "relayed_us": lat_r,
                                       "added_per_relay_us": round((lat_r - lat_d) / 2, 1),
                                       "direct_mbit": bw_d, "relayed_mbit": bw_r,
                                       "bandwidth_ratio": round(bw_r / bw_d, 3)})
        elif kernel == "wanflow":
            wan = min(l.rate_bps for l in base.links) / 1e6
            n = int(variant.split("-")[1]) if variant.startswith("relayed-") else None
            bound = min(n * relay_nic_bps / 1e6, wan) if n else wan
            agg = median(rows, "aggregate_mbit")
            out["trunks"].append({"mpi": mpi, "delay_ms": delay, "variant": variant, "aggregate_mbit": agg,
                                  "bound_mbit": bound, "of_bound": round(agg / bound, 3)})
        elif variant == "relayed":
            direct = c.get((kernel, "direct", mpi, delay, cross))
            if direct:
                d, r = median(direct, "seconds"), median(rows, "seconds")
                out["kernels"].append({"kernel": kernel, "mpi": mpi, "delay_ms": delay, "cross": cross,
                                       "direct_s": d, "relayed_s": r, "speedup": round(d / r, 3)})
    return out


def print_report(s: dict) -> None:
    if s["latency"]:
        print("\nlatency (8-byte ping-pong, half the median round trip) and 4 MiB one-way rate")
        print(markdown_table(["MPI", "delay", "direct", "relayed", "added per relay", "direct rate",
                              "relayed rate", "relayed / direct"],
                             [[r["mpi"], f"{r['delay_ms']:g} ms", f"{r['direct_us']:.1f} us", f"{r['relayed_us']:.1f} us",
                               f"{r['added_per_relay_us']:.1f} us", f"{r['direct_mbit']:.1f} Mbit/s",
                               f"{r['relayed_mbit']:.1f} Mbit/s", f"{r['bandwidth_ratio']:.3f}"]
                              for r in sorted(s["latency"], key=lambda r: (r["mpi"], r["delay_ms"]))]))
    if s["path"]:
        print("\nwhere a relay's latency goes (tcprtt, median round trips of 8 bytes; per relay, one way)")
        print(markdown_table(["delay", "loopback", "direct", "forwarded", "relayed", "per relay", "network",
                              "process", "one wake-up (loopback / 2)"],
                             [[f"{r['delay_ms']:g} ms", *[f"{r[v + '_rtt_us']:.1f} us" for v in PATH_VARIANTS],
                               f"{r['per_relay_us']:.1f} us", f"{r['network_us']:.1f} us",
                               f"{r['process_us']:.1f} us", f"{r['wakeup_us']:.1f} us"] for r in s["path"]]))
    if s["trunks"]:
        print("\naggregate WAN throughput, every node streaming across (wanflow)")
        print(markdown_table(["MPI", "delay", "path", "aggregate", "bound", "of bound"],
                             [[r["mpi"], f"{r['delay_ms']:g} ms", r["variant"], f"{r['aggregate_mbit']:.1f} Mbit/s",
                               f"{r['bound_mbit']:.0f} Mbit/s", f"{r['of_bound']:.2f}"]
                              for r in sorted(s["trunks"], key=lambda r: (r["mpi"], r["variant"]))]))
    if s["kernels"]:
        print("\nNAS-like kernels: direct vs two relay pairs (speed-up > 1: relayed faster)")
        print(markdown_table(["kernel", "MPI", "delay", "cross traffic", "direct", "relayed", "speed-up"],
                             [[r["kernel"], r["mpi"], f"{r['delay_ms']:g} ms", "yes" if r["cross"] else "no",
                               f"{r['direct_s']:.3f} s", f"{r['relayed_s']:.3f} s", f"{r['speedup']:.2f}x"]
                              for r in sorted(s["kernels"], key=lambda r: (r["mpi"], r["delay_ms"], r["cross"],
                                                                           r["kernel"]))]))


def run(base: Topology, parts: list[str], mpis: list[str], delays: list[float], reps: int, klass: str,
        relay_nic_bps: int | None, json_path: str | None, timeout: float, flow_bytes: int = FLOW_BYTES) -> int:
    if len(base.clusters) != 2:
        raise BenchError(f"{base.source}: bench relay needs a topology of two clusters")
    relay_nic_bps = relay_nic_bps or min(l.rate_bps for l in base.links) // 4
    started_iso, started = now_iso(), time.monotonic()
    records = Runner(base).run(cases(parts, mpis, delays, reps, klass, relay_nic_bps, flow_bytes),
                               lambda case, t: execute(case, t, timeout))
    s = summary(records, base, relay_nic_bps)
    print_report(s)
    settings = {"parts": parts, "mpis": mpis, "delays": delays, "reps": reps, "class": klass,
                "relay_nic_bps": relay_nic_bps, "pingpong": PINGPONG_ARGS, "wanflow_bytes": flow_bytes,
                "kernels": list(RELAY_KERNELS)}
    return exit_status(finish("relay", base, settings, records, [s], started_iso, started, json_path))
