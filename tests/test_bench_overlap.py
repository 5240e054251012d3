"""`wanmpi bench overlap` on the testbed: every variant runs the collective
alone, the compute alone and both together, every result checked by the
program, and the table and the result file show them (no timing asserted);
bad arguments stop it before anything runs."""
from __future__ import annotations

import json

import pytest

from conftest import wanmpi

VARIANTS = ("mpi", "wanmpi-test", "wanmpi-thread")


def test_overlap_runs_every_variant_with_checked_results(two_clusters, tmp_path):
    out = tmp_path / "overlap.json"
    done = wanmpi("bench", "overlap", "-t", "examples/two-clusters.toml", "--mpis", "openmpi", "--bytes", "256KiB",
                  "--reps", "2", "--json", str(out), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["bench"] == "overlap" and doc["counts"] == {"cases": 3, "ok": 3, "failed": 0}
    assert doc["settings"]["delay_ms"] == 10 and doc["settings"]["coll"] == "iallreduce"
    for case in doc["cases"]:
        m = case["metrics"]
        assert case["delay_ms"] == 10 and case["params"] == {"coll": "iallreduce", "bytes": 256 << 10}
        assert m["check"] == "ok" and m["bytes"] == 256 << 10 and m["ranks"] == 8 and m["reps"] == 2, m
        assert [r["rep"] for r in m["repetitions"]] == [1, 2]
        assert all(r["check"] == "ok" and r["t_comm_s"] > 0 and r["t_comp_s"] > 0 and r["wait_s"] >= 0
                   for r in m["repetitions"]), m
        # the thread variant never calls MPI_Test: only a progress thread could advance its collective
        if case["variant"] == "wanmpi-thread":
            assert m["test_every_s"] == 0 and all(r["tests"] == 0 for r in m["repetitions"]), m
        else:
            assert m["test_every_s"] == 0.001, m
    assert {(s["variant"], s["mpi"]) for s in doc["summary"]} == {(v, "openmpi") for v in VARIANTS}
    for variant in VARIANTS:
        assert f"| {variant} | openmpi | " in done.stdout, done.stdout


@pytest.mark.parametrize("option, value, message", [
    ("--coll", "ireduce", "--coll: unknown collective 'ireduce' (choose from iallreduce, ibcast, ialltoall, "
                          "iallgather)"),
    ("--bytes", "4B", "--bytes must be between 8 bytes and 256 MiB, got 4B"),
    ("--bytes", "lots", "--bytes: cannot read 'lots' as a size"),
    ("--variants", "wanmpi-spin", "--variants: unknown 'wanmpi-spin'"),
    ("--delay", "-1", "--delay: -1 ms is outside [0, 1000]"),
    ("--ranks", "1", "--ranks must be at least 2, got 1"),
    ("--ranks", "9", "--ranks: 9 is outside [2, 8] (one rank per node at most)"),
])
def test_bad_arguments_stop_before_any_job(option, value, message):
    done = wanmpi("bench", "overlap", "-t", "examples/two-clusters.toml", option, value, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "testbed up" not in done.stderr and not done.stdout
