"""mpi4py programs under `wanmpi run` (docs/mpi4py.md): the buffer API on
NumPy arrays of every common dtype and the pickle API exact across both
clusters under each MPI, with WANMPI_STATS proving every collective the
program made reached libwanmpi (under MPICH, mpi4py calls the MPI-4
large-count bindings); the MPI alone loading the launcher's MPI, not the
first libmpi found; an mpi4py built for another MPI refused."""
from __future__ import annotations

import json
import shutil
import sys

import pytest

from conftest import EVERY_MPI, MPIS, REPO, exact_reductions, wanmpi
from test_libwanmpi import calls, stats

CHECK = str(REPO / "tests" / "programs" / "mpi4py_check.py")
LIBRARY = {"openmpi": "Open MPI v4.1", "mpich": "MPICH Version:      5.", "openmpi5": "Open MPI v5.0",
           "intelmpi": "Intel(R) MPI Library 2021"}
WRAPPED = ("bcast", "allreduce", "reduce", "allgather", "allgatherv", "alltoall", "reduce_scatter_block", "barrier",
           "gather", "gatherv", "scatter", "scatterv", "scan", "exscan")


def check(mpi: str, mode: str, *options: str) -> tuple[dict, str]:
    """Run mpi4py_check.py with 8 ranks; its result line and the whole output."""
    done = wanmpi("run", "--mpi", mpi, "-n", "8", "--timeout", "400", *exact_reductions(mpi), *options, sys.executable, CHECK, mode,
                  timeout=450)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    assert len(rows) == 1 and rows[0]["check"] == "ok" and rows[0]["ranks"] == 8, done.stdout
    assert rows[0]["library"].startswith(LIBRARY[mpi]), rows[0]
    return rows[0], done.stdout


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_buffer_api_is_exact_and_every_call_reaches_libwanmpi(two_clusters, mpi, tmp_path):
    row, _ = check(mpi, "buffer", "-x", f"WANMPI_STATS={tmp_path}/stats-%r.json")
    ranks = stats(tmp_path)
    assert len(ranks) == 8
    for r in ranks:
        reached = sum(r["collectives"].get(c, {}).get("calls", 0) for c in WRAPPED)
        assert reached == row["calls"], f"rank {r['rank']}: {reached} of {row['calls']} calls reached libwanmpi"
    # the 1 MiB arrays take the multi-lane paths, the all-to-all the scheduled one
    assert calls(ranks, "bcast", "multilane") > 0 and calls(ranks, "allreduce", "multilane") > 0
    assert calls(ranks, "alltoall", "scheduled") == 8 * ranks[0]["collectives"]["alltoall"]["calls"]


@pytest.mark.parametrize("mpi", EVERY_MPI)
@pytest.mark.parametrize("with_wanmpi", [True, False], ids=["wanmpi", "mpi-alone"])
def test_pickle_api_is_exact_with_the_launchers_mpi(two_clusters, mpi, with_wanmpi, tmp_path):
    options = ["-x", f"WANMPI_STATS={tmp_path}/stats-%r.json"] if with_wanmpi else ["--no-wanmpi"]
    check(mpi, "pickle", *options)
    if with_wanmpi:
        ranks = stats(tmp_path)
        assert len(ranks) == 8
        for r in ranks:     # comm.bcast, allgather, alltoall: 12 each, on MPI_Bcast, Allgather, Alltoall(v)
            assert all(r["collectives"].get(c, {}).get("calls", 0) >= 12 for c in ("bcast", "allgather", "alltoallv"))


def test_mpi4py_built_for_another_mpi_is_refused(two_clusters, tmp_path):
    """An mpi4py built from source holds one build of its extension, for one
    MPI (this one: MPICH's, under the name a source build gives it)."""
    built = tmp_path / "mpi4py"
    built.mkdir()
    (built / "__init__.py").write_text("")
    wheel = REPO / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    extension = next((wheel / "mpi4py").glob("MPI.mpich.*.so"))
    shutil.copy(extension, built / extension.name.replace("MPI.mpich.", "MPI."))
    refused = wanmpi("run", "--mpi", "openmpi", "-n", "2", "-x", f"PYTHONPATH={tmp_path}", sys.executable, CHECK,
                     "pickle", timeout=60)
    assert refused.returncode == 2
    # libmpi.so.12 is MPICH's and Intel MPI's soname alike: the message names both
    assert refused.stderr == (f"wanmpi: error: {sys.executable} imports mpi4py from {built}, built for mpich or "
                              "intelmpi, but "
                              "--mpi is openmpi (libmpi.so.40): install an mpi4py for openmpi (docs/mpi4py.md) or "
                              "run with --mpi mpich\n")
