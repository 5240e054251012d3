"""Bad arguments give a clear error naming the problem and a non-zero exit."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from conftest import REPO, WANMPI, program, wanmpi
from wanmpi.job import launch, programs
from wanmpi.testbed import net


@pytest.mark.parametrize("args, message", [
    (["run", "-n", "2", "/no/such/program"], "program '/no/such/program' not found"),
    (["run", "-n", "2", "no-such-program-anywhere"], "not found (not a file here and not on PATH)"),
    (["run", "-n", "2", "/etc"], "is not an executable file"),
    (["run", "-n", "0", "/bin/true"], "-n: need at least 1 rank, got 0"),
    (["run", "-n", "-3", "/bin/true"], "-n: need at least 1 rank, got -3"),
    (["run", "-n", "many", "/bin/true"], "-n: expected a number of ranks, got 'many'"),
    (["run", "--mpi", "lam", "-n", "2", "/bin/true"], "--mpi: unknown MPI 'lam' (known: openmpi, mpich, openmpi5, intelmpi)"),
    (["run", "-n", "2", "--env", "NOEQUALS", "/bin/true"], "--env: expected NAME=VALUE"),
    (["run", "-n", "2", "--map", "a0", "/bin/true"], "--map lists 1 node(s) but -n is 2"),
    (["run", "-n", "2", "--map", "a0,z9", "/bin/true"], "--map: unknown node 'z9'"),
    (["run", "-t", "examples/missing.toml", "-n", "2", "/bin/true"], "examples/missing.toml: cannot read file"),
    (["testbed", "up", "-t", "examples/real-clusters.toml"], "lists real hosts; there is no testbed"),
    (["bench", "flap", "--bytes", "4B"], "--bytes must be between 8 bytes and 256 MiB, got 4B"),
    (["bench", "flap", "--bytes", "4"], "--bytes: '4' has no unit"),
    (["bench", "flap", "--variants", "relayed-quic"], "relayed-quic"),
    (["bench", "flap", "--cuts", "0.5"], "--cuts: every outage must last 1 to 600 s"),
])
def test_bad_arguments_name_the_problem(args, message):
    done = wanmpi(*args, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert done.stderr.startswith("wanmpi: error:")


SITES = ('[[cluster]]\nname = "site"\nnetwork = "10.1.0.0/16"\n'
         '[[cluster]]\nname = "cloud"\nnetwork = "10.2.0.0/16"\nhosts = ["10.2.0.11:2"]\n')
ALLOCATION = {"SLURM_JOB_NODELIST": "10.1.0.[7-8],10.2.0.4"}


def test_run_slurm_places_ranks_on_the_nodes_of_the_allocation(tmp_path):
    """No job is launched: an unknown --map node makes the error list the nodes the job would have."""
    sites = tmp_path / "sites.toml"
    sites.write_text(SITES)
    done = wanmpi("run", "--slurm", "-t", str(sites), "-n", "2", "--map", "10.1.0.8,nowhere", "/bin/true",
                  env=ALLOCATION, timeout=60)
    assert done.returncode == 2
    assert done.stderr == "wanmpi: error: --map: unknown node 'nowhere' (nodes: 10.1.0.7, 10.1.0.8, 10.2.0.11)\n"
    shown = wanmpi("topology", "--slurm", "--json", str(sites), env=ALLOCATION, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert [sorted(c["nodes"]) for c in json.loads(shown.stdout)["clusters"]] == [["10.1.0.7", "10.1.0.8"],
                                                                                  ["10.2.0.11"]]


@pytest.mark.parametrize("args, environ, message", [
    (["run"], ALLOCATION, "sites.toml: cluster[0].network: only for real clusters, and a real cluster names its "
     'hosts: hosts = [...], hostfile = "FILE" or slurm = true (or, inside a Slurm allocation, `wanmpi run --slurm` '
     "takes them from it)"),
    (["run", "--slurm"], {"SLURM_JOB_NODELIST": ""}, "sites.toml: cluster[0].network: --slurm: SLURM_JOB_NODELIST "
     "is not set: not inside a Slurm allocation (salloc/sbatch)"),
    (["run", "--slurm", "-t", "examples/two-clusters.toml"], ALLOCATION, "examples/two-clusters.toml: --slurm takes "
     "the hosts of real clusters (each with its network = \"CIDR\") from the Slurm allocation, but this is an "
     "emulated testbed topology (nodes = N)"),
    (["deploy", "--slurm", "--from", "/opt/wanmpi"], {"SLURM_JOB_NODELIST": ""}, "--slurm: SLURM_JOB_NODELIST is not set"),
    (["relay", "status", "--slurm"], {"SLURM_JOB_NODELIST": ""}, "--slurm: SLURM_JOB_NODELIST is not set"),
    (["doctor", "--slurm"], {"SLURM_JOB_NODELIST": ""}, "--slurm: SLURM_JOB_NODELIST is not set"),
])
def test_slurm_errors_name_the_problem(tmp_path, args, environ, message):
    sites = tmp_path / "sites.toml"
    sites.write_text(SITES)
    program = ["-n", "2", "/bin/true"] if args[0] == "run" else []
    where = [] if "-t" in args else (["-t", str(sites)] if args[0] != "doctor" else [str(sites)])
    done = wanmpi(*args, *where, *program, env=environ, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("wanmpi: error:") and message in done.stderr, done.stderr


@pytest.mark.parametrize("name, built, other", [("where", "openmpi", "mpich"), ("where", "mpich", "openmpi"),
                                                ("fence_f90", "openmpi", "mpich"),    # needs libmpi_mpifh.so.40 only
                                                ("fence_f90", "mpich", "openmpi")])
def test_program_built_for_the_other_mpi_is_refused(name, built, other):
    done = wanmpi("run", "--mpi", other, "-n", "2", program(built, name), timeout=60)
    assert done.returncode == 2
    assert f"is built with {built} but --mpi is {other}" in done.stderr


def test_program_built_for_the_standard_abi_is_refused_under_an_mpi_without_it(tmp_path):
    """MPICH 5's mpicc_abi links libmpi_abi.so.1, which Open MPI does not
    implement: refused up front, before the testbed is even looked at
    (under MPICH and Intel MPI it runs: tests/test_abi.py)."""
    source = tmp_path / "abi.c"
    source.write_text("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); return MPI_Finalize(); }\n")
    built = subprocess.run([str(REPO / ".venv/bin/mpicc_abi"), "-o", str(tmp_path / "abi"), str(source)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    done = wanmpi("run", "--mpi", "openmpi", "-n", "2", str(tmp_path / "abi"), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is built against the MPI standard ABI (libmpi_abi.so.1, by mpicc_abi), which --mpi openmpi does not " \
        "implement: run it with --mpi mpich" in done.stderr, done.stderr


def test_run_needs_the_testbed_up():
    net.teardown(net.State.load())
    done = wanmpi("run", "-n", "2", program("openmpi", "where"), timeout=60)
    assert done.returncode == 2 and "the testbed is not up: run `wanmpi testbed up`" in done.stderr


def test_missing_subcommand_and_unknown_option_exit_non_zero():
    assert wanmpi().returncode == 2
    done = wanmpi("run", "--bogus", "-n", "2", "/bin/true")
    assert done.returncode == 2 and "unrecognized arguments" in done.stderr


def test_sigterm_ends_a_bench_and_removes_its_testbed():
    if net.State.load() is not None:
        pytest.skip("a testbed is up; the bench would put it back")
    bench = subprocess.Popen([*WANMPI, "bench", "relay", "--parts", "latency", "--mpis", "openmpi", "--delays", "0",
                              "--reps", "5"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while net.State.load() is None and time.monotonic() < deadline and bench.poll() is None:
            time.sleep(0.2)
        assert net.State.load() is not None, "the bench never brought its testbed up"
        time.sleep(3)                       # into the first jobs, relays running
        bench.send_signal(signal.SIGTERM)
        out, err = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode == launch.EXIT_INTERRUPTED, out + err
    assert net.State.load() is None and net.existing_namespaces() == [], err[-2000:]


def test_demo_runs_pingpong_and_collectives_and_cleans_up():
    if net.State.load() is not None:
        pytest.skip("a testbed is up; the demo brings up its own")
    done = wanmpi("demo", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"b0 \(across the WAN\)\s+\d", done.stdout)
    for op in ("bcast", "allreduce"):
        assert re.search(rf"^{op}\s+[\d.]+ s\s+[\d.]+ s\s+[\d.]+x\s+[\d.]+ s$", done.stdout, re.M), done.stdout
    assert re.search(r"^time per iteration\s+[\d.]+ ms\s+[\d.]+ ms\s+[\d.]+x$", done.stdout, re.M), done.stdout
    assert re.search(r"^TCP timeouts \(RTO\)\s+\d+\s+\d+$", done.stdout, re.M), done.stdout
    # the private cluster: unreachable directly, joined through the relays by both MPIs
    assert re.search(r"a direct TCP connect from a0 to b0: failed", done.stdout), done.stdout
    for mpi in ("openmpi", "mpich"):
        assert re.search(rf"^{mpi}\s+\d+ us\s+[\d.]+ Mbit\s+[\d,]+$", done.stdout, re.M), done.stdout
    assert net.State.load() is None


@pytest.mark.parametrize("mpi", launch.defaults())
@pytest.mark.parametrize("command, source", [("mpicc", "tests/programs/fence.c"),
                                             ("mpif90", "tests/programs/fence_f90.f90")])
def test_compiler_wrappers_build_for_the_mpi_named(tmp_path, mpi, command, source):
    """`wanmpi mpicc|mpif90 --mpi NAME ARGS...` hands ARGS (dashes and all) to
    that MPI's wrapper: the program is linked with its library, which
    `wanmpi run` then accepts for --mpi NAME and refuses for the other."""
    out = tmp_path / "fence"
    select = ["--mpi", mpi] if command == "mpicc" else [f"--mpi={mpi}"]
    done = wanmpi(command, *select, "-O2", "-o", str(out), str(REPO / source), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert programs.built_with(str(out)) == [mpi]


@pytest.mark.parametrize("args, message", [
    (["mpicc", "--mpi", "lam", "-o", "x", "x.c"], "--mpi: unknown MPI 'lam' (known: openmpi, mpich, openmpi5, intelmpi)"),
    (["mpicc", "--mpi"], "--mpi needs the name of an MPI"),
    (["mpif90", "--mpi", "mpich"], "nothing to compile: give the wrapper's arguments"),
])
def test_compiler_wrapper_bad_arguments(args, message):
    done = wanmpi(*args, timeout=60)
    assert done.returncode == 2 and message in done.stderr and done.stderr.startswith("wanmpi: error:"), \
        done.stdout + done.stderr


def test_compiler_errors_are_the_compilers(tmp_path):
    broken = tmp_path / "broken.c"
    broken.write_text("int main(void) { return missing; }\n")
    done = wanmpi("mpicc", "--mpi", "mpich", "-o", str(tmp_path / "b"), str(broken), timeout=60)
    assert done.returncode != 0 and "missing" in done.stderr
