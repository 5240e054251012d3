"""`wanmpi bench SUITE`: one register function per benchmark, declaring its
arguments and the types that parse them, beside the handler that runs it
(bench/<suite>.py; `bench net` is bench/links.py, `bench emulator`
bench/wanem.py)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from .. import units
from ..bench import coll, flap, kernels, links, overlap, pacing, rbudp, relay, report, suite, vpn, wanem
from ..job import launch
from .options import (CliError, checked_rules, count, delays_ms, installed, installed_mpis, names, positive, quantity,
                      ranks, rules_option, size_between, topology_for, topology_option)

AVAILABLE_CC = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def register(commands) -> None:
    bench = commands.add_parser("bench", help="measure the testbed and wanmpi")
    suites = bench.add_subparsers(metavar="SUITE", required=True)
    for add in (register_net, register_emulator, register_coll, register_pacing, register_relay, register_rbudp,
                register_vpn, register_flap, register_overlap, register_suite, register_report):
        add(suites)


# ---- bench net -------------------------------------------------------------------
def register_net(suites) -> None:
    p = suites.add_parser("net", help="measure every WAN link against its configured values")
    topology_option(p)
    p.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput test")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.set_defaults(handler=cmd_bench_net)


def cmd_bench_net(args) -> int:
    return links.run(topology_for(args), seconds=args.seconds, json_path=args.json)


# ---- bench emulator --------------------------------------------------------------
def emulator_parts(text: str) -> tuple[str, ...]:
    """--parts 'rtt,tcp': parts of `bench emulator` (empty: every one)."""
    if not text:
        return wanem.PARTS
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in parts if p not in wanem.PARTS]
    if unknown or not parts:
        raise CliError(f"--parts: unknown part {', '.join(map(repr, unknown)) or repr(text)} "
                       f"(parts: {', '.join(wanem.PARTS)})")
    return parts


def register_emulator(suites) -> None:
    p = suites.add_parser("emulator", help="measure the WAN emulator itself: RTT, TCP, loss, capacity, CPU")
    topology_option(p)
    p.add_argument("--quick", action="store_true", help="few and short measurements (for tests)")
    p.add_argument("--seconds", type=float, help="duration of each TCP test (default: 5, quick: 1)")
    p.add_argument("--parts", type=emulator_parts, metavar="LIST",
                   help="comma-separated subset of: rtt,tcp,loss,load,capacity")
    p.add_argument("--link", metavar="LINK", help="the WAN link to measure (default: the first)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.set_defaults(handler=cmd_bench_emulator)


def cmd_bench_emulator(args) -> int:
    return wanem.run(topology_for(args), quick=args.quick, seconds=args.seconds, json_path=args.json,
                     parts=args.parts, link_name=args.link)


# ---- bench coll ------------------------------------------------------------------
def coll_variants(text: str) -> list[coll.Variant]:
    chosen = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [n for n in chosen if n not in coll.VARIANTS]
    if unknown or not chosen:
        raise CliError(f"--variants: unknown {', '.join(unknown) or '(none given)'} "
                       f"(known: {', '.join(coll.VARIANTS)})")
    installed(coll.VARIANTS[n].mpi for n in chosen)
    return [coll.VARIANTS[n] for n in chosen]


def coll_ops(text: str) -> list[str]:
    ops = [o.strip() for o in text.split(",") if o.strip()]
    unknown = [o for o in ops if o not in coll.OPS]
    if unknown or not ops:
        raise CliError(f"--ops: unknown {', '.join(unknown) or '(none given)'} (known: {', '.join(coll.OPS)})")
    return ops


def coll_sizes(text: str) -> str:
    """--sizes '1K,64K,1M', checked and passed on as written (collbench reads K, M, G as powers of 1024)."""
    for item in text.split(","):
        if not re.fullmatch(r"\s*(\d+)([KMG]?)\s*", item):
            raise CliError(f"--sizes: {item.strip()!r} is not a size such as 4096, 64K or 8M")
    return text


def register_coll(suites) -> None:
    p = suites.add_parser("coll", help="WAN-aware collectives vs the MPIs' own, across sizes and delays")
    topology_option(p)
    p.add_argument("--variants", type=coll_variants, default=",".join(coll.DEFAULT_VARIANTS),
                   help=f"comma-separated subset of: {', '.join(coll.VARIANTS)} "
                        f"(default: {','.join(coll.DEFAULT_VARIANTS)}; the others need `make openmpi5`, "
                        "`make intelmpi`)")
    p.add_argument("--ops", type=coll_ops, default="bcast,allreduce",
                   help="operations (default: bcast,allreduce)")
    p.add_argument("--sizes", type=coll_sizes, default=coll.DEFAULT_SIZES,
                   help=f"message sizes, K/M suffixes (default: {coll.DEFAULT_SIZES})")
    p.add_argument("--delays", type=delays_ms, default="0,2,5,10",
                   help="one-way WAN delays in ms (default: 0,2,5,10)")
    p.add_argument("--iters", type=count("--iters", 1), default=5, help="timed iterations per size (default: 5)")
    p.add_argument("-n", "--np", dest="ranks", type=ranks(2), help="ranks (default: one per node)")
    p.add_argument("--map", metavar="MAP", help="rank placement, as for `wanmpi run`")
    p.add_argument("--quick", action="store_true",
                   help=f"sizes {coll.QUICK_SIZES}, delay 10 ms, 2 iterations (for tests)")
    p.add_argument("--timeout", type=float, default=1800, help="per job, seconds (default: 1800)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--plots", metavar="DIR", help="also draw PNG plots into DIR")
    p.add_argument("--start", choices=("barrier", "clock"), default="barrier",
                   help="each iteration's calls start as the ranks leave the MPI's barrier (default; across "
                        "the WAN they leave up to a delay apart, as in the OSU benchmarks), or at one instant "
                        "of the clock the testbed's nodes share (collbench --start clock; a job whose ranks do not "
                        "share one, such as on real hosts, stops with an error naming the rank)")
    rules_option(p)
    p.set_defaults(handler=cmd_bench_coll)


def cmd_bench_coll(args) -> int:
    sizes, delays, iters = args.sizes, args.delays, args.iters
    if args.quick:
        sizes, delays, iters = coll.QUICK_SIZES, [10.0], 2
    t = topology_for(args)
    return coll.run(t, args.variants, delays, args.ops, sizes, iters, args.ranks, args.map,
                    args.json, args.plots, args.timeout, checked_rules(args.rules, t), args.start)


# ---- bench flap -------------------------------------------------------------------
def register_flap(suites) -> None:
    p = suites.add_parser("flap", help="cut the WAN during a running job: how long it stalls after the link "
                          "returns, with and without wanmpi, direct and relayed")
    topology_option(p)
    p.add_argument("--cuts", type=seconds_list, default="5,30", help="outage lengths in seconds (default: 5,30)")
    p.add_argument("--variants", type=names("--variants", list(flap.VARIANTS)), default="wanmpi,plain,relayed",
                   help="comma-separated subset of: wanmpi, plain, relayed (through one relay per cluster), "
                        "relayed-rbudp (the same with RBUDP blasts) (default: wanmpi,plain,relayed)")
    p.add_argument("--mpis", type=names("--mpis", list(launch.Launcher.registry)), default="openmpi,mpich",
                   help="comma-separated subset of: " + ", ".join(launch.Launcher.registry) + " (default: both)")
    p.add_argument("--reps", type=count("--reps", 1), default=1, help="jobs per cell (default: 1)")
    p.add_argument("--timeout", type=float, help="per job, seconds (default: the loop's length + 120)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--bytes", type=size_between("--bytes", 8, 256 << 20, "8 bytes and 256 MiB"), default="1MiB",
                   help="allreduce size of every step (default: 1MiB; 8 B to 256 MiB)")
    p.add_argument("--monitor", metavar="DIR", help="record the WAN's 1 ms traffic of every job there (CSV) and "
                   "draw it with the cut shaded (PNG)")
    p.set_defaults(handler=cmd_bench_flap)


def seconds_list(text: str) -> list[float]:
    """--cuts '5,30': outage lengths, 1 to 600 s."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise CliError(f"--cuts: expected seconds separated by commas, got {text!r}") from None
    if not values or any(not 1 <= v <= 600 for v in values):
        raise CliError(f"--cuts: every outage must last 1 to 600 s, got {text!r}")
    return values


def cmd_bench_flap(args) -> int:
    timeout = args.timeout or flap.LEAD_S + max(args.cuts) + flap.AFTER_S + 120
    return flap.run(topology_for(args), args.cuts, args.variants, args.mpis, args.reps, args.json, timeout,
                    monitor=args.monitor, step_bytes=args.bytes)


# ---- bench overlap ----------------------------------------------------------------
def collective(text: str) -> str:
    """--coll: one nonblocking collective of bench/overlap.c."""
    if text not in overlap.COLLECTIVES:
        raise CliError(f"--coll: unknown collective {text!r} (choose from {', '.join(overlap.COLLECTIVES)})")
    return text


def milliseconds(option: str, high: float) -> Callable[[str], float]:
    """A duration in ms from 0 to `high` ('10', '0.5')."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise CliError(f"{option}: expected milliseconds, e.g. 10, got {text!r}") from None
        if not 0 <= value <= high:
            raise CliError(f"{option}: {value:g} ms is outside [0, {high:g}]")
        return value
    return parse


def register_overlap(suites) -> None:
    p = suites.add_parser("overlap", help="how much of a nonblocking collective's WAN time a computation hides: "
                          "the MPI's own, and libwanmpi's with MPI_Test or a progress thread")
    topology_option(p)
    p.add_argument("--variants", type=names("--variants", overlap.VARIANTS, unique=True),
                   default=",".join(overlap.VARIANTS),
                   help="comma-separated subset of: mpi (the MPI alone), wanmpi-test (libwanmpi, MPI_Test between "
                        "compute slices), wanmpi-thread (libwanmpi, WANMPI_PROGRESS=thread, no MPI_Test) "
                        "(default: all)")
    p.add_argument("--mpis", "--mpi", dest="mpis", type=names("--mpis", list(launch.Launcher.registry), unique=True),
                   default=",".join(launch.defaults()),
                   help="comma-separated subset of: " + ", ".join(launch.Launcher.registry) + " (default: both)")
    p.add_argument("--delay", type=milliseconds("--delay", 1000), default="10",
                   help="one-way WAN delay in ms (default: 10)")
    p.add_argument("--coll", type=collective, default="iallreduce",
                   help=f"the collective, one of: {', '.join(overlap.COLLECTIVES)} (default: iallreduce)")
    p.add_argument("--bytes", type=size_between("--bytes", 8, 256 << 20, "8 bytes and 256 MiB"), default="8MiB",
                   help="message size (ialltoall, iallgather: a rank's whole receive buffer) (default: 8MiB)")
    p.add_argument("--reps", type=count("--reps", 1), default=5,
                   help="repetitions inside each job; median and minimum shown (default: 5)")
    p.add_argument("--test-every", type=milliseconds("--test-every", 1000), default="1",
                   help="ms of compute between MPI_Test calls of the mpi and wanmpi-test variants; 0: never "
                        "(default: 1)")
    p.add_argument("--ranks", type=count("--ranks", 2), default=None,
                   help="ranks, round-robin over the clusters (2: one per cluster) (default: one per node)")
    p.add_argument("--timeout", type=positive("--timeout"), default=600, help="per job, seconds (default: 600)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.set_defaults(handler=cmd_bench_overlap)


def cmd_bench_overlap(args) -> int:
    return overlap.run(topology_for(args), args.variants, args.mpis, args.delay, args.coll, args.bytes, args.reps,
                       args.test_every, args.json, args.timeout, ranks=args.ranks)


# ---- bench pacing ----------------------------------------------------------------
def congestion_controls(text: str) -> list[str]:
    """--cc 'cubic,bbr': among those this kernel has."""
    return names("--cc", Path(AVAILABLE_CC).read_text().split())(text)


def register_pacing(suites) -> None:
    p = suites.add_parser("pacing", help="IS, FT and LU patterns with and without pacing, with their RTOs")
    topology_option(p)
    p.add_argument("--variants", type=names("--variants", pacing.VARIANTS), default=",".join(pacing.VARIANTS),
                   help=f"comma-separated subset of: {', '.join(pacing.VARIANTS)} (default: all)")
    p.add_argument("--kernels", type=names("--kernels", pacing.KERNELS), default=",".join(pacing.KERNELS),
                   help=f"comma-separated subset of: {', '.join(pacing.KERNELS)} (default: all)")
    p.add_argument("--delays", type=delays_ms, default="0,2,5,10",
                   help="one-way WAN delays in ms (default: 0,2,5,10)")
    p.add_argument("--cc", type=congestion_controls, default=",".join(pacing.CONGESTION_CONTROLS),
                   help="congestion controls set on every node (default: cubic,bbr)")
    p.add_argument("--reps", type=count("--reps", 1), default=3,
                   help="jobs per cell; the median is shown (default: 3)")
    p.add_argument("--quick", action="store_true",
                   help="delay 10 ms, cubic, one job per cell, variants ompi,paper,wanmpi (for tests)")
    p.add_argument("--timeout", type=float, default=600, help="per job, seconds (default: 600)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--plots", metavar="DIR", help="also draw PNG plots into DIR")
    p.set_defaults(handler=cmd_bench_pacing)


def cmd_bench_pacing(args) -> int:
    variants, delays, ccs, reps = args.variants, args.delays, args.cc, args.reps
    if args.quick:
        variants, delays, ccs, reps = ["ompi", "paper", "wanmpi"], [10.0], congestion_controls("cubic"), 1
    return pacing.run(topology_for(args), variants, args.kernels, delays, ccs, reps, args.json, args.timeout,
                      args.plots)


# ---- bench relay -----------------------------------------------------------------
def relay_parts(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in parts if p not in relay.PARTS]
    if unknown or not parts:
        raise CliError(f"--parts: unknown part {unknown[0] if unknown else '(none)'!r} "
                       f"(choose from {', '.join(relay.PARTS)})")
    return parts


def relay_mpis(text: str) -> list[str]:
    mpis = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in mpis if m not in launch.Launcher.registry]
    if bad or not mpis:
        raise CliError(f"--mpis: unknown MPI {bad[0] if bad else '(none)'!r} "
                       f"(known: {', '.join(launch.Launcher.registry)})")
    return mpis


def register_relay(suites) -> None:
    p = suites.add_parser("relay", help="relays vs direct connections: latency per relay, bandwidth, trunk "
                          "scaling, NAS-like kernels with and without cross traffic")
    topology_option(p)
    p.add_argument("--parts", type=relay_parts, default="latency,path,trunks,kernels",
                   help="comma-separated subset of: latency, path, trunks, kernels (default: all)")
    p.add_argument("--mpis", type=relay_mpis, default=",".join(launch.defaults()),
                   help="comma-separated MPIs (default: openmpi,mpich)")
    p.add_argument("--delays", type=delays_ms, default="0,10",
                   help="one-way WAN delays in ms (default: 0,10; trunks: the largest)")
    p.add_argument("--reps", type=count("--reps", 1), default=1,
                   help="repetitions of every case; medians shown (default: 1)")
    p.add_argument("--class", dest="klass", default="A", choices=kernels.CLASSES,
                   help="kernel class (default: A)")
    p.add_argument("--relay-nic", type=quantity("--relay-nic", units.parse_rate),
                   help="relay NIC rate for the trunk part (default: a quarter of the WAN rate)")
    p.add_argument("--flow-bytes", type=size_between("--flow-bytes", 1, 1 << 40, "1 byte and 1 TiB"), default="64MB",
                   help="bytes each node streams in the trunk part (default: 64MB)")
    p.add_argument("--timeout", type=float, default=600, help="per job, seconds (default: 600)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.set_defaults(handler=cmd_bench_relay)


def cmd_bench_relay(args) -> int:
    return relay.run(topology_for(args), args.parts, args.mpis, args.delays, args.reps, args.klass, args.relay_nic,
                     args.json, args.timeout, args.flow_bytes)


# ---- bench rbudp -----------------------------------------------------------------
def transfer_size(text: str) -> int:
    size = quantity("--size", units.parse_size)(text)
    if size < 1:
        raise CliError("--size must be at least 1 byte")
    return size


def loss_rates(text: str) -> list[float]:
    losses = [quantity("--losses", units.parse_loss)(x.strip()) for x in text.split(",") if x.strip()]
    if not losses:
        raise CliError("--losses: give at least one loss rate")
    return losses


def register_rbudp(suites) -> None:
    p = suites.add_parser("rbudp", help="goodput of one bulk transfer: RBUDP through a relay pair vs TCP cubic "
                          "and bbr, at several loss rates")
    topology_option(p)
    p.add_argument("--size", type=transfer_size, default="1GB", help="bytes to transfer (default: 1GB)")
    p.add_argument("--losses", type=loss_rates, default=rbudp.DEFAULT_LOSSES,
                   help=f"random loss rates set on the link, e.g. 0,0.1%%,1%% (default: {rbudp.DEFAULT_LOSSES})")
    p.add_argument("--delay", type=quantity("--delay", units.parse_duration_us), default="10ms",
                   help="one-way delay set on the link (default: 10ms)")
    p.add_argument("--rate", type=quantity("--rate", units.parse_rate),
                   help="RBUDP blast rate, e.g. 190Mbit (default: 97%% of the path rate)")
    p.add_argument("--payload", type=int, default=None,
                   help="RBUDP UDP payload per datagram in bytes (default: MTU - 28)")
    p.add_argument("--variants", type=names("--variants", rbudp.VARIANTS), default=",".join(rbudp.VARIANTS),
                   help=f"comma-separated subset of: {', '.join(rbudp.VARIANTS)} (default: all)")
    p.add_argument("--max-seconds", type=positive("--max-seconds", "{option} must be above 0"), default=120,
                   help="cut a transfer after this long and report it as partial (default: 120)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.set_defaults(handler=cmd_bench_rbudp)


def cmd_bench_rbudp(args) -> int:
    t = topology_for(args)
    payload = args.payload if args.payload is not None else t.mtu - 28
    if not 64 <= payload <= 65507:
        raise CliError(f"--payload {payload}: must be 64..65507 bytes")
    return rbudp.run(t, args.size, args.losses, args.delay / 1000, args.rate, payload, args.variants,
                     args.max_seconds, args.json)


# ---- bench vpn -------------------------------------------------------------------
def register_vpn(suites) -> None:
    p = suites.add_parser("vpn", help="relays + wanmpi against a WireGuard tunnel carrying the MPI alone, "
                          "alternating, launched over ssh (real-host mode)")
    topology_option(p)
    p.add_argument("--parts", type=names("--parts", vpn.PARTS, unique=True), default=",".join(vpn.PARTS),
                   help=f"comma-separated subset of: {', '.join(vpn.PARTS)} (default: all)")
    p.add_argument("--kernels", type=names("--kernels", kernels.KERNELS, unique=True),
                   default=",".join(kernels.DEFAULT_KERNELS),
                   help=f"kernels of the kernels part (default: {','.join(kernels.DEFAULT_KERNELS)})")
    p.add_argument("--mpis", type=relay_mpis, default=",".join(launch.defaults()),
                   help="comma-separated MPIs (default: openmpi,mpich)")
    p.add_argument("--delay", type=positive("--delay", "{option} must be above 0 ms"),
                   help="one-way WAN delay in ms (default: the topology's)")
    p.add_argument("--reps", type=count("--reps", 1), default=3,
                   help="rounds; each measures both ways, back to back (default: 3)")
    p.add_argument("--class", dest="klass", default="S", choices=kernels.CLASSES,
                   help="kernel class (default: S)")
    p.add_argument("--timeout", type=positive("--timeout"), default=600, help="per job, seconds (default: 600)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.set_defaults(handler=cmd_bench_vpn)


def cmd_bench_vpn(args) -> int:
    return vpn.run(topology_for(args), args.parts, args.mpis, args.delay, args.reps, args.klass, args.kernels,
                   args.json, args.timeout)


# ---- bench suite -----------------------------------------------------------------
def register_suite(suites) -> None:
    p = suites.add_parser("suite", help="the NAS-like kernels across the clusters: performance relative to "
                          "one cluster vs delay, and the gain of each technique")
    topology_option(p)
    p.add_argument("--kernels", type=names("--kernels", kernels.KERNELS, unique=True),
                   default=",".join(kernels.DEFAULT_KERNELS),
                   help=f"comma-separated subset of: {', '.join(kernels.KERNELS)} "
                        f"(default: {','.join(kernels.DEFAULT_KERNELS)})")
    p.add_argument("--variants", type=names("--variants", suite.VARIANTS, unique=True),
                   default=",".join(suite.VARIANTS),
                   help=f"comma-separated subset of: {', '.join(suite.VARIANTS)} (default: every one)")
    p.add_argument("--mpis", type=installed_mpis, default=",".join(suite.MPIS),
                   help=f"comma-separated subset of: {', '.join(launch.Launcher.registry)} "
                        f"(default: {','.join(suite.MPIS)})")
    p.add_argument("--delays", type=delays_ms, default=suite.DEFAULT_DELAYS,
                   help=f"one-way WAN delays in ms (default: {suite.DEFAULT_DELAYS})")
    p.add_argument("--reps", type=count("--reps", 1), default=3, help="jobs per cell; best and median (default: 3)")
    p.add_argument("--class", dest="klass", default="A", choices=kernels.CLASSES,
                   help="problem class, i.e. message sizes (default: A)")
    p.add_argument("--quick", action="store_true",
                   help="class S, delays 0 and 10 ms, one job per cell (under 15 minutes)")
    p.add_argument("--timeout", type=positive("--timeout"), default=600, help="per job, seconds (default: 600)")
    p.add_argument("--out", metavar="DIR", help="write suite.json, suite.md and the PNG plots into DIR")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    rules_option(p)
    p.set_defaults(handler=cmd_bench_suite)


def cmd_bench_suite(args) -> int:
    klass, delays, reps = args.klass, args.delays, args.reps
    if args.quick:
        klass, delays, reps = suite.QUICK["class"], delays_ms(suite.QUICK["delays"]), suite.QUICK["reps"]
    t = topology_for(args)
    return suite.run(t, args.kernels, args.variants, args.mpis, delays, reps, klass, args.out,
                     args.json, args.timeout, rules=checked_rules(args.rules, t))


# ---- bench report ----------------------------------------------------------------
def register_report(suites) -> None:
    p = suites.add_parser("report", help="the markdown table and plots of a saved result file")
    p.add_argument("files", nargs="+", metavar="RESULTS.json",
                   help="a result file; several `bench suite` files are merged (parts of one run)")
    p.add_argument("--out", metavar="DIR", help="where to write (default: beside the (merged) file)")
    p.add_argument("--json", metavar="FILE", help="write the merged result document to FILE")
    p.set_defaults(handler=cmd_bench_report)


def cmd_bench_report(args) -> int:
    return report.run(args.files, args.out, args.json)
