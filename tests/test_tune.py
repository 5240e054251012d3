"""`wanmpi tune` on the default two-cluster testbed with a tiny configuration:
it measures the three settings, writes a rules file that reads back and that
a job runs with (collbench checks every result exactly), the results in the
bench format, and puts the testbed back; bad arguments are refused with
exit status 2 before anything runs."""
from __future__ import annotations

import io
import json

import pytest

from conftest import program, wanmpi
from test_bench_runner import BASE, FakeTestbed
from wanmpi import rules
from wanmpi.bench import runner as bench_runner, tune
from wanmpi.testbed import emulator, net

OPS = "bcast,allreduce,alltoall,barrier"
SIZES = "64,256K"


def test_settings_alternate_in_rounds_and_the_best_median_of_each_counts(tmp_path, monkeypatch, capsys):
    seen = []

    def job(case, t, args, timeout):             # ours wins at 1 MiB only, and only in round 2
        seen.append((case.delay_ms, case.rep, case.variant))
        big = {"multi": 3.0 - case.rep, "single": 2.5, "mpi": 1.5}[case.variant]
        return {"rows": [{"op": "bcast", "bytes": 64, "ranks": 8, "median_s": 1.0},
                         {"op": "bcast", "bytes": 1 << 20, "ranks": 8, "median_s": big},
                         {"op": "barrier", "bytes": 64, "ranks": 8, "median_s": 0.5},
                         {"op": "barrier", "bytes": 1 << 20, "ranks": 8, "median_s": 0.4}]}
    monkeypatch.setattr(tune, "execute", job)
    monkeypatch.setattr(tune.paths, "program", lambda mpi, name: tmp_path)       # "built"
    runner = bench_runner.Runner(BASE, FakeTestbed(up=BASE), io.StringIO())
    out = tmp_path / "t.rules"
    assert tune.run(BASE, ["openmpi"], [0.0, 10.0], ["bcast", "barrier"], "64,1M", 2, out, None, 60, "cmd",
                    runner) == 0
    assert seen[:6] == [(0.0, r, s) for r in (1, 2) for s in ("multi", "single", "mpi")]
    text = out.read_text()
    assert "# command: cmd\n" in text
    assert text.split("#\n", 1)[1] == (
        "\n# bcast, openmpi, 0 ms: best of ours / openmpi's own: 64:1.00 1M:0.67\n"
        "# bcast, openmpi, 10 ms: best of ours / openmpi's own: 64:1.00 1M:0.67\n"
        "bcast                mpi        mpi=openmpi clusters=2 ranks=8 bytes=-8K\n"
        "bcast                multilane  mpi=openmpi clusters=2 ranks=8 bytes=8K-1048577\n"
        "\n# barrier, openmpi, 0 ms: best of ours / openmpi's own: any:1.00\n"
        "# barrier, openmpi, 10 ms: best of ours / openmpi's own: any:1.00\n"
        "barrier              mpi        mpi=openmpi clusters=2 ranks=8\n")
    table = capsys.readouterr().out
    assert "  bcast                     1M  1000.000  2500.000  1500.000     0.67  multilane" in table


def test_tune_writes_rules_that_parse_and_a_job_runs_with(two_clusters, tmp_path):
    out, results = tmp_path / "tiny.rules", tmp_path / "tiny.json"
    done = wanmpi("tune", "-t", "examples/two-clusters.toml", "--mpis", "openmpi", "--delays", "5",
                  "--sizes", SIZES, "--ops", OPS, "--rounds", "1", "-o", str(out), "--json", str(results),
                  timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"rules: {out}" in done.stdout and "wanmpi run --rules" in done.stdout
    text = out.read_text()
    assert text.startswith("wanmpi-rules 1\n# written by `wanmpi tune`")
    parsed = rules.parse(text, str(out))
    assert {r.collective for r in parsed} == set(OPS.split(","))
    assert all(r.mpi == "openmpi" and r.ranges["clusters"] == rules.Range(2, 3)
               and r.ranges["ranks"] == rules.Range(8, 9) and "delay" not in r.ranges for r in parsed)
    doc = json.loads(results.read_text())
    assert doc["format"] == "wanmpi-bench/1" and doc["bench"] == "tune"
    assert doc["counts"] == {"cases": 3, "ok": 3, "failed": 0}
    assert {c["variant"] for c in doc["cases"]} == {"multi", "single", "mpi"}
    assert len(doc["summary"]) == 3 * 2 + 1               # bcast, allreduce, alltoall at 2 sizes; barrier
    assert all(set(r["times"]) == {"multi", "single", "mpi"} for r in doc["summary"])
    assert all(v["delay_us"] == 10_000 for v in emulator.settings().values())    # the topology's delay is back
    state = net.State.load()
    assert state is not None and state.topology_text == two_clusters.text

    ran = wanmpi("run", "--rules", str(out), "-n", "8", program("openmpi", "collbench"), "--ops", OPS,
                 "--sizes", SIZES, "--iters", "1", timeout=300)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert ran.stdout.count('"op"') == 8 and "wanmpi: rules" not in ran.stderr


@pytest.mark.parametrize("args, problem", [
    (["--ops", "bcast,neighbor_alltoall"], "--ops: unknown 'neighbor_alltoall'"),
    (["--sizes", "64,4Q"], "--sizes: '4Q' is not a size"),
    (["--sizes", "0"], "--sizes: '0' is not a size"),
    (["--mpis", "lam"], "--mpis: unknown 'lam'"),
    (["--delays", "ten"], "--delays: 'ten' is not a delay in ms"),
    (["--delays", "2000"], "--delays: 2000 ms is outside [0, 1000]"),
    (["--rounds", "0"], "--rounds must be at least 1"),
])
def test_tune_refuses_bad_arguments(args, problem):
    done = wanmpi("tune", *args, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"wanmpi: error: {problem}"), done.stderr
