"""From the times `wanmpi tune` measured to a rules file (docs/tuning.md):
pure functions, no testbed.

Per (MPI, delay, collective, size) the three settings tune measures are
`multi` (our multi-lane algorithm, or the scheduled all-to-all), `single`
(single-lane, or the paced all-to-all) and `mpi` (the MPI library's own).
The choice is the faster of ours, unless it is not more than MARGIN faster
than the MPI's own: ours must take less than (1 - MARGIN) x the MPI's time
(the MPI's own is the safer default: it has no preload-specific fallbacks).

Neighbouring sizes with the same choice merge into one byte range; a
boundary lies at the geometric mean of the measured sizes either side (the
first range is open below; the last ends with the largest size measured:
past it nothing was measured, and the built-in choice holds). Neighbouring
delays whose choices are the same at every size merge too; a delay boundary
lies at the midpoint of the measured delays either side. A delay range that
is everything is left out of the rule. alltoallv, gatherv and scatterv rules have no bytes condition
(their ranks see different totals): the choice at the largest size measured
holds for all.
The barrier has one size (0 bytes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..rules import UNSIZED, Range, Rule, format_bytes

SETTINGS = ("multi", "single", "mpi")
ALLTOALLS = ("alltoall", "alltoallv")
MARGIN = 0.02


@dataclass(frozen=True)
class Cell:
    """The best median (seconds) of each setting measured at one point."""
    mpi: str
    delay_ms: float
    op: str
    bytes: int
    times: dict            # setting -> seconds (a setting whose jobs all failed is missing)


@dataclass(frozen=True)
class Choice:
    setting: str           # multi, single or mpi
    ratio: float | None    # best of ours / the MPI's own


def algorithm(op: str, setting: str) -> str:
    """A setting as the rules file names it for `op`."""
    if setting == "mpi":
        return "mpi"
    if op == "alltoallw":           # one algorithm of ours, no paced one
        return "scheduled"
    if op in ALLTOALLS:
        return "scheduled" if setting == "multi" else "paced"
    return "multilane" if setting == "multi" else "singlelane"


def choose(times: dict) -> Choice | None:
    """The setting to take, given each one's time; None if nothing was measured."""
    ours = {s: times[s] for s in SETTINGS[:2] if s in times}
    mpi = times.get("mpi")
    best = min(ours, key=lambda s: ours[s]) if ours else None     # a tie: multi, the first
    ratio = ours[best] / mpi if best and mpi else None
    if mpi is None:
        return Choice(best, None) if best else None
    if best is None or ours[best] >= (1 - MARGIN) * mpi:
        return Choice("mpi", ratio)
    return Choice(best, ratio)


def size_boundary(below: int, above: int) -> int:
    """Where the range of `above` starts: the geometric mean, kept in (below, above]."""
    return min(above, max(below + 1, round(math.sqrt(below * above))))


def delay_boundary_us(below_ms: float, above_ms: float) -> int:
    return round((below_ms + above_ms) / 2 * 1000)


def runs(keys: list, values: list) -> list[tuple[list, object]]:
    """Neighbouring keys with equal values, merged: [(keys, value)]."""
    out: list[tuple[list, object]] = []
    for k, v in zip(keys, values):
        if out and out[-1][1] == v:
            out[-1][0].append(k)
        else:
            out.append(([k], v))
    return out


def ranges(groups: list[list], boundary) -> list[Range]:
    """One range per group of sorted keys: boundaries between neighbouring
    groups, the first open below and the last open above."""
    return [Range(boundary(groups[i - 1][-1], g[0]) if i else None,
                  boundary(g[-1], groups[i + 1][0]) if i + 1 < len(groups) else None)
            for i, g in enumerate(groups)]


def size_ranges(groups: list[list[int]]) -> list[Range]:
    """The byte ranges of groups of sorted sizes: the last ends with its largest size."""
    out = ranges(groups, size_boundary)
    return out[:-1] + [Range(out[-1].low, groups[-1][-1] + 1)]


def choices_by_size(cells: list[Cell]) -> list[tuple[int, Choice]]:
    """The choice at each size measured, smallest first (UNSIZED: the largest size only)."""
    chosen = [(c.bytes, choose(c.times)) for c in sorted(cells, key=lambda c: c.bytes)]
    chosen = [(b, ch) for b, ch in chosen if ch is not None]
    if chosen and cells[0].op in UNSIZED:
        return chosen[-1:]
    return chosen


def op_rules(mpi: str, op: str, cells: list[Cell], fixed: dict[str, Range]) -> list[str]:
    """The comment lines and rules of one MPI and collective, every delay."""
    delays = sorted({c.delay_ms for c in cells})
    per_delay = {d: choices_by_size([c for c in cells if c.delay_ms == d]) for d in delays}
    plan = [tuple((b, ch.setting) for b, ch in per_delay[d]) for d in delays]
    delay_groups = [g for g, _ in runs(delays, plan)]
    lines = []
    for group, delay_range in zip(delay_groups, ranges(delay_groups, delay_boundary_us)):
        for d in group:
            measured = " ".join(f"{format_bytes(b) if op != 'barrier' else 'any'}:"
                                f"{'-' if ch.ratio is None else f'{ch.ratio:.2f}'}" for b, ch in per_delay[d])
            lines.append(f"# {op}, {mpi}, {d:g} ms: best of ours / {mpi}'s own: {measured or 'nothing measured'}")
        chosen = per_delay[group[0]]
        if not chosen:
            continue
        size_groups = runs([b for b, _ in chosen], [ch.setting for _, ch in chosen])
        for (sizes, setting), size_range in zip(size_groups, size_ranges([s for s, _ in size_groups])):
            conditions = dict(fixed)
            if not delay_range.everything:
                conditions["delay"] = delay_range
            if op not in (*UNSIZED, "barrier"):
                conditions["bytes"] = size_range
            lines.append(Rule(op, algorithm(op, setting), mpi, conditions).line())
    return lines


def rules_text(cells: list[Cell], clusters: int, ranks: int, header: list[str]) -> str:
    """The whole rules file: the version line, `header` as comments, then per
    MPI and collective (in the order measured) the rules."""
    fixed = {"clusters": Range.exactly(clusters), "ranks": Range.exactly(ranks)}
    lines = ["wanmpi-rules 1", *(f"# {h}" if h else "#" for h in header)]
    for mpi in dict.fromkeys(c.mpi for c in cells):
        for op in dict.fromkeys(c.op for c in cells if c.mpi == mpi):
            lines.append("")
            lines += op_rules(mpi, op, [c for c in cells if c.mpi == mpi and c.op == op], fixed)
    return "\n".join(lines) + "\n"

