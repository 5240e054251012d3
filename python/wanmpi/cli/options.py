"""What several subcommands share: the --topology and --slurm options and the
topology they select, and the argparse types that parse option values.

A type reports a bad value by raising CliError, which argparse passes through
(it turns only ArgumentTypeError, TypeError and ValueError into its own usage
message), so the user reads `wanmpi: error: -n: expected a number of ranks,
got 'many'`, as for every other problem main() reports. Where argparse's own
message was the one given (`invalid int value: 'x'`), a type raises
ValueError for it and bears the name argparse prints.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

from .. import paths, rules, topo, units
from ..job import launch
from ..testbed import net
from ..topo import Topology


class CliError(RuntimeError):
    """A problem to report as 'wanmpi: error: ...' with exit status 2."""


# ---- the topology ---------------------------------------------------------------
def topology_option(parser) -> None:
    parser.add_argument("--topology", "-t", metavar="FILE",
                        help="topology file (default: $WANMPI_TOPOLOGY, else the testbed that is up, "
                             f"else {default_topology_name()})")


def default_topology_name() -> str:
    """The default topology as help texts show it: relative to the checkout, or in the prefix."""
    return str(paths.DEFAULT_TOPOLOGY.relative_to(paths.REPO) if paths.REPO else paths.DEFAULT_TOPOLOGY)


def slurm_option(parser) -> None:
    """--slurm, for subcommands that take a topology of real sites."""
    parser.add_argument("--slurm", action="store_true",
                        help="inside a Slurm allocation: real clusters that give their network but no hosts "
                             "take the allocation's nodes in that network (SLURM_JOB_NODELIST)")


def topology_for(args) -> Topology:
    """--topology, else $WANMPI_TOPOLOGY, else the testbed that is up, else the
    default; with --slurm, real clusters without hosts take the allocation's."""
    path = getattr(args, "topology", None) or os.environ.get("WANMPI_TOPOLOGY")
    slurm = getattr(args, "slurm", False)
    if path:
        return topo.load(path, slurm=slurm)
    state = net.State.load()
    if state is not None:
        return topo.loads(state.topology_text, state.topology_source, slurm=slurm)
    return topo.load(None, slurm=slurm)


# ---- the rules file ---------------------------------------------------------------
def rules_option(parser) -> None:
    """--rules, for subcommands whose jobs load libwanmpi."""
    parser.add_argument("--rules", metavar="FILE",
                        help="rules file: which algorithm libwanmpi takes per call (docs/tuning.md; "
                             "`wanmpi tune` writes one); default: the topology's [collectives] rules, else none")


def checked_rules(path: str | None, t: Topology | None = None) -> str | None:
    """The absolute path of --rules (else of the topology's rules file), read
    and checked here so that a bad line stops the command before any job
    starts (libwanmpi would only fall back to the MPI's algorithms); None: no rules."""
    chosen = path or (t.collectives.rules if t is not None else None)
    if not chosen:
        return None
    try:
        rules.load(chosen)
    except rules.RulesError as e:
        raise CliError(f"{'--rules' if path else t.source + ': collectives.rules'}: {e}") from None
    return str(Path(chosen).resolve())


# ---- types: one value ------------------------------------------------------------
def ranks(minimum: int) -> Callable[[str], int]:
    """-n: a number of ranks, at least `minimum`."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise CliError(f"-n: expected a number of ranks, got {text!r}") from None
        if n < minimum:
            raise CliError(f"-n: need at least {minimum} rank{'s' if minimum > 1 else ''}, got {n}")
        return n
    return parse


def count(option: str, minimum: int) -> Callable[[str], int]:
    """An integer of at least `minimum` ('--reps must be at least 1, got 0')."""
    def parse(text: str) -> int:
        n = int(text)                   # ValueError: argparse's "invalid int value"
        if n < minimum:
            raise CliError(f"{option} must be at least {minimum}, got {n}")
        return n
    parse.__name__ = "int"
    return parse


def positive(option: str, problem: str = "{option} must be positive, got {value:g}") -> Callable[[str], float]:
    """A number above 0 (seconds); `problem` is the message for one that is not."""
    def parse(text: str) -> float:
        value = float(text)             # ValueError: argparse's "invalid float value"
        if value <= 0:
            raise CliError(problem.format(option=option, value=value))
        return value
    parse.__name__ = "float"
    return parse


def quantity(option: str, parse_unit: Callable[[str], int | float]) -> Callable[[str], int | float]:
    """A rate, size, duration or loss in the topology file's units (units.py), in base units."""
    def parse(text: str) -> int | float:
        try:
            return parse_unit(text)
        except units.UnitError as e:
            raise CliError(f"{option}: {e}") from None
    return parse


def size_between(option: str, low: int, high: int, span: str) -> Callable[[str], int]:
    """A size in the topology file's units within low..high bytes (`span` says so in words)."""
    parse = quantity(option, units.parse_size)

    def checked(text: str) -> int:
        size = parse(text)
        if not low <= size <= high:
            raise CliError(f"{option} must be between {span}, got {text}")
        return size
    return checked


def mpi_name(text: str) -> str:
    """--mpi: a registered launcher."""
    if text not in launch.Launcher.registry:
        raise CliError(f"--mpi: unknown MPI {text!r} (known: {', '.join(launch.Launcher.registry)})")
    return text


def installed_mpis(text: str) -> list[str]:
    """--mpis: registered MPIs, each once, installed here."""
    mpis = names("--mpis", launch.Launcher.registry, unique=True)(text)
    installed(mpis)
    return mpis


def installed(mpis) -> None:
    """Refuse MPIs that are not installed here, naming what installs them."""
    for mpi in dict.fromkeys(mpis):
        missing = launch.launcher(mpi).missing()
        if missing:
            raise CliError(missing)


def env_setting(text: str) -> tuple[str, str]:
    """--env NAME=VALUE."""
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise CliError(f"--env: expected NAME=VALUE, got {text!r}")
    return name, value


# ---- types: lists ----------------------------------------------------------------
def names(option: str, known: Iterable[str], unique: bool = False) -> Callable[[str], list[str]]:
    """A comma-separated subset of `known` (each once if `unique`)."""
    def parse(text: str) -> list[str]:
        choices = list(known)
        chosen = [x.strip() for x in text.split(",") if x.strip()]
        unknown = [x for x in chosen if x not in choices]
        if unknown or not chosen:
            raise CliError(f"{option}: unknown {', '.join(map(repr, unknown)) or 'empty list'} "
                           f"(choose from {', '.join(choices)})")
        return list(dict.fromkeys(chosen)) if unique else chosen
    return parse


def delays_ms(text: str) -> list[float]:
    """--delays '0,2,5,10': one-way WAN delays in ms."""
    delays = []
    for item in text.split(","):
        try:
            delay = float(item)
        except ValueError:
            raise CliError(f"--delays: {item.strip()!r} is not a delay in ms (e.g. 0,2,5,10)") from None
        if not 0 <= delay <= 1000:
            raise CliError(f"--delays: {delay:g} ms is outside [0, 1000]")
        delays.append(delay)
    return delays
