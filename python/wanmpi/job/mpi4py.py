"""Python programs that use mpi4py (docs/mpi4py.md): which MPIs the mpi4py
a Python interpreter imports is built for, so that `wanmpi run` refuses one
built for another MPI than the launcher's before it starts anything.

A binary wheel of mpi4py 4 holds one build of its extension per MPI ABI
(MPI.mpich.*.so linked with libmpi.so.12, MPI.openmpi.*.so with
libmpi.so.40) and loads the one MPI4PY_MPIABI names (the launchers set it);
an mpi4py built from source holds one build, for the MPI it was built with.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from . import programs

PYTHON = re.compile(r"python[0-9.]*$")
FIND = ("import importlib.util, os; s = importlib.util.find_spec('mpi4py'); "
        "print(os.path.dirname(s.origin) if s and s.origin else '')")


def is_python(program: str) -> bool:
    """Whether the program is a Python interpreter (python, python3, python3.11)."""
    return bool(PYTHON.match(Path(program).name))


def package(python: str, env: dict[str, str]) -> Path | None:
    """The directory of the mpi4py that `python` imports with the job's
    environment (its PYTHONPATH), or None if it has none or does not run."""
    try:
        done = subprocess.run([python, "-c", FIND], capture_output=True, text=True, timeout=60,
                              env={**os.environ, **env})
    except (OSError, subprocess.TimeoutExpired):
        return None
    where = done.stdout.strip()
    return Path(where) if done.returncode == 0 and where else None


def sonames(where: Path) -> set[str]:
    """The libmpi sonames the builds of mpi4py's MPI extension in `where` link with."""
    return set().union(*(programs.libmpi_needed(str(extension)) for extension in where.glob("MPI*.so")))
