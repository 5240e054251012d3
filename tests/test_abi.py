"""MPI-5's standard ABI (`make abi`; docs/install.md, "The MPI standard ABI"):
one libwanmpi built against it (build/lib/libwanmpi-abi.so, with MPICH 5's
mpicc_abi) serves every MPI that implements the ABI. Here MPICH 5.0.2 and
Intel MPI 2021.18.1 both ship libmpi_abi.so.1; Open MPI 4.1 and 5.0 do not,
and a program of the ABI is refused under them (issue 19, item 4)."""
from __future__ import annotations

import glob
import json
import os

import pytest

from conftest import REPO, installed, wanmpi
from wanmpi import paths
from wanmpi.job import launch, libwanmpi, programs

ABI_MPIS = [installed(m) for m in launch.Launcher.registry if launch.launcher(m).standard_abi() is not None]
OTHER_MPIS = [installed(m) for m in launch.Launcher.registry if launch.launcher(m).standard_abi() is None]
LIBRARY = {"mpich": "library: MPICH Version:      5.", "intelmpi": "library: Intel(R) MPI Library 2021"}


def abi_program(name: str) -> str:
    path = paths.BUILD / "abi" / name
    assert path.exists(), f"{path} is not built: run `make abi`"
    return str(path)


def test_the_abi_build_says_what_it_is_built_for():
    library = paths.libwanmpi("abi")
    assert libwanmpi.built_for(library) == "MPI ABI 1.0"
    assert programs.libmpi_needed(str(library)) == {"libmpi_abi.so.1"}
    assert programs.standard_abi(programs.libmpi_needed(abi_program("collcheck"))) == "libmpi_abi.so.1"


def test_mpich_and_intel_mpi_implement_the_abi():
    """Both MPIs of MPICH's family here ship libmpi_abi.so.1 (the test lists
    which do, so that a new MPI without it is noticed)."""
    assert [p.values[0] for p in ABI_MPIS] == ["mpich", "intelmpi"]


@pytest.mark.parametrize("mpi", ABI_MPIS)
def test_one_libwanmpi_serves_every_mpi_of_the_abi(two_clusters, tmp_path, mpi):
    """The same program and the same libwanmpi file under each MPI of the
    ABI: collcheck exact, libwanmpi took calls, and the MPI that ran it is
    the launcher's (its library version)."""
    done = wanmpi("run", "--mpi", mpi, "-n", "8", "--map", "interleave", "--timeout", "240",
                  "-x", f"WANMPI_STATS={tmp_path}/stats-%r.json",
                  abi_program("collcheck"), "--seed", "7", "--cases", "60", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 60 cases ok (seed 7)" in done.stdout.splitlines(), done.stdout
    ranks = [json.loads(open(f).read()) for f in sorted(glob.glob(os.path.join(tmp_path, "stats-*.json")))]
    assert len(ranks) == 8
    ours = sum(c.get("multilane", 0) + c.get("singlelane", 0) for r in ranks for c in r["collectives"].values())
    assert ours > 0, ranks[0]
    which = wanmpi("run", "--mpi", mpi, "-n", "2", abi_program("where"), "--library", "1", timeout=120)
    assert which.returncode == 0, which.stdout + which.stderr
    assert which.stdout.startswith(LIBRARY[mpi]), which.stdout


@pytest.mark.parametrize("mpi", ABI_MPIS)
def test_abi_program_runs_without_libwanmpi(two_clusters, mpi):
    done = wanmpi("run", "--mpi", mpi, "-n", "8", "--no-wanmpi", abi_program("where"), "--bytes", "10000",
                  timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "allreduce ok" in done.stdout


@pytest.mark.parametrize("mpi", OTHER_MPIS)
def test_abi_program_refused_under_an_mpi_without_the_abi(mpi):
    done = wanmpi("run", "--mpi", mpi, "-n", "2", abi_program("where"), timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"wanmpi: error: {abi_program('where')} is built against the MPI standard ABI "
                           f"(libmpi_abi.so.1, by mpicc_abi), which --mpi {mpi} does not implement: run it "
                           "with --mpi mpich or --mpi intelmpi\n"), done.stderr


def test_wrapper_builds_for_the_abi(tmp_path):
    out = tmp_path / "where"
    done = wanmpi("mpicc", "--abi", "-O2", "-o", str(out), str(REPO / "tests/programs/where.c"), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert programs.libmpi_needed(str(out)) == {"libmpi_abi.so.1"}
    fortran = wanmpi("mpif90", "--abi", "-o", str(tmp_path / "f"), str(REPO / "tests/programs/fence_f90.f90"))
    assert fortran.returncode == 2
    assert "--abi: MPI-5's standard ABI is C only here (no MPI_Fint)" in fortran.stderr
