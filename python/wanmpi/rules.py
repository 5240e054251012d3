"""The rules file (docs/tuning.md, "Rules file"): which algorithm libwanmpi
takes per collective call, by MPI, communicator shape, WAN delay and rate,
and message size. libwanmpi reads it (WANMPI_RULES); this module reads it to
check a file before a job starts, and writes the lines `wanmpi tune` derives.

    wanmpi-rules 1
    allreduce  mpi        mpi=mpich clusters=2 delay=5ms- bytes=-16K
    allreduce  multilane  bytes=16K-

A range is `N` (exactly N), `A-B` (A <= x < B), `A-` or `-B`; every value is
kept in base units (bytes, microseconds, bits/s). A bad line is a RulesError
naming the file and the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

VERSION_LINE = "wanmpi-rules 1"
COLLECTIVE_ALGORITHMS = ("multilane", "singlelane", "mpi")
ALLTOALL_ALGORITHMS = ("scheduled", "paced", "mpi")
ALGORITHMS = {**{c: COLLECTIVE_ALGORITHMS for c in ("bcast", "allreduce", "reduce", "allgather", "allgatherv",
                                                     "reduce_scatter_block", "barrier", "gather", "gatherv",
                                                     "scatter", "scatterv", "scan", "exscan", "reduce_scatter")},
              **{c: ALLTOALL_ALGORITHMS for c in ("alltoall", "alltoallv")}, "alltoallw": ("scheduled", "mpi")}
UNSIZED = ("alltoallv", "alltoallw", "gatherv", "scatterv")     # no bytes condition: their ranks see different sizes
MPIS = ("openmpi", "mpich", "openmpi5", "intelmpi")     # mpi=: the names of `wanmpi run --mpi`
# condition -> its units (scale of each); None: a plain count; mpi is a name
UNITS: dict[str, dict[str, int] | None] = {
    "clusters": None,
    "ranks": None,
    "delay": {"us": 1, "ms": 1000, "s": 1_000_000},
    "rate": {"bit": 1, "Kbit": 1000, "Mbit": 1_000_000, "Gbit": 1_000_000_000},
    "bytes": {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30},
}
CONDITIONS = ("mpi", *UNITS)            # the order conditions are written in
UNIT_REQUIRED = ("delay", "rate")


class RulesError(ValueError):
    """A rules file that cannot be read or has a bad line; the message names both."""


@dataclass(frozen=True)
class Range:
    """low <= x < high, in base units; None: open on that side."""
    low: int | None = None
    high: int | None = None

    @classmethod
    def exactly(cls, n: int) -> "Range":
        return cls(n, n + 1)

    def holds(self, x: int) -> bool:
        return (self.low is None or x >= self.low) and (self.high is None or x < self.high)

    @property
    def everything(self) -> bool:
        return self.low is None and self.high is None

    def text(self, fmt) -> str:
        if self.low is not None and self.high == self.low + 1:
            return fmt(self.low)
        return f"{'' if self.low is None else fmt(self.low)}-{'' if self.high is None else fmt(self.high)}"


@dataclass(frozen=True)
class Rule:
    collective: str
    algorithm: str
    mpi: str | None = None
    ranges: dict[str, Range] = field(default_factory=dict)      # clusters, ranks, delay, rate, bytes

    def line(self) -> str:
        """The rule as a line of the file (columns aligned for the collectives' names)."""
        conditions = [f"mpi={self.mpi}"] if self.mpi else []
        conditions += [f"{name}={self.ranges[name].text(FORMATS[name])}" for name in UNITS if name in self.ranges]
        return f"{self.collective:<20} {self.algorithm:<10} {' '.join(conditions)}".rstrip()


# ---- writing values ----------------------------------------------------------------------
def format_bytes(n: int) -> str:
    """Bytes as the file writes them: K, M, G (powers of 1024) when exact, else plain."""
    for suffix, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n and n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)


def format_delay(us: int) -> str:
    """A one-way delay in microseconds: whole milliseconds as ms, else us."""
    return f"{us // 1000}ms" if us and us % 1000 == 0 else f"{us}us"


def format_rate(bps: int) -> str:
    for suffix, scale in (("Gbit", 10**9), ("Mbit", 10**6), ("Kbit", 10**3)):
        if bps and bps % scale == 0:
            return f"{bps // scale}{suffix}"
    return f"{bps}bit"


FORMATS = {"clusters": str, "ranks": str, "delay": format_delay, "rate": format_rate, "bytes": format_bytes}


# ---- reading ---------------------------------------------------------------------------------
def load(path: str | Path) -> list[Rule]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise RulesError(f"rules {path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    return parse(text, str(path))


def parse(text: str, source: str = "<rules>") -> list[Rule]:
    """The rules of a file's text, in order; RulesError at the first bad line."""
    rules: list[Rule] = []
    version_seen = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not version_seen:
            if line.split() != VERSION_LINE.split():
                raise RulesError(f"rules {source} line {number}: expected the version line "
                                 f"'{VERSION_LINE}' first, got {line!r}")
            version_seen = True
            continue
        try:
            rules.append(parse_rule(line))
        except ValueError as e:
            raise RulesError(f"rules {source} line {number}: {e}") from None
    if not version_seen:
        raise RulesError(f"rules {source}: empty: the first line must be '{VERSION_LINE}'")
    return rules


def parse_rule(line: str) -> Rule:
    words = line.split()
    collective = words[0]
    if collective not in ALGORITHMS:
        raise ValueError(f"unknown collective {collective!r} (expected {', '.join(ALGORITHMS)})")
    if len(words) < 2:
        raise ValueError(f"{collective}: no algorithm")
    algorithm, known = words[1], ALGORITHMS[collective]
    if algorithm not in known:
        raise ValueError(f"unknown algorithm {algorithm!r} for {collective} "
                         f"(expected {', '.join(known[:-1])} or {known[-1]})")
    mpi, ranges = None, {}
    for word in words[2:]:
        name, sep, value = word.partition("=")
        if not sep or name not in CONDITIONS:
            raise ValueError(f"{word!r} is not a condition NAME=RANGE (names: {', '.join(CONDITIONS)})")
        if name == "mpi" and mpi is not None or name in ranges:
            raise ValueError(f"{name}= given twice")
        if name == "bytes" and collective in UNSIZED:
            article = "an" if collective[0] in "aeiou" else "a"
            raise ValueError(f"{article} {collective} rule may not have a bytes condition "
                             "(its ranks see different totals)")
        if name == "mpi":
            if value not in MPIS:
                raise ValueError(f"mpi={value!r}: expected {', '.join(MPIS[:-1])} or {MPIS[-1]}")
            mpi = value
        else:
            ranges[name] = parse_range(name, value)
    return Rule(collective, algorithm, mpi, ranges)


def parse_range(name: str, text: str) -> Range:
    low_text, dash, high_text = text.partition("-")
    if not dash:
        return Range.exactly(parse_value(name, text))
    if not low_text and not high_text:
        raise ValueError(f"{name}={text!r}: a range needs at least one end")
    low = parse_value(name, low_text) if low_text else None
    high = parse_value(name, high_text) if high_text else None
    if low is not None and high is not None and low >= high:
        raise ValueError(f"{name}={text!r}: empty range (the first end must be below the second)")
    return Range(low, high)


def parse_value(name: str, text: str) -> int:
    units = UNITS[name]
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", text)
    if found is None:
        raise ValueError(f"{name}={text!r} is not a number{'' if units is None else ' with a unit'}")
    number, unit = found.groups()
    if units is None:
        if unit or "." in number:
            raise ValueError(f"{name}={text!r}: expected a whole number")
        return int(number)
    if unit not in units or (name in UNIT_REQUIRED and not unit):
        choices = ", ".join(u or "plain bytes" for u in units)
        raise ValueError(f"{name}={text!r}: {'missing unit' if not unit else f'unknown unit {unit!r}'} "
                         f"(expected {choices})")
    return int(round(float(number) * units[unit]))
