"""An installed wanmpi (`make install`, docs/install.md): the prefix a running
wanmpi belongs to and its manifest, share/wanmpi/install.json, which says
what is in it; and what a source checkout says of itself (its version and
commit), for `wanmpi --version` and the results of `wanmpi bench`.

A prefix P holds
  P/bin/wanmpi                        sh wrapper: P/lib/wanmpi/venv/bin/python -I -m wanmpi
  P/bin/wanrelay, wanem, udpprobe
  P/lib/wanmpi/venv/                  a venv with the wanmpi package installed (not editable)
                                      and MPICH 5 from PyPI
  P/lib/wanmpi/libwanshim.so
  P/lib/wanmpi/<mpi>/libwanmpi.so     one per MPI of the manifest
  P/lib/wanmpi/<mpi>/libwanfence.so   beside it, for an MPICH-derived MPI (fence_library)
  P/libexec/wanmpi/<mpi>/<program>    wanmpi's MPI programs, built per MPI
  P/libexec/wanmpi/tools/             programs without MPI (tcprtt)
  P/share/wanmpi/install.json, P/share/wanmpi/examples/, P/share/doc/wanmpi/,
  P/share/modulefiles/wanmpi/<version>, P/include/wanmpi.h
Paths inside the prefix are stored relative to it, so the tree keeps working
when it is moved or copied. The installer (packaging/install.py) writes the
manifest with `manifest_json`; everything else only reads it.
"""
from __future__ import annotations

import json
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

MANIFEST = Path("share/wanmpi/install.json")
VENV = Path("lib/wanmpi/venv")
FORMAT = "wanmpi-install/1"
# What `make install` puts into a prefix (relative paths); `make uninstall` removes exactly these.
CONTENTS = ("bin/wanmpi", "bin/wanrelay", "bin/wanem", "bin/udpprobe", "lib/wanmpi", "libexec/wanmpi",
            "include/wanmpi.h", "share/wanmpi", "share/doc/wanmpi", "share/modulefiles/wanmpi")
FAMILIES = ("openmpi", "mpich")         # how an MPI is launched: mpirun (Open MPI) or hydra (MPICH and kin)


def fortran_beside(mpicc: Path) -> Path | None:
    """The Fortran wrapper beside an MPI's mpicc (mpifort or mpif90, with
    Debian's .openmpi suffix where the mpicc has it), if there is one."""
    suffix = ".openmpi" if mpicc.name.endswith(".openmpi") else ""
    for name in ("mpifort", "mpif90"):
        if (mpicc.parent / f"{name}{suffix}").exists():
            return mpicc.parent / f"{name}{suffix}"
    return None


def fence_library(libwanmpi: Path) -> Path:
    """libwanfence (lib/src/fence), kept beside the libwanmpi of the same MPI:
    libwanfence-mpich.so beside libwanmpi-mpich.so in build/lib, libwanfence.so
    beside libwanmpi.so in a prefix."""
    return libwanmpi.with_name(libwanmpi.name.replace("libwanmpi", "libwanfence", 1))


class ManifestError(RuntimeError):
    """The manifest of a prefix cannot be read."""


@dataclass(frozen=True)
class InstalledMPI:
    """One MPI libwanmpi and the programs were built for (`make install [MPICC=... NAME=...]`)."""
    name: str                 # what --mpi selects
    family: str               # one of FAMILIES
    mpicc: Path
    bin_dir: Path             # where its launcher is
    launcher: Path            # mpirun / mpiexec.hydra
    library_version: str      # MPI_Get_library_version, at install time
    built_for: str            # libwanmpi's wanmpi_built_for ("Open MPI 4.1.4")
    soname: str               # of its MPI library (libmpi.so.40): which MPI a program is linked with
    libwanmpi: Path
    programs: Path            # directory of wanmpi's MPI programs built with it
    commit: str | None        # of the checkout it was built from

    @property
    def prrte(self) -> bool:
        """Open MPI 5 or later: launched by PRRTE (prterun's options, not 4.1's)."""
        major = re.match(r"Open MPI v?(\d+)\.", self.library_version)
        return self.family == "openmpi" and major is not None and int(major.group(1)) >= 5

    @property
    def intel(self) -> bool:
        """Intel MPI (MPICH's family): launched with Intel's own settings."""
        return self.library_version.startswith("Intel(R) MPI Library")


def short_hash(content_hash: str) -> str:
    """A content hash as people compare it: 12 hex digits, no algorithm."""
    return content_hash.split(":")[-1][:12]


@dataclass(frozen=True)
class Manifest:
    prefix: Path
    version: str
    commit: str | None
    dirty: bool
    content_hash: str
    mpis: tuple[InstalledMPI, ...]

    def mpi(self, name: str) -> InstalledMPI | None:
        return next((m for m in self.mpis if m.name == name), None)


@dataclass(frozen=True)
class Identity:
    """What `wanmpi --version` says: this wanmpi's version, commit and where it runs from."""
    version: str
    commit: str | None
    dirty: bool
    mode: str                 # "prefix" (installed) or "checkout"
    root: Path


def prefix_of(package: Path) -> Path | None:
    """The installed prefix whose venv (P/lib/wanmpi/venv) holds the package
    directory `package`, if that prefix has a manifest; None otherwise (a
    source checkout, or a venv of anything else)."""
    for d in package.parents:
        if d.name == VENV.name and d.parent.name == "wanmpi" and d.parent.parent.name == "lib":
            prefix = d.parents[2]
            return prefix if (prefix / MANIFEST).is_file() else None
    return None


def inside(prefix: Path, stored: str) -> Path:
    """A path as the manifest stores it: relative to the prefix, or absolute."""
    return prefix / stored if not stored.startswith("/") else Path(stored)


def load(prefix: Path) -> Manifest:
    path = prefix / MANIFEST
    try:
        doc = json.loads(path.read_text())
        if doc.get("format") != FORMAT:
            raise ManifestError(f"{path}: format {doc.get('format')!r}, expected {FORMAT!r}")
        mpis = tuple(_mpi(prefix, m) for m in doc["mpis"])
        return Manifest(prefix, doc["version"], doc["commit"], doc["dirty"], doc["content_hash"], mpis)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ManifestError(f"{path}: {e}") from None


def _mpi(prefix: Path, m: dict) -> InstalledMPI:
    if m["family"] not in FAMILIES:
        raise ValueError(f"MPI {m['name']!r}: unknown family {m['family']!r}")
    p = {k: inside(prefix, m[k]) for k in ("mpicc", "bin_dir", "launcher", "libwanmpi", "programs")}
    return InstalledMPI(m["name"], m["family"], p["mpicc"], p["bin_dir"], p["launcher"], m["library_version"],
                        m["built_for"], m["soname"], p["libwanmpi"], p["programs"], m.get("commit"))


def stored(prefix: Path, path: Path) -> str:
    """How the manifest stores `path`: relative to the prefix when inside it."""
    try:
        return str(Path(path).relative_to(prefix))
    except ValueError:
        return str(path)


def mpi_json(prefix: Path, m: InstalledMPI) -> dict:
    entry = {"name": m.name, "family": m.family, "library_version": m.library_version, "built_for": m.built_for,
             "soname": m.soname, "commit": m.commit}
    for key in ("mpicc", "bin_dir", "launcher", "libwanmpi", "programs"):
        entry[key] = stored(prefix, getattr(m, key))
    return entry


def manifest_json(m: Manifest, installed: str) -> dict:
    return {"format": FORMAT, "version": m.version, "commit": m.commit, "dirty": m.dirty,
            "content_hash": m.content_hash, "installed": installed, "contents": list(CONTENTS),
            "mpis": [mpi_json(m.prefix, x) for x in m.mpis]}


# ---- what this wanmpi is ------------------------------------------------------------
def checkout_version(repo: Path) -> str:
    with open(repo / "python" / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def checkout_commit(repo: Path) -> tuple[str | None, bool]:
    """The checkout's commit and whether tracked files differ from it."""
    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
        except OSError:
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""
    return git("rev-parse", "HEAD") or None, bool(git("status", "--porcelain", "-uno"))


def identity(manifest: Manifest | None, repo: Path | None) -> Identity:
    if manifest is not None:
        return Identity(manifest.version, manifest.commit, manifest.dirty, "prefix", manifest.prefix)
    commit, dirty = checkout_commit(repo)
    return Identity(checkout_version(repo), commit, dirty, "checkout", repo)
