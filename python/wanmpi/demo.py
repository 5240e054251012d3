"""`wanmpi demo`: the most convincing thing wanmpi does, in a few minutes.

Today: bring up the default two-cluster testbed, run a ping-pong between rank 0
and a node of its own cluster and a node across the WAN with Open MPI and
MPICH, and show latency and bandwidth beside the configured link and what the
emulated WAN carried.
"""
from __future__ import annotations

import re
import tempfile

from . import emulator, launch, net, paths, topo, units

PINGPONG = "pingpong"


def run(topology_path: str | None = None) -> int:
    t = topo.load(topology_path)
    a, b = t.clusters[0], t.clusters[1]
    link = t.links[0]
    print(f"wanmpi demo: {len(a.nodes)} nodes in {a.name} and {len(b.nodes)} in {b.name}, "
          f"NICs {units.format_rate(a.nic_bps)}, WAN {units.format_rate(link.rate_bps)} with "
          f"{units.format_duration_us(link.delay_us)} one-way delay (emulated by wanem)\n")
    built = net.Net(t).up()
    try:
        rows = {}
        for name in launch.Launcher.registry:
            mpi = launch.launcher(name)
            program = paths.BUILD / name / PINGPONG
            ranks = [a.nodes[0], a.nodes[1], b.nodes[0]]
            before = wan_bytes()
            with tempfile.TemporaryFile("w+") as out:
                status = launch.run_job(mpi, launch.Job(t, [str(program), "-s", "1048576", "-r", "8"], ranks),
                                        timeout=300, stdout=out)
                out.seek(0)
                text = out.read()
            if status != 0:
                print(text)
                print(f"wanmpi demo: the {name} job failed with status {status}")
                return 1
            rows[name] = (parse(text), wan_bytes() - before)
        print_table(rows, a.name, b.name)
    finally:
        if built:
            net.teardown(net.State.load())
    print("\nThe WAN crossing costs the configured delay per message and TCP ramps up over a "
          "20 ms round trip;\nwanmpi's WAN-aware collectives, pacing and relays build on this "
          "testbed (see README).")
    return 0


def parse(text: str) -> dict[str, tuple[float, float]]:
    rows = {}
    for m in re.finditer(r"peer \d+ host (\S+) latency_us ([\d.]+) bandwidth_mbit ([\d.]+) ok", text):
        rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return rows


def wan_bytes() -> int:
    return sum(c["tx_bytes"] for c in emulator.counters().values())


def print_table(rows: dict, local: str, remote: str) -> None:
    names = list(rows)
    print(f"{'ping-pong from ' + local + '0 to':<26}" + "".join(f"{n:>28}" for n in names))
    print(f"{'':<26}" + "".join(f"{'latency':>14}{'bandwidth':>14}" for _ in names))
    peers = sorted({p for r, _ in rows.values() for p in r})
    for peer in peers:
        where = "same cluster" if peer.startswith(local) else "across the WAN"
        cells = ""
        for n in names:
            lat, bw = rows[n][0].get(peer, (float("nan"), float("nan")))
            shown = f"{lat / 1000:.2f} ms" if lat >= 1000 else f"{lat:.0f} us"
            cells += f"{shown:>14}{bw:>9.1f} Mbit"
        print(f"{peer + ' (' + where + ')':<26}{cells}")
    print(f"{'bytes on the emulated WAN':<26}" + "".join(f"{rows[n][1]:>28,}" for n in names))
