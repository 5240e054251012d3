"""`wanmpi sim --simgrid` (sim/library.py): the SimGrid library `make simgrid`
builds with lib/smpi/simgrid-*.patch (a set of detached messages; host
leaders read from the platform) simulates the same times as Debian's, and a
library smpimain would not load is refused, not skipped over by the
loader."""
from __future__ import annotations

import json
import subprocess

import pytest

from wanmpi.bench.cases import BenchError
from wanmpi.cli.main import main
from wanmpi.sim import library

from conftest import REPO
from test_sim import THREE, nothing_left_behind, testbed_lock  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def patched():
    """`make simgrid` (nothing to do once built: `make test` builds it first)."""
    done = subprocess.run(["make", "-s", "-C", str(REPO), "simgrid"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return library.choose("patched")


def simulated(tmp_path, name: str, *extra: str) -> dict:
    out = tmp_path / f"{name}.json"
    assert main(["sim", "-t", str(THREE), "--nodes-per-cluster", "6", "--nic-rate", "10Gbit", "--wan-rate", "100Gbit",
                 "--delay", "1ms", "--coll", "bcast", "allreduce", "alltoall", "--bytes", "32KiB", "1MiB",
                 "--json", str(out), "--timeout", "600", *extra]) == 0
    document = json.loads(out.read_text())
    assert document["counts"] == {"cases": 1, "ok": 1, "failed": 0}
    return document


def times(document: dict) -> list:
    rows = document["cases"][0]["metrics"]["rows"]
    return [(r["op"], r["bytes"], r["min_s"], r["median_s"], r["max_s"]) for r in rows]


@pytest.mark.parametrize("variant", [(), ("--no-wanmpi", "--mpi-coll", "ompi"), ("--no-wanmpi", "--mpi-coll", "mpich")],
                         ids=["wanmpi", "ompi", "mpich"])
def test_the_patched_library_simulates_debians_times_to_the_microsecond(tmp_path, patched, variant):
    """18 ranks over three sites, every collective at 32 KiB (detached, eager
    sends: the list the first patch changes) and 1 MiB, through SMPI's MPICH
    algorithms (whose first call on a communicator runs the set-up the second
    patch changes) under libwanmpi and alone, and its Open MPI ones; collbench
    checks every result on both."""
    system = simulated(tmp_path, "system", "--simgrid", "system", *variant)
    ours = simulated(tmp_path, "patched", "--simgrid", "patched", *variant)
    assert system["settings"]["simgrid"] == "Debian's libsimgrid 3.32"
    assert ours["settings"]["simgrid"] == (f"{patched} (3.32 with lib/smpi/simgrid-activities.patch, "
                                           "lib/smpi/simgrid-comm-setup.patch)")
    assert len(times(ours)) == 6 and times(ours) == times(system)


def test_auto_takes_the_patched_library_once_built(patched):
    assert library.choose("auto") == patched
    assert library.loaded_by_smpimain(patched) == str(patched)
    assert library.choose("system") is None


def test_a_library_smpimain_would_not_load_is_refused(tmp_path, monkeypatch, capsys):
    """Not a library: the loader would warn and run Debian's; wanmpi sim stops
    and says so. Not built: it names `make simgrid`."""
    fake = tmp_path / library.SONAME
    fake.write_text("not a library\n")
    monkeypatch.setattr(library, "patched_path", lambda: fake)
    with pytest.raises(BenchError, match=r"smpimain would not run on it \(the loader gives it "
                                         r"/\S*/libsimgrid.so.3.32\); `make simgrid` builds it again"):
        library.choose("auto")
    fake.unlink()
    assert library.choose("auto") is None
    assert main(["sim", "-t", str(THREE), "--simgrid", "patched"]) == 2
    assert f"--simgrid patched: {fake} is not built (`make simgrid` builds it" in capsys.readouterr().err


def test_a_path_ld_preload_cannot_carry_is_refused(tmp_path):
    with pytest.raises(BenchError, match="has a blank or a colon"):
        library.smpirun_wrapper(tmp_path / "a b" / library.SONAME)
