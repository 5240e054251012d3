"""Intel MPI from PyPI (`make intelmpi`: impi-rt and impi-devel in a venv of
its own; docs/intelmpi.md) as `--mpi intelmpi` on the testbed: its Hydra
through the testbed's agent, libfabric's tcp provider over the emulated
network, with and without libwanmpi (MPICH's build: the same ABI); its
programs told apart from MPICH's, which share the soname libmpi.so.12
(issue 19, item 2). The core tests run over it too (conftest.EVERY_MPI:
collcheck with libwanmpi, relays, pacing, launch and cleanup, mpi4py)."""
from __future__ import annotations

import glob
import json
import os
import re

import pytest

from conftest import REPO, program, wanmpi
from wanmpi.job import launch, programs

INTELMPI = launch.launcher("intelmpi")
pytestmark = pytest.mark.skipif(INTELMPI.missing() is not None,
                                reason=f"{INTELMPI.missing()} (`make test` installs it)")


def statistics(tmp_path) -> list[dict]:
    return [json.loads(open(f).read()) for f in sorted(glob.glob(os.path.join(tmp_path, "stats-*.json")))]


def test_collectives_exact_without_libwanmpi(two_clusters, tmp_path):
    done = wanmpi("run", "--mpi", "intelmpi", "-n", "8", "--map", "interleave", "--no-wanmpi", "--timeout", "240",
                  "-x", f"WANMPI_STATS={tmp_path}/stats-%r.json",
                  program("intelmpi", "collcheck"), "--seed", "7", "--cases", "60", "--max-bytes", "1000000",
                  timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 60 cases ok (seed 7)" in done.stdout.splitlines(), done.stdout
    assert not statistics(tmp_path)             # no libwanmpi, no statistics


def test_fortran_collectives_exact_with_libwanmpi(two_clusters, tmp_path):
    """mpif.h with gfortran: libwanmpi takes the Fortran symbols of Intel's
    libmpifort too (`use mpi`'s collcheck_f90 does not pass: Intel MPI
    alone hangs in it, docs/intelmpi.md)."""
    done = wanmpi("run", "--mpi", "intelmpi", "-n", "8", "--map", "interleave", "--timeout", "120",
                  "-x", f"WANMPI_STATS={tmp_path}/stats-%r.json", program("intelmpi", "collcheck_f77"), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"collcheck_f77: \d+ cases ok", done.stdout), done.stdout
    ours = sum(c.get("multilane", 0) + c.get("singlelane", 0)
               for r in statistics(tmp_path) for c in r["collectives"].values())
    assert ours > 0


def test_fortran_use_mpi_collectives_exact_with_libwanmpi(two_clusters):
    """collcheck_f90 (`use mpi`): Intel MPI alone hangs in it and its
    persistent allgather is wrong from its second start (case 410); with
    libwanmpi, which keeps Intel's persistent collectives itself (each
    start Intel's nonblocking call on a communicator of its own), every
    case is exact (docs/intelmpi.md)."""
    done = wanmpi("run", "--mpi", "intelmpi", "-n", "8", "--map", "interleave", "--timeout", "300",
                  program("intelmpi", "collcheck_f90"), timeout=360)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"collcheck_f90: \d+ cases ok", done.stdout), done.stdout


def test_latency_inside_a_cluster(two_clusters):
    """Intra-cluster ping-pong near Open MPI 4.1's and MPICH's (5-7 us
    here: Intel MPI 4.7-5.8 us), not 10x it (a launch setting such as a
    wrong interface, shared memory or another provider; docs/intelmpi.md)."""
    done = wanmpi("run", "--mpi", "intelmpi", "-n", "2", "--map", "a0,a1", "--timeout", "60",
                  program("intelmpi", "pingpong"), "-s", "65536", timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    latency = float(re.search(r"peer 1 host a1 .*latency_us ([\d.]+)", done.stdout).group(1))
    assert latency < 100, done.stdout


@pytest.mark.parametrize("built, run", [("intelmpi", "mpich"), ("mpich", "intelmpi")])
def test_program_of_the_other_mpich_abi_refused(built, run):
    """MPICH and Intel MPI both link libmpi.so.12: told apart by the library
    the program loads (against the -L of each wrapper's `-show`), and a
    mismatch refused before anything starts."""
    path = program(built, "where")
    assert programs.built_with(path) == [built]
    done = wanmpi("run", "--mpi", run, "-n", "2", path, timeout=60)
    assert done.returncode == 2
    assert f"is built with {built} but --mpi is {run}" in done.stderr, done.stderr


def test_not_installed_named(tmp_path):
    done = wanmpi("run", "--mpi", "intelmpi", "-n", "2", program("intelmpi", "where"), timeout=60,
                  env={"WANMPI_INTELMPI_BIN": str(tmp_path / "bin")})
    assert done.returncode != 0
    assert f"intelmpi: {tmp_path}/bin/mpiexec.hydra not found (run `make intelmpi`)" in done.stderr, done.stderr


@pytest.mark.parametrize("command, source", [("mpicc", "tests/programs/where.c"),
                                             ("mpif90", "tests/programs/fence_f90.f90")])
def test_wrapper_builds_for_intelmpi(tmp_path, command, source):
    out = tmp_path / "prog"
    done = wanmpi(command, "--mpi", "intelmpi", "-O2", "-o", str(out), str(REPO / source), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert programs.built_with(str(out)) == ["intelmpi"]
