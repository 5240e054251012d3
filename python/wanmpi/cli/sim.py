"""`wanmpi sim`: a collective or a kernel (FT, IS) on the topology simulated
with SimGrid SMPI (sim/run.py; docs/scale.md), in `wanmpi bench`'s result
format."""
from __future__ import annotations

import signal
from pathlib import Path

from .. import units
from ..bench.kernels import CLASSES
from ..sim import library, platform, run, sweep
from .options import count, names, positive, quantity, topology_for, topology_option


def register(commands) -> None:
    p = commands.add_parser("sim", help="simulate a collective on the topology with SimGrid SMPI, with or "
                            "without libwanmpi, at any scale (docs/scale.md)")
    topology_option(p)
    p.add_argument("--nodes-per-cluster", type=count("--nodes-per-cluster", 1), metavar="N",
                   help="nodes (ranks) in every cluster (default: the topology's)")
    p.add_argument("--nic-rate", type=quantity("--nic-rate", units.parse_rate), metavar="RATE",
                   help="every node's NIC rate, e.g. 10Gbit (default: the topology's)")
    p.add_argument("--wan-rate", type=quantity("--wan-rate", units.parse_rate), metavar="RATE",
                   help="every WAN link's rate (default: the topology's)")
    p.add_argument("--delay", type=quantity("--delay", units.parse_duration_us), metavar="DURATION",
                   help="every WAN link's one-way delay, e.g. 10ms (default: the topology's)")
    p.add_argument("--nic-latency", type=quantity("--nic-latency", units.parse_duration_us), metavar="DURATION",
                   help="one-way latency of every node's link to its switch, e.g. 5us (a hop inside a cluster: "
                        f"twice that; default: {platform.NIC_LATENCY_US}us)")
    p.add_argument("--relays", type=count("--relays", 0), metavar="N",
                   help="relays in every cluster, every connection between clusters through one of each "
                        "(trunking: relay k pairs with relay k; 0: none; default: the topology's)")
    p.add_argument("--relay-nic", type=quantity("--relay-nic", units.parse_rate), metavar="RATE",
                   help="every relay's NIC rate (default: the topology's relays' rate; relays the topology has "
                        "not: the nodes' NIC rate)")
    p.add_argument("--coll", nargs="+", type=names("--coll", run.OPS, unique=True), default=[["bcast"]],
                   metavar="OP", help=f"collectives, among {', '.join(run.OPS)} (default: bcast)")
    p.add_argument("--bytes", nargs="+", type=quantity("--bytes", units.parse_size), default=[4 << 20],
                   metavar="SIZE", help="message sizes, e.g. 64KiB 4MiB (default: 4MiB)")
    p.add_argument("--kernel", choices=run.KERNELS,
                   help="run this NAS-like kernel of bench/patterns.c instead of collectives, with the "
                        "arguments `wanmpi bench suite` gives it (docs/kernels.md); --coll and --bytes do not apply")
    p.add_argument("--class", dest="klass", choices=CLASSES, default="S",
                   help="the kernel's problem class: message size and iterations (default: S)")
    p.add_argument("--mpi-coll", choices=run.SELECTORS, default="mpich",
                   help="SMPI's collective algorithms under libwanmpi, or alone with --no-wanmpi "
                        "(smpi/coll-selector; default: mpich)")
    p.add_argument("--no-wanmpi", action="store_true", help="the MPI's algorithms alone, without libwanmpi")
    p.add_argument("--send-overhead", type=positive("--send-overhead"), metavar="S_PER_BYTE",
                   help="SMPI's per-byte send overhead on messages of 64 KiB or less (smpi/ois, smpi/os), "
                        "the calibration knob (default: 1.0625 x the NIC's time per byte)")
    p.add_argument("--start", choices=("clock", "barrier"), default="clock",
                   help="the calls start at one instant of the simulated clock (default), or as the ranks "
                        "leave the MPI's barrier, up to a WAN delay per round apart (as `wanmpi bench coll` "
                        "by default)")
    p.add_argument("--shared-from", type=quantity("--shared-from", units.parse_size), metavar="SIZE",
                   help="sizes from SIZE up in buffers every rank shares (SMPI_SHARED_MALLOC): hundreds of MiB "
                        "on many ranks without the memory, results not checked")
    p.add_argument("--iters", type=count("--iters", 1), default=1,
                   help="timed iterations (default: 1; the simulation is deterministic)")
    p.add_argument("--timeout", type=positive("--timeout"), default=3600, help="seconds (default: 3600)")
    p.add_argument("--simgrid", choices=library.CHOICES, default="auto",
                   help="the SimGrid library: Debian's (system), or the same release rebuilt by `make simgrid` "
                        "(patched: the same simulated times, several times faster from 128 ranks up); "
                        "default auto: the patched one once built")
    p.add_argument("--json", metavar="FILE", help="also write the result (the `wanmpi bench` format)")
    p.add_argument("--platform-only", metavar="DIR",
                   help="write DIR/platform.xml and DIR/hostfile and stop")
    p.add_argument("--sweep", metavar="SPEC",
                   help="simulate every point of a sweep spec (TOML: a base point and axes; bench/sweep/), "
                        "ours against SMPI's MPICH and Open MPI algorithms and the bound; the other options "
                        "but --json do not apply")
    p.add_argument("--jobs", type=count("--jobs", 1), default=1,
                   help="simulations at a time in a sweep (default: 1; each takes one core)")
    p.set_defaults(handler=cmd_sim)


def stop_simulations(signum, frame) -> None:
    """SIGTERM or SIGINT: end the simulations under way (their smpirun groups),
    then leave as the signal would."""
    run.kill_running()
    raise SystemExit(128 + signum)


def cmd_sim(args) -> int:
    before = {sig: signal.signal(sig, stop_simulations) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return simulate(args)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def simulate(args) -> int:
    simgrid = library.choose(args.simgrid)
    if args.sweep:
        return sweep.run_sweep(args.sweep, args.jobs, args.json, simgrid)
    overrides = platform.Overrides(args.nodes_per_cluster, args.nic_rate, args.wan_rate, args.delay, args.nic_latency,
                                   args.relays, args.relay_nic)
    t = topology_for(args)
    if args.platform_only:
        sim = platform.simulated(t, overrides)
        for path in platform.write(sim, Path(args.platform_only), overrides.nic_latency):
            print(path)
        return 0
    if args.kernel:
        return run.run_kernel(t, overrides, args.kernel, args.klass, args.mpi_coll, not args.no_wanmpi,
                              args.send_overhead, args.json, args.timeout, simgrid)
    ops = list(dict.fromkeys(op for group in args.coll for op in group))
    return run.run(t, overrides, ops, list(dict.fromkeys(args.bytes)), args.mpi_coll, not args.no_wanmpi,
                   args.send_overhead, args.iters, args.json, args.timeout, args.start, args.shared_from or 0,
                   simgrid)
