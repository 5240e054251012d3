"""MPICH 4.0.2's collective test suite (test/mpi/coll) as data: the pinned
source, the layout of a work directory, the programs of coll/Makefile.am and
the entries of coll/testlist.in and of the DTPools list that MPICH's configure
generates (maint/dtp-test-config.txt). fetch.py, build.py, run.py and
analyze.py all read the suite through this module (docs/testing.md, "MPICH's
collective test suite")."""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

MPICH_VERSION = "4.0.2"
DEBIAN_VERSION = "4.0.2-3"           # Debian 12's source package of it
ORIG_TARBALL = f"mpich_{MPICH_VERSION}.orig.tar.xz"
ORIG_SHA256 = "b27039f964afeb6b8a3e009c56b441cbe368c26d6d6476ad3bb7190996875860"
TEST_TREE = f"mpich-{MPICH_VERSION}/test/mpi"   # the only part of the tarball we unpack

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEFAULT_WORKDIR = REPO / "build" / "mpich-coll"   # build/ is ignored by git
WORKDIR_VARIABLE = "WANMPI_MPICH_COLL_DIR"
MPIS = ("openmpi", "mpich")

# configure's default --with-dtpools-datatypes (test/mpi/configure.ac)
DTPOOLS_TYPES = ("MPI_INT", "MPI_INT:4+MPI_DOUBLE:8")


@dataclass(frozen=True)
class Workdir:
    """Where the sources, the programs, the logs and the results live."""
    root: Path

    @property
    def downloads(self) -> Path:
        return self.root / "src"

    @property
    def tests(self) -> Path:
        """test/mpi of the unpacked tarball."""
        return self.downloads / TEST_TREE

    @property
    def coll(self) -> Path:
        return self.tests / "coll"

    def programs(self, mpi: str) -> Path:
        return self.root / "build" / mpi

    def program(self, mpi: str, name: str) -> Path:
        return self.programs(mpi) / name

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def results(self) -> Path:
        return self.root / "results.csv"


def add_workdir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workdir", metavar="DIR", type=Path,
                        default=Path(os.environ.get(WORKDIR_VARIABLE, DEFAULT_WORKDIR)),
                        help=f"work directory (default: ${WORKDIR_VARIABLE}, else {DEFAULT_WORKDIR})")


def wanmpi_command() -> str:
    """The checkout's wanmpi (make build puts it in .venv), else the one on PATH."""
    venv = REPO / ".venv" / "bin" / "wanmpi"
    if venv.exists():
        return str(venv)
    found = shutil.which("wanmpi")
    if found is None:
        raise SystemExit("wanmpi not found: run `make build` in the checkout, or install wanmpi")
    return found


def library_digest(mpi: str) -> str:
    """The first 12 hex digits of the SHA-256 of the libwanmpi for `mpi` that
    `wanmpi run` loads (WANMPI_LIB_DIR's, else the checkout's): which build a
    run tested ("?" if there is none)."""
    path = Path(os.environ.get("WANMPI_LIB_DIR") or REPO / "build" / "lib") / f"libwanmpi-{mpi}.so"
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.exists() else "?"


# ---------------------------------------------------------------- programs

@dataclass(frozen=True)
class Program:
    """One program of coll/Makefile.am: its source and extra preprocessor flags."""
    name: str
    source: str
    cppflags: tuple[str, ...] = ()


def makefile_variables(text: str) -> dict[str, str]:
    """NAME = value assignments of an automake file, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    found = {}
    for line in joined.splitlines():
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*\+?=\s*(.*)$", line)
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


def programs(workdir: Workdir) -> list[Program]:
    """Every program coll/Makefile.am builds, in its order."""
    variables = makefile_variables((workdir.coll / "Makefile.am").read_text())
    found = []
    for name in variables["noinst_PROGRAMS"].split():
        source = variables.get(f"{name}_SOURCES", f"{name}.c")
        flags = variables.get(f"{name}_CPPFLAGS", "").replace("$(AM_CPPFLAGS)", "").split()
        found.append(Program(name, source, tuple(flags)))
    return found


# ---------------------------------------------------------------- entries

@dataclass(frozen=True)
class Entry:
    """One line of a test list: a program, its rank count and arguments."""
    test: str
    np: int
    args: str = ""
    time_limit: int = 0      # seconds (timeLimit=), 0: the runner's default

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.test, self.np, self.args)


def parse_testlist_line(line: str, max_ranks: int) -> Entry | None:
    """An entry of a testlist line, None for comments, blank lines and the
    @largetest@ ones (gather_big: 20 GB of memory)."""
    words = line.split("#")[0].split()
    if not words or words[0].startswith("@largetest@"):
        return None
    name = re.sub(r"^@\w+@", "", words[0])
    args = " ".join(w[len("arg="):] for w in words[2:] if w.startswith("arg="))
    limit = next((int(w[len("timeLimit="):]) for w in words[2:] if w.startswith("timeLimit=")), 0)
    return Entry(name, min(int(words[1]), max_ranks), args, limit)


def dtpools_lines(config: str) -> list[str]:
    """The testlist.dtp lines of coll/ that maint/gentests_dtp.sh writes from
    dtp-test-config.txt. Seeds count up over every line of the file (pt2pt and
    part take two per count), so they match MPICH's own list."""
    seed, lines = 1, []
    for raw in config.splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        fields = raw.split(":") + [""] * 9
        path, extra, counts, passthru, procs, min_size, max_size = fields[:7]
        testdir, name = path.rsplit("/", 1)
        max_size = max_size or min_size
        for dtype in DTPOOLS_TYPES:
            size, previous = 0, 0
            for count in counts.split():
                if size == 0:
                    size, previous = int(max_size), int(count)
                else:
                    size = min(max(size * previous // int(count), int(min_size)), int(max_size))
                if testdir in ("pt2pt", "part"):
                    seed += 2
                    continue
                if testdir == "coll":
                    args = " ".join(f"arg={a}" for a in extra.split())
                    lines.append(f"{name} {procs} arg=-type={dtype} arg=-count={count} "
                                 f"arg=-seed={seed} arg=-testsize={size} {args} {passthru}")
                seed += 1
    return lines


def entries(workdir: Workdir, max_ranks: int) -> list[Entry]:
    """testlist.in, then the DTPools entries, without repeats (an entry whose
    rank count is above max_ranks runs with max_ranks, so two can meet)."""
    lines = (workdir.coll / "testlist.in").read_text().splitlines()
    lines += dtpools_lines((workdir.tests / "maint" / "dtp-test-config.txt").read_text())
    found: dict[tuple, Entry] = {}
    for line in lines:
        entry = parse_testlist_line(line, max_ranks)
        if entry is not None and entry.key not in found:
            found[entry.key] = entry
    return list(found.values())
