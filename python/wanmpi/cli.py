"""`wanmpi`: the one command. Subcommands: testbed, run, bench, clean, topology."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from . import paths, topo, units
from .bench import coll, plot
from .job import doctor, launch, tcpstats
from .testbed import emulator, net
from .topo import Topology

EXIT_USAGE = 2


class CliError(RuntimeError):
    """A problem to report as 'wanmpi: error: ...' with exit status 2."""


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)      # `wanmpi ... | head` ends quietly
    # SIGTERM ends a command as Ctrl-C does: its cleanup runs (a bench puts the
    # testbed back, relays and namespaces it made are removed)
    signal.signal(signal.SIGTERM, interrupted)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.handler(args)
    except (CliError, topo.TopologyError, net.TestbedError, launch.LaunchError,
            emulator.EmulatorError, plot.PlotError, coll.BenchError, doctor.DoctorError) as e:
        print(f"wanmpi: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return launch.EXIT_INTERRUPTED


def interrupted(_signum, _frame):
    raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wanmpi", description="Run MPI programs fast across clusters "
                                "joined by a wide-area network, on an emulated testbed or real clusters.")
    sub = p.add_subparsers(metavar="COMMAND")

    def topology_option(sp):
        sp.add_argument("--topology", "-t", metavar="FILE",
                        help="topology file (default: $WANMPI_TOPOLOGY, else the testbed that is up, "
                             f"else {paths.DEFAULT_TOPOLOGY.relative_to(paths.REPO)})")

    tb = sub.add_parser("testbed", help="build, remove or inspect the emulated testbed")
    tbsub = tb.add_subparsers(metavar="ACTION", required=True)
    for action, handler, text in (("up", cmd_up, "build the testbed of a topology (harmless if up)"),
                                  ("down", cmd_down, "remove the testbed"),
                                  ("status", cmd_status, "show the testbed and its health")):
        sp = tbsub.add_parser(action, help=text)
        topology_option(sp)
        sp.set_defaults(handler=handler)

    cl = sub.add_parser("clean", help="remove every namespace and process a crashed run left behind")
    cl.set_defaults(handler=cmd_clean)

    ts = sub.add_parser("topology", help="check a topology file and show what it describes")
    ts.add_argument("file", nargs="?", help="topology file (default: the embedded default)")
    ts.add_argument("--json", action="store_true", help="print as JSON")
    ts.set_defaults(handler=cmd_topology)

    rn = sub.add_parser("run", help="run an MPI program across the clusters",
                        usage="wanmpi run [options] -n N PROGRAM [ARGS...]")
    topology_option(rn)
    rn.add_argument("--mpi", default="openmpi", help="MPI implementation: "
                    f"{' or '.join(launch.Launcher.registry)} (default: openmpi)")
    rn.add_argument("-n", "--np", dest="ranks", required=True, metavar="N", help="number of ranks")
    rn.add_argument("--map", metavar="MAP", help="rank placement: 'block' (default: contiguous ranks "
                    "per cluster), 'interleave' (round-robin over clusters) or a node per rank: a0,b0,...")
    rn.add_argument("--timeout", type=float, metavar="SECONDS",
                    help="kill the job after this many seconds (exit status 124)")
    rn.add_argument("--env", "-x", action="append", default=[], metavar="NAME=VALUE",
                    help="environment variable for every rank (repeatable)")
    rn.add_argument("--no-wanmpi", dest="wanmpi", action="store_false",
                    help="run on the MPI library alone, without preloading libwanmpi (for comparison)")
    rn.add_argument("--no-relays", dest="relays", action="store_false",
                    help="connect the clusters directly even if the topology has relays (public "
                         "clusters only; for comparison)")
    rn.add_argument("--tcp-stats", action="store_true",
                    help="after the job, print its TCP retransmission timeouts, retransmitted segments and "
                         "tail-loss probes, summed over its nodes, to stderr")
    rn.add_argument("--tcp-stats-json", metavar="FILE",
                    help="write those counters (sums and per node) as JSON to FILE (implies --tcp-stats)")
    rn.add_argument("program", metavar="PROGRAM")
    rn.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    rn.set_defaults(handler=cmd_run)

    lk = sub.add_parser("link", help="show or change the emulated WAN links while they run")
    lksub = lk.add_subparsers(metavar="ACTION", required=True)
    ls = lksub.add_parser("show", help="live settings and counters of every link and direction")
    ls.add_argument("--json", action="store_true", help="print the emulator's reply as JSON")
    ls.set_defaults(handler=cmd_link_show)
    lset = lksub.add_parser("set", help="change a link's settings at once (not the topology file)")
    lset.add_argument("link", metavar="LINK", help="link name, e.g. a-b (see `wanmpi link show`)")
    lset.add_argument("--dir", default="both", choices=["a_to_b", "b_to_a", "both"],
                      help="direction: a_to_b is from the first cluster of the name (default: both)")
    lset.add_argument("--delay", help="one-way delay, e.g. 20ms")
    lset.add_argument("--rate", help="bottleneck rate, e.g. 1Gbit")
    lset.add_argument("--queue", help="drop-tail queue, e.g. 500KB (at least one MTU)")
    lset.add_argument("--loss", help="random loss, e.g. 0.001 or 0.1%%")
    updown = lset.add_mutually_exclusive_group()
    updown.add_argument("--up", dest="up", action="store_true", default=None, help="carry traffic again")
    updown.add_argument("--down", dest="up", action="store_false", help="cut the link: drop every packet")
    lset.set_defaults(handler=cmd_link_set)
    lm = lksub.add_parser("monitor", help="record bytes, packets, drops and queue per 1 ms bin to CSV")
    lm.add_argument("file", nargs="?", metavar="FILE.csv", help="where to write (omit with --stop)")
    lm.add_argument("--stop", action="store_true", help="stop recording and flush the file")
    lm.set_defaults(handler=cmd_link_monitor)

    pl = sub.add_parser("plot", help="draw figures from measurements")
    plsub = pl.add_subparsers(metavar="FIGURE", required=True)
    pt = plsub.add_parser("traffic", help="WAN bandwidth over time from a `wanmpi link monitor` CSV")
    pt.add_argument("csv", metavar="FILE.csv")
    pt.add_argument("-o", "--output", metavar="FILE.png", help="default: FILE.png beside the CSV")
    pt.add_argument("--bin-ms", type=int, default=1, help="add up this many 1 ms bins per point")
    pt.set_defaults(handler=cmd_plot_traffic)

    dr = sub.add_parser("doctor", help="check a node's TCP settings against the topology: what to change and why")
    dr.add_argument("topology_file", nargs="?", metavar="TOPOLOGY",
                    help="topology file (default: as for --topology of other commands)")
    dr.add_argument("--node", metavar="NAME", help="check this node of the topology (a testbed node's "
                    "namespace, or a real host through the remote shell) instead of this machine")
    dr.add_argument("--json", action="store_true", help="print the findings as JSON")
    dr.set_defaults(handler=cmd_doctor)

    dm = sub.add_parser("demo", help="bring up the default testbed and show what wanmpi does")
    topology_option(dm)
    dm.set_defaults(handler=cmd_demo)

    bn = sub.add_parser("bench", help="measure the testbed and wanmpi")
    bnsub = bn.add_subparsers(metavar="SUITE", required=True)
    bnet = bnsub.add_parser("net", help="measure every WAN link against its configured values")
    topology_option(bnet)
    bnet.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput test")
    bnet.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bnet.set_defaults(handler=cmd_bench_net)
    bem = bnsub.add_parser("emulator", help="measure the WAN emulator itself: RTT, TCP, loss, capacity, CPU")
    topology_option(bem)
    bem.add_argument("--quick", action="store_true", help="few and short measurements (for tests)")
    bem.add_argument("--seconds", type=float, help="duration of each TCP test (default: 5, quick: 1)")
    bem.add_argument("--parts", metavar="LIST", help="comma-separated subset of: rtt,tcp,loss,load,capacity")
    bem.add_argument("--link", metavar="LINK", help="the WAN link to measure (default: the first)")
    bem.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bem.set_defaults(handler=cmd_bench_emulator)
    bco = bnsub.add_parser("coll", help="WAN-aware collectives vs the MPIs' own, across sizes and delays")
    topology_option(bco)
    bco.add_argument("--variants", default=",".join(coll.VARIANTS),
                     help=f"comma-separated subset of: {', '.join(coll.VARIANTS)} (default: all)")
    bco.add_argument("--ops", default="bcast,allreduce", help="operations (default: bcast,allreduce)")
    bco.add_argument("--sizes", default=coll.DEFAULT_SIZES,
                     help=f"message sizes, K/M suffixes (default: {coll.DEFAULT_SIZES})")
    bco.add_argument("--delays", default="0,2,5,10", help="one-way WAN delays in ms (default: 0,2,5,10)")
    bco.add_argument("--iters", type=int, default=5, help="timed iterations per size (default: 5)")
    bco.add_argument("-n", "--np", dest="ranks", type=int, help="ranks (default: one per node)")
    bco.add_argument("--map", metavar="MAP", help="rank placement, as for `wanmpi run`")
    bco.add_argument("--quick", action="store_true",
                     help=f"sizes {coll.QUICK_SIZES}, delay 10 ms, 2 iterations (for tests)")
    bco.add_argument("--timeout", type=float, default=1800, help="per job, seconds (default: 1800)")
    bco.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bco.add_argument("--plots", metavar="DIR", help="also draw PNG plots into DIR")
    bco.set_defaults(handler=cmd_bench_coll)
    from .bench import pacing
    bpa = bnsub.add_parser("pacing", help="IS, FT and LU patterns with and without pacing, with their RTOs")
    topology_option(bpa)
    bpa.add_argument("--variants", default=",".join(pacing.VARIANTS),
                     help=f"comma-separated subset of: {', '.join(pacing.VARIANTS)} (default: all)")
    bpa.add_argument("--kernels", default=",".join(pacing.KERNELS),
                     help=f"comma-separated subset of: {', '.join(pacing.KERNELS)} (default: all)")
    bpa.add_argument("--delays", default="0,2,5,10", help="one-way WAN delays in ms (default: 0,2,5,10)")
    bpa.add_argument("--cc", default=",".join(pacing.CONGESTION_CONTROLS),
                     help="congestion controls set on every node (default: cubic,bbr)")
    bpa.add_argument("--reps", type=int, default=3, help="jobs per cell; the median is shown (default: 3)")
    bpa.add_argument("--quick", action="store_true",
                     help="delay 10 ms, cubic, one job per cell, variants ompi,paper,wanmpi (for tests)")
    bpa.add_argument("--timeout", type=float, default=600, help="per job, seconds (default: 600)")
    bpa.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bpa.add_argument("--plots", metavar="DIR", help="also draw PNG plots into DIR")
    bpa.set_defaults(handler=cmd_bench_pacing)
    brl = bnsub.add_parser("relay", help="relays vs direct connections: latency per relay, bandwidth, trunk "
                           "scaling, NAS-like kernels with and without cross traffic")
    topology_option(brl)
    brl.add_argument("--parts", default="latency,path,trunks,kernels",
                     help="comma-separated subset of: latency, path, trunks, kernels (default: all)")
    brl.add_argument("--mpis", default=",".join(launch.Launcher.registry),
                     help="comma-separated MPIs (default: openmpi,mpich)")
    brl.add_argument("--delays", default="0,10", help="one-way WAN delays in ms (default: 0,10; trunks: the largest)")
    brl.add_argument("--reps", type=int, default=1, help="repetitions of every case; medians shown (default: 1)")
    brl.add_argument("--class", dest="klass", default="A", choices=("S", "A", "B"),
                     help="kernel class (default: A)")
    brl.add_argument("--relay-nic", help="relay NIC rate for the trunk part (default: a quarter of the WAN rate)")
    brl.add_argument("--flow-bytes", default="64MB",
                     help="bytes each node streams in the trunk part (default: 64MB)")
    brl.add_argument("--timeout", type=float, default=600, help="per job, seconds (default: 600)")
    brl.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    brl.set_defaults(handler=cmd_bench_relay)
    from .bench import rbudp
    bru = bnsub.add_parser("rbudp", help="goodput of one bulk transfer: RBUDP through a relay pair vs TCP cubic "
                           "and bbr, at several loss rates")
    topology_option(bru)
    bru.add_argument("--size", default="1GB", help="bytes to transfer (default: 1GB)")
    bru.add_argument("--losses", default=rbudp.DEFAULT_LOSSES,
                     help=f"random loss rates set on the link, e.g. 0,0.1%%,1%% (default: {rbudp.DEFAULT_LOSSES})")
    bru.add_argument("--delay", default="10ms", help="one-way delay set on the link (default: 10ms)")
    bru.add_argument("--rate", help="RBUDP blast rate, e.g. 190Mbit (default: 97%% of the path rate)")
    bru.add_argument("--payload", type=int, default=None,
                     help="RBUDP UDP payload per datagram in bytes (default: MTU - 28)")
    bru.add_argument("--variants", default=",".join(rbudp.VARIANTS),
                     help=f"comma-separated subset of: {', '.join(rbudp.VARIANTS)} (default: all)")
    bru.add_argument("--max-seconds", type=float, default=120,
                     help="cut a transfer after this long and report it as partial (default: 120)")
    bru.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bru.set_defaults(handler=cmd_bench_rbudp)
    from .bench import kernels, suite
    bsu = bnsub.add_parser("suite", help="the NAS-like kernels across the clusters: performance relative to "
                           "one cluster vs delay, and the gain of each technique")
    topology_option(bsu)
    bsu.add_argument("--kernels", default=",".join(kernels.DEFAULT_KERNELS),
                     help=f"comma-separated subset of: {', '.join(kernels.KERNELS)} "
                          f"(default: {','.join(kernels.DEFAULT_KERNELS)})")
    bsu.add_argument("--variants", default=",".join(suite.VARIANTS),
                     help=f"comma-separated subset of: {', '.join(suite.VARIANTS)} (default: every one)")
    bsu.add_argument("--mpis", default=",".join(suite.MPIS),
                     help=f"comma-separated subset of: {', '.join(suite.MPIS)} (default: both)")
    bsu.add_argument("--delays", default=suite.DEFAULT_DELAYS,
                     help=f"one-way WAN delays in ms (default: {suite.DEFAULT_DELAYS})")
    bsu.add_argument("--reps", type=int, default=3, help="jobs per cell; best and median (default: 3)")
    bsu.add_argument("--class", dest="klass", default="A", choices=kernels.CLASSES,
                     help="problem class, i.e. message sizes (default: A)")
    bsu.add_argument("--quick", action="store_true",
                     help="class S, delays 0 and 10 ms, one job per cell (under 15 minutes)")
    bsu.add_argument("--timeout", type=float, default=600, help="per job, seconds (default: 600)")
    bsu.add_argument("--out", metavar="DIR", help="write suite.json, suite.md and the PNG plots into DIR")
    bsu.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    bsu.set_defaults(handler=cmd_bench_suite)
    bre = bnsub.add_parser("report", help="the markdown table and plots of a saved result file")
    bre.add_argument("files", nargs="+", metavar="RESULTS.json",
                     help="a result file; several `bench suite` files are merged (parts of one run)")
    bre.add_argument("--out", metavar="DIR", help="where to write (default: beside the (merged) file)")
    bre.add_argument("--json", metavar="FILE", help="write the merged result document to FILE")
    bre.set_defaults(handler=cmd_bench_report)
    return p


# ---- topology selection --------------------------------------------------------
def topology_for(args) -> Topology:
    """--topology, else $WANMPI_TOPOLOGY, else the testbed that is up, else the default."""
    path = getattr(args, "topology", None) or os.environ.get("WANMPI_TOPOLOGY")
    if path:
        return topo.load(path)
    state = net.State.load()
    if state is not None:
        return topo.loads(state.topology_text, state.topology_source)
    return topo.load(None)


# ---- testbed --------------------------------------------------------------------
def cmd_up(args) -> int:
    t = topology_for(args)
    built = net.Net(t).up()
    print(f"testbed {'up' if built else 'already up'}: {describe(t)}")
    return 0


def cmd_down(args) -> int:
    state = net.State.load()
    net.teardown(state)
    print("testbed down" if state else "no testbed was up; removed any leftovers")
    return 0


def cmd_clean(args) -> int:
    removed = net.clean()
    print("\n".join(f"removed {r}" for r in removed) if removed else "nothing to clean")
    return 0


def cmd_status(args) -> int:
    state = net.State.load()
    if state is None:
        leftovers = net.existing_namespaces()
        print("testbed: down" + (f" (leftover namespaces: {len(leftovers)}; run `wanmpi clean`)"
                                 if leftovers else ""))
        return 1
    t = topo.loads(state.topology_text, state.topology_source)
    problems = net.health(state)
    print(f"testbed: {'UNHEALTHY' if problems else 'up'} ({t.source})")
    for p in problems:
        print(f"  problem: {p}")
    for c in t.clusters:
        kind = "private, behind NAT" if c.private else "public"
        print(f"cluster {c.name}: {len(c.nodes)} nodes, {c.network} ({kind}), NIC "
              f"{units.format_rate(c.nic_bps)}, port buffer {units.format_size(c.port_buffer)}")
        print("  nodes: " + " ".join(f"{n.name}={n.address}" for n in c.nodes))
        if c.relay_nodes:
            print(f"  relays (NIC {units.format_rate(c.relay_nodes[0].nic_bps)}): "
                  + " ".join(f"{r.name}={r.inside},{r.outside}" for r in c.relay_nodes))
    counters = {} if problems else emulator.counters()
    for l in t.links:
        print(f"link {l.name}: {units.format_rate(l.rate_bps)}, {units.format_duration_us(l.delay_us)} "
              f"one-way, queue {units.format_size(l.queue_bytes)}, loss {l.loss:g}")
        for d in emulator.DIRECTIONS:
            if (l.name, d) not in counters:
                continue
            c = counters[(l.name, d)]
            print(f"  {d}: {c['tx_packets']} packets, {c['tx_bytes']} bytes, drops "
                  f"{c['drop_queue']} queue / {c['drop_loss']} loss / {c['drop_down']} down")
    return 1 if problems else 0


def describe(t: Topology) -> str:
    clusters = ", ".join(f"{c.name} ({len(c.nodes)} nodes{', private' if c.private else ''}"
                         f"{f', {c.relays} relays' if c.relays else ''})" for c in t.clusters)
    links = ", ".join(f"{l.name} {units.format_rate(l.rate_bps)}/{units.format_duration_us(l.delay_us)}"
                      for l in t.links)
    return f"clusters {clusters}; WAN {links}"


def cmd_topology(args) -> int:
    t = topo.load(args.file)
    if args.json:
        print(json.dumps({
            "clusters": [{"name": c.name, "private": c.private, "network": c.network,
                          "nic_bps": c.nic_bps, "port_buffer": c.port_buffer,
                          "nodes": {n.name: n.address for n in c.nodes},
                          "relays": {r.name: {"inside": r.inside, "outside": r.outside, "nic_bps": r.nic_bps}
                                     for r in c.relay_nodes}} for c in t.clusters],
            "links": [{"name": l.name, "rate_bps": l.rate_bps, "delay_us": l.delay_us,
                       "queue_bytes": l.queue_bytes, "loss": l.loss} for l in t.links]}, indent=1))
    else:
        print(f"{t.source}: valid; {describe(t)}")
    return 0


# ---- run --------------------------------------------------------------------------
def cmd_run(args) -> int:
    try:
        ranks = int(args.ranks)
    except ValueError:
        raise CliError(f"-n: expected a number of ranks, got {args.ranks!r}") from None
    if ranks < 1:
        raise CliError(f"-n: need at least 1 rank, got {ranks}")
    if args.mpi not in launch.Launcher.registry:
        raise CliError(f"--mpi: unknown MPI {args.mpi!r} (known: {', '.join(launch.Launcher.registry)})")
    env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise CliError(f"--env: expected NAME=VALUE, got {item!r}")
        env[name] = value
    t = topology_for(args)
    program = launch.resolve_program(args.program)
    mpi = launch.launcher(args.mpi)
    other = launch.built_with(program)
    if other is not None and other != mpi.name:
        raise CliError(f"{args.program} is built with {other} but --mpi is {mpi.name}: "
                       f"build it with {mpi.mpicc} or run it with --mpi {other}")
    job = launch.Job(t, [program, *args.args], launch.placement(t, ranks, args.map), env,
                     wanmpi=args.wanmpi, use_relays=args.relays)
    if not (args.tcp_stats or args.tcp_stats_json):
        return launch.run_job(mpi, job, timeout=args.timeout)
    with tcpstats.measure(t, job.ranks) as measured:
        status = launch.run_job(mpi, job, timeout=args.timeout)
    print(f"wanmpi: {tcpstats.report(measured.delta)}", file=sys.stderr)
    if args.tcp_stats_json:
        tcpstats.write_json(args.tcp_stats_json, measured.delta)
    return status


# ---- link --------------------------------------------------------------------------
def running_links() -> Topology:
    state = net.State.load()
    if state is None:
        raise CliError("the testbed is not up: run `wanmpi testbed up` first")
    return topo.loads(state.topology_text, state.topology_source)


def cmd_link_show(args) -> int:
    running_links()
    reply = emulator.request({"cmd": "show"})
    if args.json:
        print(json.dumps(reply, indent=1))
        return 0
    for link in reply["links"]:
        print(f"link {link['name']}")
        for d in emulator.DIRECTIONS:
            st, c = link[d], link[d]["counters"]
            print(f"  {d}: {'up' if st['up'] else 'DOWN'}, {units.format_rate(st['rate_bps'])}, "
                  f"{units.format_duration_us(st['delay_us'])} one-way, queue "
                  f"{units.format_size(st['queue_bytes'])}, loss {st['loss']:g}")
            print(f"    {c['tx_packets']} packets / {c['tx_bytes']} bytes delivered, queue now "
                  f"{c['queue_bytes']} B, drops: {c['drop_queue']} queue, {c['drop_loss']} loss, "
                  f"{c['drop_down']} down; released late: {c['late_200us']} > 0.2 ms, "
                  f"{c['late_1ms']} > 1 ms")
    if "spin_s" in reply:
        print(f"emulator: up {reply['uptime_s']:.1f} s, {reply['spin_s'] * 1e3:.1f} ms of it spinning "
              f"before releases")
    return 0


def cmd_link_set(args) -> int:
    t = running_links()
    if args.link not in {l.name for l in t.links}:
        raise CliError(f"no link {args.link!r} (links: {', '.join(l.name for l in t.links)})")
    change: dict = {}
    for option, field, parse in (("delay", "delay_us", units.parse_duration_us),
                                 ("rate", "rate_bps", units.parse_rate),
                                 ("queue", "queue_bytes", units.parse_size),
                                 ("loss", "loss", units.parse_loss)):
        value = getattr(args, option)
        if value is not None:
            try:
                change[field] = parse(value)
            except units.UnitError as e:
                raise CliError(f"--{option}: {e}") from None
    if args.up is not None:
        change["up"] = args.up
    if not change:
        raise CliError("nothing to change: give --delay, --rate, --queue, --loss, --up or --down")
    emulator.request({"cmd": "set", "link": args.link, "dir": args.dir, **change})
    print(f"link {args.link} {args.dir}: " + ", ".join(f"{k}={v}" for k, v in change.items()))
    return 0


def cmd_link_monitor(args) -> int:
    running_links()
    if args.stop == bool(args.file):
        raise CliError("give FILE.csv to start recording, or --stop to stop it")
    path = None if args.stop else os.path.abspath(args.file)
    emulator.request({"cmd": "monitor", "file": path})
    print(f"monitor {'stopped' if args.stop else 'recording to ' + path}")
    return 0


def cmd_plot_traffic(args) -> int:
    out = plot.traffic(args.csv, args.output, args.bin_ms)
    print(f"wrote {out}")
    return 0


def cmd_doctor(args) -> int:
    args.topology = args.topology_file
    return doctor.run(topology_for(args), args.node, args.json)


def cmd_demo(args) -> int:
    from . import demo
    return demo.run(args.topology)


def cmd_bench_net(args) -> int:
    from .bench import links
    return links.run(topology_for(args), seconds=args.seconds, json_path=args.json)


def cmd_bench_emulator(args) -> int:
    from .bench import wanem
    return wanem.run(topology_for(args), quick=args.quick, seconds=args.seconds, json_path=args.json,
                              parts=args.parts, link_name=args.link)


def cmd_bench_coll(args) -> int:
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    unknown = [o for o in ops if o not in coll.OPS]
    if unknown or not ops:
        raise CliError(f"--ops: unknown {', '.join(unknown) or '(none given)'} "
                       f"(known: {', '.join(coll.OPS)})")
    if args.iters < 1:
        raise CliError(f"--iters must be at least 1, got {args.iters}")
    if args.ranks is not None and args.ranks < 2:
        raise CliError(f"-n: need at least 2 ranks, got {args.ranks}")
    sizes, delays, iters = args.sizes, args.delays, args.iters
    if args.quick:
        sizes, delays, iters = coll.QUICK_SIZES, "10", 2
    coll.parse_sizes(sizes)
    return coll.run(topology_for(args), coll.parse_variants(args.variants),
                          coll.parse_delays(delays), ops, sizes, iters, args.ranks, args.map,
                          args.json, args.plots, args.timeout)


def cmd_bench_suite(args) -> int:
    from .bench import kernels, suite
    if args.reps < 1:
        raise CliError(f"--reps must be at least 1, got {args.reps}")
    if args.timeout <= 0:
        raise CliError(f"--timeout must be positive, got {args.timeout:g}")
    klass, delays, reps = args.klass, args.delays, args.reps
    if args.quick:
        klass, delays, reps = suite.QUICK["class"], suite.QUICK["delays"], suite.QUICK["reps"]
    return suite.run(topology_for(args),
                           suite.parse_list(args.kernels, list(kernels.KERNELS), "kernels"),
                           suite.parse_list(args.variants, list(suite.VARIANTS), "variants"),
                           suite.parse_list(args.mpis, list(suite.MPIS), "mpis"),
                           coll.parse_delays(delays), reps, klass, args.out, args.json, args.timeout)


def cmd_bench_report(args) -> int:
    from .bench import report
    return report.run(args.files, args.out, args.json)


def cmd_bench_relay(args) -> int:
    from .bench import relay
    if args.reps < 1:
        raise CliError(f"--reps must be at least 1, got {args.reps}")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in relay.PARTS]
    if unknown or not parts:
        raise CliError(f"--parts: unknown part {unknown[0] if unknown else '(none)'!r} "
                       f"(choose from {', '.join(relay.PARTS)})")
    mpis = [m.strip() for m in args.mpis.split(",") if m.strip()]
    bad = [m for m in mpis if m not in launch.Launcher.registry]
    if bad or not mpis:
        raise CliError(f"--mpis: unknown MPI {bad[0] if bad else '(none)'!r} "
                       f"(known: {', '.join(launch.Launcher.registry)})")
    relay_nic = None
    if args.relay_nic:
        try:
            relay_nic = units.parse_rate(args.relay_nic)
        except units.UnitError as e:
            raise CliError(f"--relay-nic: {e}") from None
    try:
        flow_bytes = units.parse_size(args.flow_bytes)
    except units.UnitError as e:
        raise CliError(f"--flow-bytes: {e}") from None
    if not 1 <= flow_bytes <= 1 << 40:
        raise CliError(f"--flow-bytes must be between 1 byte and 1 TiB, got {args.flow_bytes}")
    return relay.run(topology_for(args), parts, mpis, coll.parse_delays(args.delays), args.reps,
                           args.klass, relay_nic, args.json, args.timeout, flow_bytes)


def cmd_bench_pacing(args) -> int:
    from .bench import pacing
    if args.reps < 1:
        raise CliError(f"--reps must be at least 1, got {args.reps}")
    variants, delays, ccs, reps = args.variants, args.delays, args.cc, args.reps
    if args.quick:
        variants, delays, ccs, reps = "ompi,paper,wanmpi", "10", "cubic", 1
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    return pacing.run(topology_for(args),
                            pacing.parse_list(variants, list(pacing.VARIANTS), "variants"),
                            pacing.parse_list(args.kernels, list(pacing.KERNELS), "kernels"),
                            coll.parse_delays(delays),
                            pacing.parse_list(ccs, available, "cc"), reps, args.json, args.timeout,
                            args.plots)


def cmd_bench_rbudp(args) -> int:
    from .bench import rbudp
    def parsed(option: str, parse, value):
        try:
            return parse(value)
        except units.UnitError as e:
            raise CliError(f"--{option}: {e}") from None
    size = parsed("size", units.parse_size, args.size)
    delay_ms = parsed("delay", units.parse_duration_us, args.delay) / 1000
    rate = parsed("rate", units.parse_rate, args.rate) if args.rate else None
    if size < 1:
        raise CliError("--size must be at least 1 byte")
    if args.max_seconds <= 0:
        raise CliError("--max-seconds must be above 0")
    t = topology_for(args)
    payload = args.payload if args.payload is not None else t.mtu - 28
    if not 64 <= payload <= 65507:
        raise CliError(f"--payload {payload}: must be 64..65507 bytes")
    return rbudp.run(t, size, rbudp.parse_losses(args.losses), delay_ms, rate, payload,
                           rbudp.parse_variants(args.variants), args.max_seconds, args.json)


if __name__ == "__main__":
    sys.exit(main())
