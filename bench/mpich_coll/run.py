"""Run MPICH's collective tests on the testbed, each entry alone (`wanmpi run
--no-wanmpi`) and then with libwanmpi, and append one row per run to
WORKDIR/results.csv (analyze.py reads it).

    python3 bench/mpich_coll/run.py --mpi openmpi|mpich [--only REGEX] [--reps N]
        [--confirm-slower N] [--window 240] [--current-library] [--once] [--workdir DIR]

Resumable: a run whose (test, mpi, np, args, mode, repetition) is in the
CSV is not run again, so an interrupted run goes on where it stopped.
Runs go in batches: each batch takes the testbed lock ($WANMPI_TEST_LOCK,
default /tmp/wanmpi-testbed.lock, the one pytest takes), brings up the
default testbed if it is not up, checks the WAN's one-way delay, and starts
no run after --window seconds (nor one that took longer than the time left
before), so a batch holds the lock at most the window plus one run.
Between batches the lock is free for a few seconds for others.
With --current-library, runs with libwanmpi made with another build of it
(the CSV's libwanmpi column) are run again, as analyze.py --current-library
would ignore them.
"""
from __future__ import annotations

import argparse
import csv
import fcntl
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

import analyze
import suite

DEFAULT_LOCK = "/tmp/wanmpi-testbed.lock"
TOPOLOGY = suite.REPO / "examples" / "two-clusters.toml"
DEFAULT_TIMEOUT = 300      # seconds per run, unless the testlist's timeLimit is longer
PAUSE = 5                  # seconds between batches, the lock free


@dataclass(frozen=True)
class Run:
    entry: suite.Entry
    mode: str
    rep: int

    def key(self, mpi: str) -> tuple:
        return (self.entry.test, mpi, str(self.entry.np), self.entry.args, self.mode, str(self.rep))


def row_key(row: dict) -> tuple:
    return (row["test"], row["mpi"], row["np"], row["args"], row["mode"], row["rep"])


def pending(workdir: suite.Workdir, args, rows: list[dict]) -> list[Run]:
    """Runs not in the CSV yet: every built entry `reps` times, and the
    entries analyze.py finds slower `confirm_slower` times; alone, then with
    libwanmpi, entry by entry."""
    done = {row_key(r) for r in rows if r["mpi"] == args.mpi}
    slower = {(o.test, o.np, o.args) for o in analyze.outcomes(rows)
              if o.mpi == args.mpi and o.verdict() == "slower"}
    runs = []
    for rep in range(max(args.reps, args.confirm_slower)):
        for entry in suite.entries(workdir, args.max_ranks):
            if args.only and not re.search(args.only, entry.test):
                continue
            if not workdir.program(args.mpi, entry.test).exists():
                continue
            if rep >= args.reps and entry.key not in slower:
                continue
            runs += [r for r in (Run(entry, m, rep) for m in analyze.MODES) if r.key(args.mpi) not in done]
    return runs


@contextmanager
def testbed_lock():
    path = os.environ.get("WANMPI_TEST_LOCK", DEFAULT_LOCK)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for the testbed lock {path}", flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def testbed_ready(delay: str) -> None:
    """The default testbed up, its WAN at `delay` one-way in every direction."""
    wanmpi = suite.wanmpi_command()
    up = subprocess.run([wanmpi, "testbed", "up", "--topology", str(TOPOLOGY)], capture_output=True, text=True)
    if up.returncode != 0:
        raise SystemExit(f"wanmpi testbed up: {up.stderr.strip() or up.stdout.strip()}")
    shown = subprocess.run([wanmpi, "link", "show"], capture_output=True, text=True, check=True).stdout
    delays = set(re.findall(r"(\S+) one-way", shown))
    if delays != {delay}:
        raise SystemExit(f"the testbed's WAN delay is {', '.join(sorted(delays)) or '?'}, not {delay} "
                         f"(`wanmpi link show`); someone changed it: wait, or pass --delay")


def log_name(run: Run, mpi: str) -> str:
    args = re.sub(r"[^A-Za-z0-9=.+-]+", "_", run.entry.args)
    return f"{run.entry.test}-n{run.entry.np}{'-' + args if args else ''}-{mpi}-{run.mode}-{run.rep}.log"


def execute(workdir: suite.Workdir, run: Run, mpi: str, timeout: int) -> dict:
    """One job; its CSV row. The output goes to WORKDIR/logs/."""
    limit = max(timeout, run.entry.time_limit)
    command = [suite.wanmpi_command(), "run", "--topology", str(TOPOLOGY), "--mpi", mpi,
               "-n", str(run.entry.np), "--timeout", str(limit)]
    if run.mode == "alone":
        command.append("--no-wanmpi")
    command += [str(workdir.program(mpi, run.entry.test)), *run.entry.args.split()]
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit + 60, cwd=suite.REPO)
        status, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        status, out, err = "killed", str(e.stdout or ""), str(e.stderr or "")
    wall = time.monotonic() - t0
    log = workdir.logs / log_name(run, mpi)
    log.write_text(" ".join(command) + "\n" + out + "\n--- stderr ---\n" + err)
    return dict(test=run.entry.test, mpi=mpi, np=run.entry.np, args=run.entry.args, mode=run.mode, rep=run.rep,
                status=status, no_errors=int(bool(re.search(r"^ No Errors$", out, re.M))),
                wall_s=f"{wall:.2f}", started=started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                libwanmpi=suite.library_digest(mpi) if run.mode == "wanmpi" else "",
                log=str(log.relative_to(workdir.root)))


def batch(workdir: suite.Workdir, args, runs: list[Run], rows: list[dict]) -> int:
    """Runs from the front of `runs` for at most the window; how many ran."""
    longest = {}
    for r in rows:
        k = (r["test"], r["mpi"], r["np"], r["args"])
        longest[k] = max(longest.get(k, 0.0), float(r["wall_s"]))
    new = not workdir.results.exists()
    with open(workdir.results, "a", newline="") as f:
        writer = csv.DictWriter(f, analyze.FIELDS)
        if new:
            writer.writeheader()
        t0, ran = time.monotonic(), 0
        for run in runs:
            left = args.window - (time.monotonic() - t0)
            expected = longest.get((run.entry.test, args.mpi, str(run.entry.np), run.entry.args), 0.0)
            if ran and (left <= 0 or expected > left):
                break
            row = execute(workdir, run, args.mpi, args.timeout)
            writer.writerow(row)
            f.flush()
            rows.append({k: str(v) for k, v in row.items()})
            ran += 1
            print(f"{row['test']} -n {row['np']} {row['args']} {row['mode']} rep {row['rep']}: "
                  f"{'pass' if analyze.passed(rows[-1]) else 'FAIL (status ' + str(row['status']) + ')'} "
                  f"{row['wall_s']} s", flush=True)
    return ran


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpi", choices=suite.MPIS, required=True)
    parser.add_argument("--only", metavar="REGEX", default="", help="only the tests whose name matches")
    parser.add_argument("--reps", type=int, default=1, help="runs of every entry in each mode (default 1)")
    parser.add_argument("--confirm-slower", type=int, default=0, metavar="N",
                        help="runs (in all) of each entry analyze.py finds slower, to compare best times")
    parser.add_argument("--window", type=float, default=240, metavar="SECONDS",
                        help="start no run after this long in one batch (default 240)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"per run, unless the testlist gives more (default {DEFAULT_TIMEOUT})")
    parser.add_argument("--max-ranks", type=int, default=8,
                        help="entries of more ranks run with this many (default 8: one per testbed node)")
    parser.add_argument("--delay", default="10ms", help="the WAN delay the testbed must have (default 10ms)")
    parser.add_argument("--current-library", action="store_true",
                        help="runs with libwanmpi count as done only if made with the library built now")
    parser.add_argument("--once", action="store_true", help="one batch, then stop")
    suite.add_workdir_option(parser)
    args = parser.parse_args()
    workdir = suite.Workdir(args.workdir)
    workdir.logs.mkdir(parents=True, exist_ok=True)
    while True:
        rows = analyze.read_results(workdir.results)
        if args.current_library:
            rows = analyze.of_current_library(rows)
        runs = pending(workdir, args, rows)
        if not runs:
            print(f"{args.mpi}: nothing left to run")
            return 0
        print(f"{args.mpi}: {len(runs)} run(s) to go", flush=True)
        with testbed_lock():
            testbed_ready(args.delay)
            batch(workdir, args, runs, rows)
        if args.once:
            return 0
        time.sleep(PAUSE)


if __name__ == "__main__":
    sys.exit(main())
