"""The program a job runs, checked before anything starts: where it is, and
which registered MPI it is built with (by the libmpi sonames it needs)."""
from __future__ import annotations

import functools
import glob
import os
import re
import shlex
import shutil
from pathlib import Path

from .. import shell
from .launch import LaunchError, Launcher


def resolve_program(program: str) -> str:
    """Absolute path of the program, or LaunchError naming what is wrong."""
    path = Path(program)
    if "/" not in program:
        found = shutil.which(program)
        if found is None:
            raise LaunchError(f"program {program!r} not found (not a file here and not on PATH)")
        path = Path(found)
    if not path.exists():
        raise LaunchError(f"program {program!r} not found")
    if path.is_dir() or not os.access(path, os.X_OK):
        raise LaunchError(f"program {program!r} is not an executable file")
    return os.path.abspath(path)        # not resolve(): a venv's python is a symlink that must stay one


def libmpi_needed(binary: str) -> set[str]:
    """The libmpi* sonames a program or library is linked against (readelf)."""
    dynamic = shell.run(["readelf", "-d", binary], check=False).stdout
    return set(re.findall(r"Shared library: \[(libmpi[^\]]*)\]", dynamic))


def mpis_of(sonames: set[str]) -> list[str]:
    """The registered MPIs those sonames belong to: any libmpi* of the same
    major version as the MPI's libmpi (a Fortran program of Open MPI needs
    libmpi_mpifh.so.40 only, one of MPICH libmpichfort.so.12); several when
    MPIs share one, none if unknown."""
    return [l.name for l in Launcher.registry.values()
            if any(n.endswith(".so." + l.library.rsplit(".so.", 1)[1]) for n in sonames)]


def standard_abi(sonames: set[str]) -> str | None:
    """The MPI standard ABI library among those sonames (libmpi_abi.so.1, as
    `mpicc_abi` of MPICH 5 links), if any."""
    return next((n for n in sorted(sonames) if n.startswith("libmpi_abi.so")), None)


def built_with(program: str) -> list[str]:
    """The registered MPIs whose libraries a program is linked against."""
    return narrowed(program, mpis_of(libmpi_needed(program)))


def libmpi_files(binary: str) -> set[str]:
    """The files (real paths) of the libmpi* a program loads here (ldd)."""
    out = shell.run(["ldd", binary], check=False).stdout
    return {os.path.realpath(m) for m in re.findall(r"^\s*libmpi\S* => (/\S+)", out, re.M)}


def _wrapper_says(mpicc: Path, option: str) -> str:
    try:
        done = shell.run([str(mpicc), option], check=False)
    except (OSError, shell.CommandError):
        return ""
    return done.stdout if done.returncode == 0 else ""


@functools.cache
def wrapper_libraries(mpicc: Path) -> frozenset[str]:
    """The libmpi* files (real paths: libmpi, and its Fortran libraries as
    Intel's libmpifort.so.12) in the directories a compiler wrapper links
    programs from: Open MPI's `--showme:libdirs`, else the -L directories of
    `-show` (MPICH, Intel MPI: both libmpi.so.12); empty for a wrapper that
    does not say."""
    dirs = _wrapper_says(mpicc, "--showme:libdirs").split()
    if not dirs:
        try:
            dirs = [a[2:] for a in shlex.split(_wrapper_says(mpicc, "-show")) if a.startswith("-L")]
        except ValueError:          # unbalanced quotes: says nothing we can read
            dirs = []
    return frozenset(os.path.realpath(f) for d in dirs for f in glob.glob(os.path.join(glob.escape(d), "libmpi*.so*")))


def narrowed(program: str, mpis: list[str]) -> list[str]:
    """Of several MPIs whose libmpi has one soname (Open MPI 4.1 and 5:
    libmpi.so.40; MPICH and Intel MPI: libmpi.so.12), those whose library
    the program loads, where that can be told (several where two registered
    MPIs are one: a site MPI installed beside the built-in one with the same
    mpicc); else `mpis` as they are."""
    if len(mpis) < 2:
        return mpis
    files = libmpi_files(program)
    loads = [m for m in mpis if files & wrapper_libraries(Launcher.registry[m].mpicc)]
    return loads or mpis
