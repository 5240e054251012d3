"""`wanmpi run`: one MPI program across the clusters (job/launch.py), with
the TCP counters of its nodes if asked (job/tcpstats.py)."""
from __future__ import annotations

import argparse
import sys

from ..job import launch, mpi4py, placement, programs, tcpstats
from .options import (CliError, checked_rules, env_setting, mpi_name, ranks, rules_option, slurm_option, topology_for,
                      topology_option)


def register(commands) -> None:
    p = commands.add_parser("run", help="run an MPI program across the clusters",
                            usage="wanmpi run [options] -n N PROGRAM [ARGS...]")
    topology_option(p)
    slurm_option(p)
    p.add_argument("--mpi", default="openmpi", type=mpi_name, help="MPI implementation: "
                   f"{' or '.join(launch.Launcher.registry)} (default: openmpi)")
    p.add_argument("-n", "--np", dest="ranks", type=ranks(1), required=True, metavar="N", help="number of ranks")
    p.add_argument("--map", metavar="MAP", help="rank placement: 'block' (default: contiguous ranks "
                   "per cluster), 'interleave' (round-robin over clusters) or a node per rank: a0,b0,...")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="kill the job after this many seconds (exit status 124)")
    p.add_argument("--env", "-x", type=env_setting, action="append", default=[], metavar="NAME=VALUE",
                   help="environment variable for every rank (repeatable)")
    p.add_argument("--no-wanmpi", dest="wanmpi", action="store_false",
                   help="run on the MPI library alone, without preloading libwanmpi (for comparison)")
    rules_option(p)
    check = p.add_mutually_exclusive_group()
    check.add_argument("--check-arguments", dest="check_arguments", action="store_const", const="1",
                       help="every blocking collective first checks that its ranks passed matching counts, "
                            "datatypes, roots and operations (WANMPI_CHECK=1): an error on every rank instead of a "
                            "hang; one small allreduce per call")
    check.add_argument("--check-all-arguments", dest="check_arguments", action="store_const", const="all",
                       help="the same for the nonblocking collectives and persistent inits too, whose start then "
                            "waits for every rank to start it (WANMPI_CHECK=all)")
    p.add_argument("--no-relays", dest="relays", action="store_false",
                   help="connect the clusters directly even if the topology has relays (public "
                        "clusters only; for comparison)")
    p.add_argument("--no-host-check", dest="check_hosts", action="store_false",
                   help="on real hosts, do not first ask every host over ssh whether it answers and has "
                        "the program and the same wanmpi")
    p.add_argument("--tcp-stats", action="store_true",
                   help="after the job, print its TCP retransmission timeouts, retransmitted segments and "
                        "tail-loss probes, summed over its nodes, to stderr")
    p.add_argument("--tcp-stats-json", metavar="FILE",
                   help="write those counters (sums and per node) as JSON to FILE (implies --tcp-stats)")
    p.add_argument("program", metavar="PROGRAM")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    p.set_defaults(handler=cmd_run)


def cmd_run(args) -> int:
    t = topology_for(args)
    program = programs.resolve_program(args.program)
    mpi = launch.launcher(args.mpi)
    needed = programs.libmpi_needed(program)
    abi = standard_abi(args.program, programs.standard_abi(needed), mpi)
    others = programs.narrowed(program, programs.mpis_of(needed))
    if others and mpi.name not in others:
        raise CliError(f"{args.program} is built with {' or '.join(others)} but --mpi is {mpi.name}: "
                       f"build it with {mpi.mpicc} or run it with --mpi {others[0]}")
    env = dict(args.env)
    check_mpi4py(program, mpi, env)
    if args.check_arguments:
        if not args.wanmpi:
            raise CliError("--check-arguments and --check-all-arguments are libwanmpi's: they cannot be used with "
                           "--no-wanmpi")
        env.setdefault("WANMPI_CHECK", args.check_arguments)
    job = launch.Job(t, [program, *args.args], placement.placement(t, args.ranks, args.map), env,
                     wanmpi=args.wanmpi, use_relays=args.relays,
                     check_hosts=args.check_hosts, rules=checked_rules(args.rules, t) if args.wanmpi else None,
                     abi=abi)
    if not (args.tcp_stats or args.tcp_stats_json):
        return launch.run_job(mpi, job, timeout=args.timeout)
    with tcpstats.measure(t, job.ranks) as measured:
        status = launch.run_job(mpi, job, timeout=args.timeout)
    print(f"wanmpi: {tcpstats.report(measured.delta)}", file=sys.stderr)
    if args.tcp_stats_json:
        tcpstats.write_json(args.tcp_stats_json, measured.delta)
    return status


def standard_abi(name: str, abi: str | None, mpi: launch.Launcher) -> bool:
    """Whether the program is built against MPI-5's standard ABI (`abi`:
    the library it needs, libmpi_abi.so.1); such a program runs under an
    MPI that implements the ABI only (CliError naming those that do)."""
    if abi is None:
        return False
    if mpi.standard_abi() is None:
        having = [n for n in launch.Launcher.registry if launch.launcher(n).standard_abi() is not None]
        hint = f"run it with --mpi {' or --mpi '.join(having)}" if having else "no MPI here has it"
        raise CliError(f"{name} is built against the MPI standard ABI ({abi}, by mpicc_abi), which --mpi "
                       f"{mpi.name} does not implement: {hint}")
    return True


def check_mpi4py(program: str, mpi: launch.Launcher, env: dict[str, str]) -> None:
    """A Python program's mpi4py must have a build for the launcher's MPI
    (CliError naming both if not)."""
    where = mpi4py.package(program, env) if mpi4py.is_python(program) else None
    built_for = mpi4py.sonames(where) if where else set()
    if built_for and mpi.library not in built_for:
        names = programs.mpis_of(built_for) or sorted(built_for)
        raise CliError(f"{program} imports mpi4py from {where}, built for {' or '.join(names)}, but --mpi is "
                       f"{mpi.name} ({mpi.library}): install an mpi4py for {mpi.name} (docs/mpi4py.md) or run "
                       f"with --mpi {names[0]}")
