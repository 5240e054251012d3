"""`wanmpi demo`: the most convincing thing wanmpi does, in a few minutes.

Bring up the default two-cluster testbed, run a ping-pong between rank 0 and a
node of its own cluster and a node across the WAN with Open MPI and MPICH
(latency and bandwidth beside the configured link, and what the emulated WAN
carried), then a 4 MiB broadcast and allreduce over all nodes with Open MPI
alone and with libwanmpi, beside the lower bound, and the all-to-all pattern
of NAS IS with Open MPI alone and with wanmpi's paced, scheduled all-to-all,
with the TCP retransmissions behind the difference. Last, the second cluster
goes private (behind NAT, as a site with private addresses): a direct
connection cannot reach it, and the same MPI programs run across it through
two relay pairs (wanrelay), unmodified.
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile

from .. import paths, topo, units
from ..bench import coll, pacing
from ..bench.bounds import lower_bound
from ..bench.cases import BenchError, TopologySpec
from ..job import launch, relays
from ..testbed import emulator, net
from .options import topology_option

PINGPONG = "pingpong"


def register(commands) -> None:
    p = commands.add_parser("demo", help="bring up the default testbed and show what wanmpi does")
    topology_option(p)
    p.set_defaults(handler=cmd_demo)


def cmd_demo(args) -> int:
    return run(args.topology)


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
        for name in launch.defaults():
            mpi = launch.launcher(name)
            program = paths.program(name, PINGPONG)
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
            rows[name] = (parse_pingpong(text), wan_bytes() - before)
        print_pingpong(rows, a.name, b.name)
        print()
        if show_collectives(t) != 0:
            return 1
        print()
        if show_alltoall(t) != 0:
            return 1
        print()
        if show_private_cluster(t) != 0:
            return 1
    finally:
        if built:
            net.teardown(net.State.load())
    print("\nA WAN crossing costs the configured delay per message; libwanmpi's pipelined "
          "multi-lane collectives\nkeep every NIC busy instead (docs/libwanmpi.md, "
          "`wanmpi bench coll` for the full comparison), and its all-to-all\npaces every flow so "
          "that no queue overflows (docs/pacing.md, `wanmpi bench pacing`). A private cluster "
          "joins\nthrough relays that split and trunk its connections (docs/wanrelay.md, "
          "`wanmpi bench relay`).")
    return 0


COLLECTIVE_SIZE = "4M"


def show_collectives(t: topo.Topology) -> int:
    """Broadcast and allreduce with Open MPI alone and with libwanmpi."""
    args = ["--ops", "bcast,allreduce", "--sizes", COLLECTIVE_SIZE, "--iters", "3", "--warmup", "1"]
    times = {}
    for variant in ("ompi", "wanmpi"):
        try:
            rows = coll.run_variant(t, coll.VARIANTS[variant], len(t.nodes), None, args, 600)
        except BenchError as e:
            print(f"wanmpi demo: {e}")
            return 1
        times[variant] = {r["op"]: r for r in rows}
    delay_ms = t.links[0].delay_us / 1000
    print(f"{COLLECTIVE_SIZE}iB over {len(t.nodes)} ranks{'':<8}{'Open MPI alone':>16}{'with libwanmpi':>16}"
          f"{'speed-up':>10}{'lower bound':>13}")
    for op, alone in times["ompi"].items():
        ours = times["wanmpi"][op]
        bound = lower_bound(t, op, ours["bytes"], list(t.nodes), delay_ms)
        print(f"{op:<26}{alone['median_s']:>14.3f} s{ours['median_s']:>14.3f} s"
              f"{alone['median_s'] / ours['median_s']:>9.1f}x{bound:>11.3f} s")
    return 0


def show_alltoall(t: topo.Topology) -> int:
    """The IS pattern with Open MPI alone and with wanmpi (bench/patterns)."""
    rows = {}
    for variant in ("ompi", "wanmpi"):
        try:
            rows[variant] = pacing.run_pattern(t, pacing.VARIANTS[variant], "is", 600)
        except BenchError as e:
            print(f"wanmpi demo: {e}")
            return 1
    print(f"{'IS all-to-all (128 KiB/pair)':<30}{'Open MPI alone':>16}{'with wanmpi':>14}{'speed-up':>10}")
    (alone, alone_tcp, _), (ours, ours_tcp, _) = rows["ompi"], rows["wanmpi"]
    print(f"{'time per iteration':<30}{alone['per_iter_s'] * 1e3:>13.1f} ms{ours['per_iter_s'] * 1e3:>11.1f} ms"
          f"{alone['per_iter_s'] / ours['per_iter_s']:>9.1f}x")
    print(f"{'TCP timeouts (RTO)':<30}{alone_tcp.total.rto:>16}{ours_tcp.total.rto:>14}")
    print(f"{'retransmitted segments':<30}{alone_tcp.total.retrans_segs:>16}{ours_tcp.total.retrans_segs:>14}")
    return 0


RELAY_PAIRS = 2


def make_private(raw: dict) -> dict:
    """The demo's topology with its second cluster private and relays in every cluster."""
    out = {k: v for k, v in raw.items() if k != "relay"}
    out["cluster"] = [{**c, "relays": RELAY_PAIRS, **({"private": True} if i == 1 else {})}
                      for i, c in enumerate(raw["cluster"])]
    return out


def show_private_cluster(t: topo.Topology) -> int:
    """The second cluster behind NAT: unreachable directly, joined through relays."""
    spec = TopologySpec("demo-private", make_private, (), f"{t.clusters[1].name} private, {RELAY_PAIRS} relays "
                        "per cluster")
    p = spec.derive(t)
    a0, b0 = p.clusters[0].nodes[0], p.clusters[1].nodes[0]
    net.teardown(net.State.load())
    net.Net(p).up()
    probe = subprocess.run(net.node_command(a0, [sys.executable, "-c", (
        "import socket\n"
        f"try:\n socket.create_connection(({b0.address!r}, 22), timeout=2); print('connected')\n"
        "except OSError as e:\n print('failed:', e.strerror or e)")]), capture_output=True, text=True, timeout=30)
    print(f"{p.clusters[1].name} is now private (behind NAT, addresses {p.clusters[1].network}); "
          f"a direct TCP connect from {a0.name} to {b0.name}: {probe.stdout.strip() or probe.stderr.strip()}")
    print(f"through {RELAY_PAIRS} relay pairs (relay NICs {units.format_rate(p.clusters[0].relay_nodes[0].nic_bps)}), "
          "the same programs, unmodified:")
    print(f"{'ping-pong ' + a0.name + ' <-> ' + b0.name:<30}{'latency':>12}{'bandwidth':>16}{'relayed bytes':>16}")
    for name in launch.defaults():
        job = launch.Job(p, [str(paths.program(name, PINGPONG)), "-s", "1048576", "-r", "8"], [a0, b0])
        with tempfile.TemporaryFile("w+") as out:
            status = launch.run_job(launch.launcher(name), job, timeout=300, stdout=out)
            out.seek(0)
            text = out.read()
        row = parse_pingpong(text).get(b0.name)
        if status != 0 or row is None:
            print(text)
            print(f"wanmpi demo: the {name} job through the relays failed with status {status}")
            return 1
        carried = relayed_bytes(p)
        print(f"{name:<30}{row[0]:>9.0f} us{row[1]:>11.1f} Mbit{carried:>16,}")
    return 0


def relayed_bytes(t: topo.Topology) -> int:
    """Stream bytes the last job's relays read from their own cluster's nodes."""
    return int(sum(relays.counter_total(relays.final_counters(r.name), "wanrelay_stream_bytes_total",
                                        direction="to_wan") for r in t.relays))


def parse_pingpong(text: str) -> dict[str, tuple[float, float]]:
    rows = {}
    for m in re.finditer(r"peer \d+ host (\S+) latency_us ([\d.]+) bandwidth_mbit ([\d.]+) ok", text):
        rows[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return rows


def wan_bytes() -> int:
    return sum(c["tx_bytes"] for c in emulator.counters().values())


def print_pingpong(rows: dict, local: str, remote: str) -> None:
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
