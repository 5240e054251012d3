"""What the runs of MPICH's collective tests say about libwanmpi: per MPI and
testlist entry, whether it passes alone (`wanmpi run --no-wanmpi`) and with
libwanmpi, and whether it takes more time with libwanmpi.

    python3 bench/mpich_coll/analyze.py [--slower 1.3] [--slack 0] [--all] [--current-library]
        [--workdir DIR | --results CSV]

A run passes when its job exits 0 and prints " No Errors" (MPICH's own
criterion, test/mpi/runtests). Times are the best (minimum) wall time over
the repetitions of each mode, which takes out most of the noise of a shared
2-core machine. Verdicts, first match wins:

    incomplete         one mode has no run yet
    fails alone        a run without libwanmpi failed: the MPI's or the test's
    fails with wanmpi  every run alone passed, one with libwanmpi failed
    slower             both pass, best with > FACTOR x best alone + SLACK s
    pass               both pass in no more time than that

Exit status 1 if an entry fails with wanmpi or is slower, else 0.
"""
from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import suite

FIELDS = ["test", "mpi", "np", "args", "mode", "rep", "status", "no_errors", "wall_s",
          "started", "libwanmpi", "log"]
MODES = ("alone", "wanmpi")
DEFAULT_SLOWER = 1.3      # factor
DEFAULT_SLACK = 0.0       # seconds added to the bound; a short test may want some
VERDICTS = ("fails with wanmpi", "slower", "fails alone", "incomplete", "pass")
BAD_VERDICTS = ("fails with wanmpi", "slower")


def passed(row: dict) -> bool:
    return row["status"] == "0" and row["no_errors"] == "1"


@dataclass
class Outcome:
    """Every run of one testlist entry under one MPI."""
    mpi: str
    test: str
    np: int
    args: str
    runs: dict[str, list[dict]] = field(default_factory=lambda: {m: [] for m in MODES})

    def passes(self, mode: str) -> int:
        return sum(passed(r) for r in self.runs[mode])

    def best(self, mode: str) -> float | None:
        times = [float(r["wall_s"]) for r in self.runs[mode]]
        return min(times) if times else None

    def ratio(self) -> float | None:
        alone, wanmpi = self.best("alone"), self.best("wanmpi")
        return wanmpi / alone if alone and wanmpi is not None else None

    def verdict(self, slower: float = DEFAULT_SLOWER, slack: float = DEFAULT_SLACK) -> str:
        alone, wanmpi = self.runs["alone"], self.runs["wanmpi"]
        if not alone or not wanmpi:
            return "incomplete"
        if self.passes("alone") < len(alone):
            return "fails alone"
        if self.passes("wanmpi") < len(wanmpi):
            return "fails with wanmpi"
        if self.best("wanmpi") > slower * self.best("alone") + slack:
            return "slower"
        return "pass"


def read_results(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def of_current_library(rows: list[dict]) -> list[dict]:
    """The runs alone, and those with libwanmpi made with the build of it in
    the checkout now (older runs tested a library that is gone)."""
    digests = {mpi: suite.library_digest(mpi) for mpi in suite.MPIS}
    return [r for r in rows if r["mode"] == "alone" or r["libwanmpi"] == digests.get(r["mpi"])]


def outcomes(rows: list[dict]) -> list[Outcome]:
    """One Outcome per (mpi, test, np, args), in the order of first appearance."""
    found: dict[tuple, Outcome] = {}
    for row in rows:
        key = (row["mpi"], row["test"], int(row["np"]), row["args"])
        if key not in found:
            found[key] = Outcome(*key)
        found[key].runs[row["mode"]].append(row)
    return list(found.values())


def line(o: Outcome, verdict: str) -> str:
    ratio = o.ratio()
    times = " ".join(f"{t:8.2f}" if t is not None else "       -" for t in (o.best("alone"), o.best("wanmpi")))
    runs = " ".join(f"{o.passes(m)}/{len(o.runs[m])}" for m in MODES)
    return (f"{o.mpi:8} {o.test:22} {o.np:3} {o.args[:44]:44} {runs:9} {times} "
            f"{f'x{ratio:.2f}' if ratio else '':6} {verdict}")


def report(rows: list[dict], slower: float, slack: float, show_all: bool) -> tuple[str, bool]:
    """The report; whether any entry fails with wanmpi or is slower."""
    text, bad = [], False
    header = (f"{'mpi':8} {'test':22} {'np':>3} {'args':44} {'passed':9} {'best s alone/wanmpi':17} "
              f"{'ratio':6} verdict")
    for mpi in suite.MPIS:
        judged = [(o, o.verdict(slower, slack)) for o in outcomes(rows) if o.mpi == mpi]
        if not judged:
            continue
        counts = Counter(v for _, v in judged)
        text.append(f"{mpi}: {len(judged)} entries: "
                    + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v]))
        shown = [(o, v) for o, v in judged if show_all or v != "pass"]
        if shown:
            text += [header] + [line(o, v) for o, v in sorted(shown, key=lambda p: (VERDICTS.index(p[1]), p[0].test))]
        text.append("")
        bad |= any(v in BAD_VERDICTS for _, v in judged)
    text.append(f"slower: best with libwanmpi > {slower} x best alone + {slack} s; passed: runs that passed/runs")
    return "\n".join(text), bad


def unbuilt(workdir: suite.Workdir) -> dict[str, tuple[list[str], int]]:
    """Per MPI with a build directory: the programs that failed to build
    (a compiler log, no program) and how many were never built."""
    if not (workdir.coll / "Makefile.am").exists():
        return {}
    found = {}
    for mpi in suite.MPIS:
        if not workdir.programs(mpi).exists():
            continue
        missing = [p.name for p in suite.programs(workdir) if not workdir.program(mpi, p.name).exists()]
        failed = [n for n in missing if (workdir.programs(mpi) / "log" / f"{n}.log").exists()]
        found[mpi] = (failed, len(missing) - len(failed))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slower", type=float, default=DEFAULT_SLOWER, metavar="FACTOR",
                        help=f"slower means best with libwanmpi > FACTOR x best alone + SLACK (default {DEFAULT_SLOWER})")
    parser.add_argument("--slack", type=float, default=DEFAULT_SLACK, metavar="SECONDS",
                        help=f"(default {DEFAULT_SLACK})")
    parser.add_argument("--all", action="store_true", help="list the entries that pass too")
    parser.add_argument("--current-library", action="store_true",
                        help="only the runs with libwanmpi made with the library built now")
    parser.add_argument("--results", type=Path, metavar="CSV", help="results file (default: WORKDIR/results.csv)")
    suite.add_workdir_option(parser)
    args = parser.parse_args()
    workdir = suite.Workdir(args.workdir)
    rows = read_results(args.results or workdir.results)
    if args.current_library:
        rows = of_current_library(rows)
    if not rows:
        print(f"analyze: no results in {args.results or workdir.results}", file=sys.stderr)
        return 1
    text, bad = report(rows, args.slower, args.slack, args.all)
    print(text)
    for mpi, (failed, never) in unbuilt(workdir).items():
        if failed:
            print(f"{mpi}: did not build ({len(failed)}): {' '.join(failed)}")
        if never:
            print(f"{mpi}: {never} program(s) not built yet (build.py --mpi {mpi})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
