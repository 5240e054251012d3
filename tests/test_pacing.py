"""Pacing through libwanmpi on the testbed, both MPIs: the attributes pace
exactly the WAN sockets (read back from the sockets), bad values are MPI
errors, the rate-managed all-to-all gives exactly the MPI library's results
and puts the rates back, bad settings are named, and `wanmpi bench pacing`
runs and restores the testbed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import EVERY_MPI, MPIS, wanmpi
from test_libwanmpi import calls, run, stats

ALLOWED_CC = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_attributes_pace_exactly_the_wan_sockets_and_refuse_bad_values(two_clusters, mpi):
    # start paced (the topology's [pacing] mode = "fixed" would do the same)
    done = run(mpi, "pacecheck", env=["WANMPI_PACING_RATE=2000000"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checks ok" in done.stdout
    # each refused value was named on stderr
    assert "WANMPI_MATB (KB/s): 0 refused" in done.stderr
    assert "put of WANMPI_MAXRATE" in done.stderr


@pytest.mark.parametrize("mpi", MPIS)
def test_fortran_programs_reach_the_attributes(two_clusters, mpi):
    done = run(mpi, "pacecheck_f90")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pacecheck_f90: ok" in done.stdout


@pytest.mark.parametrize("mpi,algorithm,rate", [
    ("openmpi", "scheduled", "auto"), ("mpich", "scheduled", "auto"),
    ("openmpi", "scheduled", "matb"), ("openmpi", "paced", "matb"), ("mpich", "paced", "auto"),
])
def test_rate_managed_alltoall_is_exact(two_clusters, tmp_path, mpi, algorithm, rate):
    done = run(mpi, "a2acheck", env=[f"WANMPI_ALLTOALL={algorithm}", f"WANMPI_ALLTOALLV={algorithm}",
                                     f"WANMPI_ALLTOALL_RATE={rate}", f"WANMPI_STATS={tmp_path}/stats-%r.json",
                                     "WANMPI_DEBUG=1"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a2acheck: 414 cases ok" in done.stdout
    # MPICH's own all-to-all runs every flow at once while paced (docs/pacing.md)
    steered = "alltoall: the MPI's own algorithm is scattered for this paced call" in done.stderr
    assert steered == (mpi == "mpich" and algorithm == "paced")
    ranks = stats(tmp_path)
    assert len(ranks) == 8
    for coll in ("alltoall", "alltoallv"):
        assert calls(ranks, coll, algorithm) > 0, f"{coll} never took the {algorithm} path"
    assert calls(ranks, "alltoall", "paced") > 0            # MPI_IN_PLACE goes to the paced path
    assert all(r["pacing"]["shim"] for r in ranks)
    assert sum(r["pacing"]["rate_changes"] for r in ranks) > 0, "nothing was paced"
    assert all(r["pacing"]["wan_rate"] == 0 for r in ranks), "the WAN rate was not put back"


@pytest.mark.parametrize("setting,message", [
    ("WANMPI_ALLTOALL=multilane", "WANMPI_ALLTOALL=multilane: expected scheduled, paced or mpi"),
    ("WANMPI_ALLTOALL_RATE=fast", "WANMPI_ALLTOALL_RATE=fast: expected matb, auto or off"),
    ("WANMPI_MATB_DIVISOR=0", "WANMPI_MATB_DIVISOR=0: expected an integer from 1 to 64"),
    ("WANMPI_ALLREDUCE_RATE=matb", "WANMPI_ALLREDUCE_RATE=matb: expected auto or off"),
])
def test_bad_alltoall_settings_are_named(two_clusters, setting, message):
    done = run("openmpi", "a2acheck", env=[setting], timeout=120)
    assert done.returncode != 0
    assert message in done.stderr


def test_bench_pacing_runs_measures_rtos_and_restores_the_testbed(two_clusters, tmp_path):
    allowed = ALLOWED_CC.read_text()
    out = tmp_path / "pacing.json"
    done = wanmpi("bench", "pacing", "--kernels", "lu,is", "--variants", "ompi,wanmpi", "--delays", "2",
                  "--cc", "cubic", "--reps", "1", "--json", str(out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(out.read_text())
    assert document["format"] == "wanmpi-bench/1" and document["bench"] == "pacing"
    assert document["counts"] == {"cases": 4, "ok": 4, "failed": 0}
    rows = document["summary"]
    assert {(r["kernel"], r["variant"]) for r in rows} == {(k, v) for k in ("lu", "is") for v in ("ompi", "wanmpi")}
    assert all(r["cc"] == "cubic" and r["delay_ms"] == 2 and r["median_s"] > 0 and r["rto"][0] >= 0 for r in rows)
    assert "speed-up over Open MPI alone" in done.stdout
    assert ALLOWED_CC.read_text() == allowed                 # the host's list is back
    link = json.loads(wanmpi("link", "show", "--json").stdout)["links"][0]["a_to_b"]
    assert link["delay_us"] == 10_000                         # the topology's delay is back


def test_bench_pacing_refuses_unknown_kernels_and_variants():
    done = wanmpi("bench", "pacing", "--kernels", "ep")
    assert done.returncode == 2 and "--kernels: unknown 'ep'" in done.stderr
    done = wanmpi("bench", "pacing", "--variants", "fast")
    assert done.returncode == 2 and "--variants: unknown 'fast'" in done.stderr


def test_paced_alltoall_leaves_an_algorithm_the_job_chose(two_clusters):
    """MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM set by the job: libwanmpi does not
    touch MPICH's choice, and the results stay exact."""
    done = run("mpich", "a2acheck", env=["WANMPI_ALLTOALL=paced", "WANMPI_DEBUG=1",
                                         "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM=pairwise"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a2acheck: 414 cases ok" in done.stdout
    assert "algorithm is scattered" not in done.stderr


@pytest.mark.parametrize("mpi", EVERY_MPI)
@pytest.mark.parametrize("rate", ["auto", "off"])
def test_paced_allreduce_is_exact_and_puts_the_rates_back(two_clusters, tmp_path, mpi, rate):
    """The multi-lane allreduce paces its ring and WAN sockets while it runs
    (WANMPI_ALLREDUCE_RATE=auto, the default), or not at all (off)."""
    done = run(mpi, "collcheck", "--seed", "31", "--cases", "40", "--max-bytes", "4000000", "--only", "allreduce",
               env=[f"WANMPI_ALLREDUCE_RATE={rate}", f"WANMPI_STATS={tmp_path}/stats-%r.json", "WANMPI_DEBUG=1"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 40 cases ok" in done.stdout
    ranks = stats(tmp_path)
    assert calls(ranks, "allreduce", "multilane") > 0
    paced = "allreduce: pace the ring at" in done.stderr
    assert paced == (rate == "auto")
    if paced:
        assert sum(r["pacing"]["rate_changes"] for r in ranks) > 0
    assert all(r["pacing"]["wan_rate"] == 0 for r in ranks), "the WAN rate was not put back"


@pytest.mark.parametrize("mpi", MPIS)
def test_alltoallv_is_paced_by_the_fan_in_of_its_receivers(two_clusters, mpi):
    """tests/programs/halo: an MPI_Alltoallv to the two ring neighbours, then
    to every rank, 256 KiB per block, exact. The sockets inside a cluster
    get a receiver NIC's share by its fan-in: 0.95 x 12.5 MB/s / 2 in the
    halo exchange; 0.95 x 12.5 MB/s / 7 in the full one (it was 1/7 for
    both: the halo's flows at 1.7 MB/s, MPICH's alltoallv0 1.35x slower
    with wanmpi than alone)."""
    done = run(mpi, "halo", env=["WANMPI_DEBUG=1"], timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "halo: ok" in done.stdout
    local = [line.split(" at ")[1] for line in done.stderr.splitlines()
             if line.startswith("wanmpi[0]: alltoall: pace sockets inside the cluster at ")]
    assert local == [f"{int(0.95 * 12.5e6 / 2)} B/s", f"{int(0.95 * 12.5e6 / 7)} B/s"]
