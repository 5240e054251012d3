"""The NAS-like kernels (bench/kernels/) on localhost, no testbed: each one,
with Open MPI and MPICH on 8 ranks, class S, must print its JSON line with
"check": "ok" (every received element and every reduction was checked inside
the program); a bad argument must give exit status 2 and the usage. The
Fortran twins (cg_f90, ep_f90) and the communication patterns of IS, FT and
LU (bench/patterns.c) are held to the same."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import REPO, program

KERNELS = ["cg", "mg", "bt", "sp", "ep", "cg_f90", "ep_f90"]
RANKS = 8


def launcher(mpi: str) -> tuple[list[str], dict]:
    if mpi == "openmpi":
        return (["/usr/bin/mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", str(RANKS),
                 "--mca", "btl", "tcp,self", "--mca", "mpi_yield_when_idle", "1"], {})
    return ([str(REPO / ".venv/bin/mpiexec"), "-n", str(RANKS)], {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"})


def run(mpi: str, kernel: str, *args: str) -> subprocess.CompletedProcess:
    cmd, env = launcher(mpi)
    return subprocess.run([*cmd, program(mpi, kernel), *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={**os.environ, **env})


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_class_s_checks_ok(mpi, kernel):
    p = run(mpi, kernel, "--class", "S")
    assert p.returncode == 0, p.stderr[-2000:]
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, p.stdout
    r = lines[0]
    assert r["kernel"] == kernel and r["class"] == "S" and r["ranks"] == RANKS
    assert r["check"] == "ok"
    assert r["iters"] >= 1 and r["seconds"] > 0 and r["per_iter_s"] > 0


@pytest.mark.parametrize("kernel,args,message", [
    ("cg", ["--class", "C"], "--class must be S, A or B"),
    ("mg", ["--iters", "0"], "--iters must be an integer"),
    ("bt", ["--iters", "ten"], "--iters must be an integer"),
    ("sp", ["--bogus"], "unknown or incomplete option --bogus"),
    ("ep", ["--class"], "unknown or incomplete option --class"),
    ("cg_f90", ["--class", "C"], "--class must be S, A or B"),
    ("cg_f90", ["--iters", "0"], "--iters must be an integer"),
    ("ep_f90", ["--iters", "ten"], "--iters must be an integer"),
    ("ep_f90", ["--bogus"], "unknown or incomplete option --bogus"),
])
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_kernel_bad_argument_gives_usage(mpi, kernel, args, message):
    p = run(mpi, kernel, *args)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert message in p.stderr and f"usage: {kernel} " in p.stderr, p.stderr[-2000:]
    assert '"check"' not in p.stdout


@pytest.mark.parametrize("pattern", ["is", "ft", "lu"])
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_pattern_checks_ok(mpi, pattern):
    p = run(mpi, "patterns", pattern, "--iters", "3")
    assert p.returncode == 0, p.stderr[-2000:]
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1 and lines[0]["kernel"] == pattern and lines[0]["iters"] == 3, p.stdout
    assert lines[0]["ranks"] == RANKS and lines[0]["check"] == "ok"


@pytest.mark.parametrize("args,message", [
    (["cg"], "unknown kernel cg"),
    (["is", "--bytes", "3"], "--bytes must be an integer in 4..1073741824, got 3"),
    (["ft", "--iters", "ten"], "--iters must be an integer in 1..1000000000, got ten"),
    (["lu", "--compute-us", "-1"], "--compute-us must be an integer in 0..100000000, got -1"),
    (["is", "--iters"], "option without a value: --iters"),
    (["is", "--bogus", "1"], "unknown option --bogus"),
])
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_pattern_bad_argument_gives_usage(mpi, args, message):
    p = run(mpi, "patterns", *args)
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert f"patterns: {message}" in p.stderr and "usage: patterns " in p.stderr, p.stderr[-2000:]
    assert '"check"' not in p.stdout
