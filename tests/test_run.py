"""`wanmpi run`: real Open MPI and MPICH jobs across the emulated clusters."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from conftest import EVERY_MPI, MPIS, REPO, WANMPI, program, wan_counters, wanmpi
from wanmpi.job import launch
from wanmpi.testbed import net


def ranks_and_hosts(stdout: str) -> list[str]:
    return [m.group(2) for m in re.finditer(r"rank (\d+) of \d+ on (\S+)", stdout)]


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_job_spans_both_clusters_and_its_bytes_cross_the_emulated_wan(two_clusters, mpi):
    per_pair = 1_000_000
    before = wan_counters()
    done = wanmpi("run", "--mpi", mpi, "-n", "8", program(mpi, "where"), "--bytes", str(per_pair))
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks_and_hosts(done.stdout) == ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"]
    assert "allreduce ok" in done.stdout
    after = wan_counters()
    # the alltoall alone moves 4 ranks x 4 remote ranks x 1 MB across in each direction
    for direction in ("a_to_b", "b_to_a"):
        crossed = after[("a-b", direction)]["tx_bytes"] - before[("a-b", direction)]["tx_bytes"]
        assert crossed >= 16 * per_pair, f"{direction}: only {crossed} bytes crossed the WAN"


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("mapping, hosts", [
    ("interleave", ["a0", "b0", "a1", "b1"]),
    ("b1,a2,b1,a0", ["b1", "a2", "b1", "a0"]),
    (None, ["a0", "a2", "b0", "b2"]),
])
def test_ranks_are_placed_as_mapped(two_clusters, mpi, mapping, hosts):
    args = ["run", "--mpi", mpi, "-n", "4"] + (["--map", mapping] if mapping else [])
    done = wanmpi(*args, program(mpi, "where"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks_and_hosts(done.stdout) == hosts


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_exit_status_is_the_jobs(two_clusters, mpi):
    done = wanmpi("run", "--mpi", mpi, "-n", "2", program(mpi, "where"), "--exit", "3")
    assert done.returncode == 3, done.stdout + done.stderr


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("name", ["fence", "fence_f90"])
@pytest.mark.parametrize("with_wanmpi", [True, False], ids=["wanmpi", "mpi-alone"])
def test_finalize_waits_for_every_rank(two_clusters, mpi, name, with_wanmpi):
    """No rank leaves MPI_Finalize before all have entered it: under MPICH
    with wanmpi's launch settings a rank that left early could take its last
    message with it (lib/src/fence/fence.c). Rank 0 enters 2 s after the
    others, so every rank's MPI_Finalize must return 2 s or more after the
    barrier before it; with and without libwanmpi, from C and Fortran."""
    done = wanmpi("run", "--mpi", mpi, "-n", "4", "--map", "interleave", *([] if with_wanmpi else ["--no-wanmpi"]),
                  program(mpi, name), "2", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = sorted((json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")), key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1, 2, 3], done.stdout
    early = [r for r in rows if r["finalize_returned_after_s"] < 1.9]
    assert not early, f"MPI_Finalize returned before rank 0 entered it: {early}"


def assert_no_rank_left(job_program: str) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = subprocess.run(["pgrep", "-f", job_program], capture_output=True, text=True).stdout.split()
        if not left:
            return
        time.sleep(0.1)
    raise AssertionError(f"processes of {job_program} still running: {left}")


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_timeout_kills_every_rank(two_clusters, mpi):
    prog = program(mpi, "where")
    started = time.monotonic()
    done = wanmpi("run", "--mpi", mpi, "--timeout", "4", "-n", "4", prog, "--sleep", "120")
    assert done.returncode == launch.EXIT_TIMEOUT, done.stdout + done.stderr
    assert "killing every rank" in done.stdout
    assert time.monotonic() - started < 60
    assert_no_rank_left(prog)
    for node in two_clusters.nodes:
        assert net.namespace_pids(node.netns) == []


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_ctrl_c_kills_every_rank(two_clusters, mpi):
    prog = program(mpi, "where")
    job = subprocess.Popen([*WANMPI, "run", "--mpi", mpi, "-n", "4", prog, "--sleep", "120"],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(net.namespace_pids("wm-b0")) == 0:
        time.sleep(0.1)
    time.sleep(1)
    job.send_signal(signal.SIGINT)
    assert job.wait(timeout=30) == launch.EXIT_INTERRUPTED
    assert_no_rank_left(prog)
    for node in two_clusters.nodes:
        assert net.namespace_pids(node.netns) == []


def test_job_across_a_private_cluster_is_refused_without_relays(private_cluster):
    refused = wanmpi("run", "-n", "2", "--map", "pub0,priv0", program("openmpi", "where"), timeout=30)
    assert refused.returncode == 2 and "cluster 'priv' is private" in refused.stderr
    inside = wanmpi("run", "-n", "2", "--map", "priv0,priv1", program("openmpi", "where"))
    assert inside.returncode == 0, inside.stdout + inside.stderr
    assert ranks_and_hosts(inside.stdout) == ["priv0", "priv1"]
