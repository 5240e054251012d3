"""`wanmpi`: the one command. `main` builds the parser from every subcommand's
module (each declares its own arguments beside its handler), runs the
handler, and turns the problems a user can fix into `wanmpi: error: ...` with
exit status 2."""
from __future__ import annotations

import argparse
import signal
import sys

from .. import paths
from ..bench.cases import BenchError
from ..bench.plot import PlotError
from ..job.deploy import DeployError
from ..sim.platform import PlatformError
from ..job.doctor import DoctorError
from ..job.standing_relays import StandingError
from ..job.launch import EXIT_INTERRUPTED, LaunchError
from ..testbed.emulator import EmulatorError
from ..testbed.net import TestbedError
from ..topo import TopologyError
from . import bench, compile, demo, deploy, doctor, link, plot, relay, run, sim, testbed, tune
from .options import CliError

EXIT_USAGE = 2
USER_ERRORS = (CliError, DeployError, StandingError, TopologyError, TestbedError, LaunchError, EmulatorError, PlotError, BenchError, DoctorError,
               PlatformError)
SUBCOMMANDS = (testbed, run, compile, deploy, relay, link, plot, doctor, demo, bench, tune, sim)      # in the order `wanmpi --help` lists them


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)      # `wanmpi ... | head` ends quietly
    # SIGTERM ends a command as Ctrl-C does: its cleanup runs (a bench puts the
    # testbed back, relays and namespaces it made are removed)
    signal.signal(signal.SIGTERM, interrupted)
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] and argv[0] in compile.COMMANDS:      # the compiler's own options: not argparse's
            return compile.main(argv[0], argv[1:])
        args = parser.parse_args(argv)        # option types raise CliError for a bad value
        if args.version:
            print(version_text())
            return 0
        if not hasattr(args, "handler"):
            parser.print_help()
            return EXIT_USAGE
        return args.handler(args)
    except USER_ERRORS as e:
        print(f"wanmpi: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def interrupted(_signum, _frame):
    raise KeyboardInterrupt


def version_text() -> str:
    """`wanmpi --version`: version, commit, "checkout DIR" or "prefix DIR", and
    in a prefix every MPI libwanmpi is installed for."""
    me = paths.identity()
    lines = [f"wanmpi {me.version}",
             f"commit {me.commit or 'unknown'}{' (with uncommitted changes)' if me.dirty else ''}",
             f"{me.mode} {me.root}"]
    for m in paths.INSTALLED.mpis if paths.INSTALLED is not None else ():
        lines.append(f"mpi {m.name}: {m.built_for}, {m.launcher}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wanmpi", description="Run MPI programs fast across clusters "
                                "joined by a wide-area network, on an emulated testbed or real clusters.")
    p.add_argument("--version", action="store_true",
                   help="print the version, the commit and where this wanmpi runs from (a checkout or a prefix)")
    commands = p.add_subparsers(metavar="COMMAND")
    for subcommand in SUBCOMMANDS:
        subcommand.register(commands)
    return p


if __name__ == "__main__":
    sys.exit(main())
