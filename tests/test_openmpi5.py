"""Open MPI 5 from PyPI (`make openmpi5`, a venv of its own; docs/install.md)
as a third MPI, `--mpi openmpi5`, on the testbed: launched by PRRTE through the
testbed's agent, TCP only over the emulated network, with and without
libwanmpi; its programs told apart from Open MPI 4.1's, which share the
soname libmpi.so.40 (issue 19, item 1). The core tests run over it too
(conftest.EVERY_MPI: collcheck with libwanmpi, relays, pacing, launch and
cleanup, mpi4py)."""
from __future__ import annotations

import glob
import os
import re

import pytest

from conftest import REPO, program, wanmpi
from wanmpi.job import launch, programs

OPENMPI5 = launch.launcher("openmpi5")
pytestmark = pytest.mark.skipif(OPENMPI5.missing() is not None,
                                reason=f"{OPENMPI5.missing()} (`make test` installs it)")


def collcheck(tmp_path, placement: str, *extra: str):
    return wanmpi("run", "--mpi", "openmpi5", "-n", "8", "--map", placement, "--timeout", "240",
                  "-x", f"WANMPI_STATS={tmp_path}/stats-%r.json", *extra,
                  program("openmpi5", "collcheck"), "--seed", "7", "--cases", "60", timeout=300)


def test_collectives_exact_without_libwanmpi(two_clusters, tmp_path):
    done = collcheck(tmp_path, "interleave", "--no-wanmpi")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 60 cases ok (seed 7)" in done.stdout.splitlines(), done.stdout
    assert not glob.glob(os.path.join(tmp_path, "stats-*.json"))       # no libwanmpi, no statistics


def test_latency_inside_a_cluster(two_clusters):
    """Intra-cluster ping-pong near Open MPI 4.1's (7-9 us here), not 10x it
    (a launch setting such as a wrong interface or busy-polling off)."""
    done = wanmpi("run", "--mpi", "openmpi5", "-n", "2", "--map", "a0,a1", "--timeout", "60",
                  program("openmpi5", "pingpong"), "-s", "65536", timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    latency = float(re.search(r"peer 1 host a1 .*latency_us ([\d.]+)", done.stdout).group(1))
    assert latency < 100, done.stdout


@pytest.mark.parametrize("built, run", [("openmpi5", "openmpi"), ("openmpi", "openmpi5")])
def test_program_of_the_other_open_mpi_refused(built, run):
    """Open MPI 4.1 and 5 both link libmpi.so.40: told apart by the library
    the program loads, and a mismatch refused before anything starts."""
    path = program(built, "where")
    assert programs.built_with(path) == [built]
    done = wanmpi("run", "--mpi", run, "-n", "2", path, timeout=60)
    assert done.returncode == 2
    assert f"is built with {built} but --mpi is {run}" in done.stderr, done.stderr


def test_not_installed_named(tmp_path):
    done = wanmpi("run", "--mpi", "openmpi5", "-n", "2", program("openmpi5", "where"), timeout=60,
                  env={"WANMPI_OPENMPI5_BIN": str(tmp_path / "bin")})
    assert done.returncode != 0
    assert f"openmpi5: {tmp_path}/bin/mpirun not found (run `make openmpi5`)" in done.stderr, done.stderr


def test_wrapper_builds_for_openmpi5(tmp_path):
    out = tmp_path / "where"
    done = wanmpi("mpicc", "--mpi", "openmpi5", "-O2", "-o", str(out), str(REPO / "tests/programs/where.c"),
                  timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert programs.built_with(str(out)) == ["openmpi5"]
