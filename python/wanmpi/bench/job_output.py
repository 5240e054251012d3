"""One MPI job of a benchmark case on the testbed that is up: what it printed,
its JSON result lines, and, when it failed, the lines of its output that say
why.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Iterable

from ..job import launch
from ..topo import Topology
from .cases import BenchError


def job_output(t: Topology, mpi: str, argv: list[str], nodes: list, *, env: dict | None = None,
               extra_args: Iterable[str] = (), wanmpi: bool = True, timeout: float = 600,
               use_relays: bool = True, rules: str | None = None) -> tuple[str, str]:
    """Run one job on the testbed that is up; return what it printed on
    stdout and on stderr. `rules`: a rules file for libwanmpi (docs/tuning.md). BenchError (with the reason from its output) if it
    failed; its stderr is captured, so a failed case records why."""
    program = Path(argv[0])
    if not program.exists():
        raise BenchError(f"{program} is not built: run `make build`")
    job = launch.Job(t, [str(program), *argv[1:]], list(nodes), dict(env or {}), list(extra_args), wanmpi=wanmpi,
                     use_relays=use_relays, rules=rules)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            status = launch.run_job(launch.launcher(mpi), job, timeout=timeout, stdout=out)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if status != 0:
        raise BenchError(f"exit status {status}: {reason(errors, text)}")
    return text, errors


def job_rows(t: Topology, mpi: str, argv: list[str], nodes: list, **options) -> list[dict]:
    """job_output(), as the JSON lines the job printed; BenchError if none."""
    rows = []
    text, errors = job_output(t, mpi, argv, nodes, **options)
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if not rows:
        raise BenchError(f"no result line: {reason(errors, text)}")
    return rows


LAUNCHER_NOISE = ("---", "[", "NOTE:", "MPI_ABORT was invoked", "with errorcode", "You may or may not",
                  "exactly when", "Primary job", "a non-zero exit", "mpirun", "Process name", "Exit code",
                  "process rank", "===", "BAD TERMINATION", "CLEANING UP", "YOUR APPLICATION", "This typically")


def reason(errors: str, text: str) -> str:
    """The lines of a failed job's output that say why (the launchers' own
    boilerplate left out), at most 400 characters."""
    lines = [l.strip() for l in (errors + "\n" + text).splitlines()]
    said = [l for l in lines if l and not l.startswith(LAUNCHER_NOISE) and not l.startswith("{")]
    return " | ".join(dict.fromkeys(said[:3]))[:400] or "(no output)"
