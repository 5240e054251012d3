"""bench_runner and the suite's plan, results and plots, without a testbed: a
fake testbed records what the runner asks of it, and fake jobs succeed, fail
or take time as the test says."""
from __future__ import annotations

import io
import json
import tomllib

import pytest

from conftest import REPO, wanmpi
from wanmpi import topo
from wanmpi.bench import cases as bc
from wanmpi.bench import runner as br
from wanmpi.bench import suite as bench_suite
from wanmpi.bench.job_output import reason


class FakeTestbed:
    def __init__(self, up: topo.Topology | None = None, fail_up: str | None = None):
        self.up, self.fail_up, self.log, self.broken = up, fail_up, [], False
        self.links = {("a-b", "a_to_b"): {"delay_us": 10_000}}

    def current(self):
        return self.up

    def bring_up(self, t):
        self.log.append(("up", t.source))
        if self.fail_up and self.fail_up in t.source:
            raise bc.BenchError("no namespaces today")
        self.up = t

    def take_down(self):
        self.log.append(("down",))
        self.up = None

    def set_delay(self, delay_ms):
        self.log.append(("delay", delay_ms))

    def link_settings(self):
        return dict(self.links)

    def restore_links(self, saved):
        self.log.append(("restore",))

    def healthy(self):
        return not self.broken

    def emulator_counters(self):
        return {("a-b", "a_to_b"): {"drop_queue": 1, "drop_loss": 0, "late_200us": 0, "late_1ms": 0,
                                    "tx_packets": 100}}


BASE = topo.load(REPO / "examples/two-clusters.toml")


def fake_job(case, t):
    if case.kernel == "ft" and case.variant == "pacing":
        raise bc.BenchError("exit status 1: ft: rank 3, from 5, element 7: got 1, want 2")
    single = case.topology.name == "single-cluster"
    slow = 1.0 if single else 1.0 + (case.delay_ms or 0) / (5 if case.variant == "plain" else 10)
    return {"per_iter_s": slow * (1 + 0.1 * (case.rep - 1)), "seconds": 1.0, "iters": 1, "ranks": len(t.nodes)}


def test_plan_is_the_cross_product_delay_major_with_repetitions_interleaved():
    cases = bc.plan(["cg", "ep"], ["plain", "all"], ["openmpi", "mpich"], [0, 10], 3)
    assert len(cases) == 2 * 2 * 2 * 2 * 3
    assert [c.delay_ms for c in cases] == [0] * 24 + [10] * 24
    first = [(c.kernel, c.mpi, c.rep, c.variant) for c in cases[:4]]
    assert first == [("cg", "openmpi", 1, "plain"), ("cg", "openmpi", 1, "all"),
                     ("cg", "openmpi", 2, "plain"), ("cg", "openmpi", 2, "all")]
    assert len(set(cases)) == len(cases)


def test_suite_plan_adds_one_single_cluster_reference_per_kernel_mpi_and_repetition():
    cases = bench_suite.cases(["cg", "is"], ["plain", "all"], ["openmpi"], [0, 5], 2, "S")
    refs = [c for c in cases if c.variant == "single-cluster"]
    assert len(cases) == 2 * 2 * 1 * 2 * 2 + len(refs) and len(refs) == 2 * 1 * 2
    assert all(c.topology is bc.SINGLE_CLUSTER and c.delay_ms is None for c in refs)
    assert all(c.topology is bc.BASE for c in cases if c.variant != "single-cluster")
    assert all(c.param("class") == "S" for c in cases)


def test_single_cluster_topology_holds_every_node_on_one_lan():
    t = bc.SINGLE_CLUSTER.derive(BASE)
    one = t.cluster("one")
    assert len(one.nodes) == len(BASE.nodes) == 8
    assert one.nic_bps == BASE.clusters[0].nic_bps and one.port_buffer == BASE.clusters[0].port_buffer
    ranks = bc.SINGLE_CLUSTER.rank_nodes(t)
    assert [n.name for n in ranks] == [f"one{i}" for i in range(8)]      # the idle cluster runs nothing
    assert t.text != BASE.text and "derived by `wanmpi bench`" in t.text
    assert bc.BASE.derive(BASE) is BASE


def test_relays_hook_sets_relays_on_every_cluster():
    spec = bc.with_relays(2)
    raw = spec.transform(tomllib.loads(BASE.text))
    assert [c["relays"] for c in raw["cluster"]] == [2, 2]
    assert tomllib.loads(bc.to_toml(raw)) == raw
    # the base's busy_poll stays (how the relays run), its traffic settings do not
    based = tomllib.loads(BASE.text + '\n[relay]\nbusy_poll = "50us"\nconnections = 4\n')
    assert spec.transform(based)["relay"] == {"busy_poll": "50us"}
    assert "relay" not in raw


@pytest.mark.parametrize("name", ["two-clusters.toml", "three-clusters.toml", "private-cluster.toml",
                                  "real-clusters.toml"])
def test_topology_files_survive_the_toml_writer(name):
    raw = tomllib.loads((REPO / "examples" / name).read_text())
    assert tomllib.loads(bc.to_toml(raw)) == raw


def test_runner_groups_by_topology_and_leaves_no_testbed_when_none_was_up():
    fake = FakeTestbed()
    cases = bench_suite.cases(["cg"], ["plain", "all"], ["openmpi"], [0, 10], 1, "S")
    stream = io.StringIO()
    records = br.Runner(BASE, fake, stream).run(cases, fake_job)
    ups = [e for e in fake.log if e[0] == "up"]
    assert ups == [("up", BASE.source), ("up", f"{BASE.source} [single-cluster]")]   # once per topology
    assert fake.log[-1] == ("down",) and fake.up is None
    assert [e[1] for e in fake.log if e[0] == "delay"] == [0, 0, 10, 10]   # not for the reference
    assert all(r.ok for r in records)
    assert records[0].env["emulator"] == {"drops": 0, "late_200us": 0, "late_1ms": 0, "released": 0,
                                          "behind": False}
    assert "load_avg_1m" in records[0].env and "cpu_idle" in records[0].env


def test_runner_runs_the_topology_that_is_up_first_and_brings_it_back():
    single = bc.SINGLE_CLUSTER.derive(BASE)
    fake = FakeTestbed(up=single)
    cases = bench_suite.cases(["cg"], ["plain"], ["openmpi"], [2], 1, "S")
    br.Runner(BASE, fake, io.StringIO()).run(cases, fake_job)
    ups = [e[1] for e in fake.log if e[0] == "up"]
    assert ups == [BASE.source, single.source]        # the reference ran first, then the base, then back
    assert fake.up is single or fake.up.text == single.text


def test_a_failed_case_is_recorded_with_its_error_and_the_run_goes_on():
    fake = FakeTestbed(up=BASE)
    cases = bench_suite.cases(["ft", "ep"], ["plain", "pacing"], ["openmpi"], [10], 2, "S")
    stream = io.StringIO()
    records = br.Runner(BASE, fake, stream).run(cases, fake_job)
    failed = [r for r in records if not r.ok]
    assert {(r.case.kernel, r.case.variant) for r in failed} == {("ft", "pacing")} and len(failed) == 2
    assert all("rank 3, from 5" in r.error for r in failed)
    assert sum(r.ok for r in records) == len(records) - 2
    lines = stream.getvalue().splitlines()
    case_lines = [l for l in lines if l.startswith("[")]
    assert len(case_lines) == len(cases)                       # one line per case
    assert all("elapsed, ETA" in l for l in case_lines)
    assert sum("FAILED" in l for l in case_lines) == 2
    assert fake.up is BASE and ("down",) not in fake.log       # the testbed that was up stays up


def test_a_testbed_that_cannot_come_up_fails_its_group_only():
    fake = FakeTestbed(up=BASE, fail_up="single-cluster")
    cases = bench_suite.cases(["cg"], ["plain"], ["openmpi"], [0], 1, "S")
    records = br.Runner(BASE, fake, io.StringIO()).run(cases, fake_job)
    assert [r.status for r in records] == ["ok", "failed"]
    assert "testbed single-cluster: no namespaces today" in records[1].error


def test_interrupt_stops_the_run_and_still_restores_the_testbed():
    fake = FakeTestbed()

    def interrupted(case, t):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        br.Runner(BASE, fake, io.StringIO()).run(bc.plan(["cg"], ["plain"], ["openmpi"], [0], 1), interrupted)
    assert ("restore",) in fake.log and fake.up is None


def run_suite(tmp_path):
    fake = FakeTestbed(up=BASE)
    runner = br.Runner(BASE, fake, io.StringIO())
    kernels, variants = ["cg", "ft", "is"], ["plain", "collectives", "pacing", "all"]
    status = bench_suite.run(BASE, kernels, variants, ["openmpi", "mpich"], [0.0, 10.0], 2, "S",
                             str(tmp_path / "out"), str(tmp_path / "suite.json"), 60, runner=runner)
    return status, json.loads((tmp_path / "suite.json").read_text())


def test_suite_results_follow_the_documented_format(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_suite, "execute", lambda case, t, timeout, rules=None: fake_job(case, t))
    status, doc = run_suite(tmp_path)
    assert status == 1                                          # some cases failed
    for key in ("format", "bench", "command", "started", "seconds", "git", "machine", "topology",
                "settings", "counts", "cases", "summary"):
        assert key in doc, key
    assert doc["format"] == "wanmpi-bench/1" and doc["bench"] == "suite"
    assert doc["counts"]["cases"] == len(doc["cases"]) == 3 * 4 * 2 * 2 * 2 + 3 * 2 * 2
    assert doc["counts"]["failed"] == 2 * 2 * 2
    case = doc["cases"][0]
    assert set(case) == {"id", "kernel", "variant", "mpi", "delay_ms", "rep", "topology", "params", "status",
                         "error", "seconds", "metrics", "env"}
    assert set(case["env"]) >= {"load_avg_1m", "cpu_idle", "emulator"}
    assert doc["topology"]["text"] == BASE.text and doc["git"]["commit"]
    rows = {(r["kernel"], r["mpi"], r["variant"], r["delay_ms"]): r for r in doc["summary"]}
    plain, best = rows[("cg", "openmpi", "plain", 10.0)], rows[("cg", "openmpi", "all", 10.0)]
    assert plain["best_s"] == pytest.approx(3.0) and plain["median_s"] == pytest.approx(3.15)
    assert plain["relative_best"] == pytest.approx(1 / 3, abs=1e-3)       # single cluster: 1.0 s
    assert best["speedup_over_plain"] == pytest.approx(1.5)
    assert rows[("ft", "mpich", "pacing", 10.0)]["ok"] == 0 and rows[("ft", "mpich", "pacing", 10.0)]["best_s"] is None
    text = capsys.readouterr().out
    assert "| kernel | delay | plain | collectives | pacing | all | single cluster, ms/iter |" in text
    assert "| cg | 10 ms | 0.33 (0.33) | 0.50 (0.50) | 0.50 (0.50) | 0.50 (0.50) | 1000.0 |" in text
    assert "| ft | 10 ms | 0.33 (0.33) | 0.50 (0.50) | failed | 0.50 (0.50) | 1000.0 |" in text
    assert "ft openmpi pacing 10 ms rep 1 class=S: exit status 1" in text


def test_suite_writes_markdown_and_png_plots(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_suite, "execute", lambda case, t, timeout, rules=None: fake_job(case, t))
    run_suite(tmp_path)
    out = tmp_path / "out"
    names = sorted(p.name for p in out.iterdir())
    assert names == ["suite-relative-mpich.png", "suite-relative-openmpi.png", "suite-techniques.png",
                     "suite.json", "suite.md"]
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "Command: `wanmpi" in (out / "suite.md").read_text()


def test_report_redraws_a_saved_result_file(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_suite, "execute", lambda case, t, timeout, rules=None: fake_job(case, t))
    run_suite(tmp_path)
    again = tmp_path / "again"
    done = wanmpi("bench", "report", str(tmp_path / "suite.json"), "--out", str(again), timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in again.iterdir()) == ["suite-relative-mpich.png", "suite-relative-openmpi.png",
                                                        "suite-techniques.png", "suite.md"]
    (tmp_path / "other.json").write_text('{"results": []}')
    done = wanmpi("bench", "report", str(tmp_path / "other.json"))
    assert done.returncode == 2 and "not a wanmpi-bench/1 result file" in done.stderr


def test_failure_reason_leaves_out_the_launchers_boilerplate():
    errors = ("cg transpose: rank 2, from 6, message 3, element 5: got 1, want 2\n"
              "--------------------------------------------------------------------------\n"
              "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 1.\n"
              "[a0:123] plm:rsh: Warning: setpgid failed\n")
    assert reason(errors, "") == "cg transpose: rank 2, from 6, message 3, element 5: got 1, want 2"
    assert reason("", "") == "(no output)"


@pytest.mark.parametrize("args, message", [
    (["--kernels", "cg,xx"], "--kernels: unknown 'xx'"),
    (["--variants", "fast"], "--variants: unknown 'fast'"),
    (["--mpis", "lam"], "--mpis: unknown 'lam'"),
    (["--delays", "soon"], "--delays: 'soon' is not a delay"),
    (["--reps", "0"], "--reps must be at least 1"),
    (["--class", "C"], "invalid choice: 'C'"),
])
def test_bench_suite_refuses_bad_arguments_before_running(args, message):
    done = wanmpi("bench", "suite", "-t", "examples/two-clusters.toml", *args, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_suite_parts_merge_into_one_result(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_suite, "execute", lambda case, t, timeout, rules=None: fake_job(case, t))
    parts = []
    for mpi in ("openmpi", "mpich"):
        runner = br.Runner(BASE, FakeTestbed(up=BASE), io.StringIO())
        path = tmp_path / f"{mpi}.json"
        bench_suite.run(BASE, ["cg"], ["plain", "all"], [mpi], [0.0, 10.0], 2, "S", None, str(path), 60,
                        runner=runner)
        parts.append(str(path))
    merged = tmp_path / "merged.json"
    done = wanmpi("bench", "report", *parts, "--json", str(merged), "--out", str(tmp_path / "m"), timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(merged.read_text())
    assert doc["settings"]["mpis"] == ["openmpi", "mpich"] and len(doc["parts"]) == 2
    assert doc["counts"] == {"cases": 2 * (1 * 2 * 2 * 2 + 2), "ok": 20, "failed": 0}
    assert [c["id"] for c in doc["cases"]] == list(range(20))
    assert {r["mpi"] for r in doc["summary"]} == {"openmpi", "mpich"}
    assert (tmp_path / "m" / "merged-relative-mpich.png").exists() and (tmp_path / "m" / "merged.md").exists()
    other = json.loads((tmp_path / "mpich.json").read_text())
    other["settings"]["delays"] = [5.0]
    (tmp_path / "bad.json").write_text(json.dumps(other))
    done = wanmpi("bench", "report", parts[0], str(tmp_path / "bad.json"), timeout=60)
    assert done.returncode == 2 and "the parts differ in delays" in done.stderr


def test_a_topology_that_cannot_be_derived_fails_its_cases_only():
    broken = bc.TopologySpec("broken", lambda raw: {**raw, "cluster": [{"name": "Bad Name"}]}, (), "invalid")
    cases = [bc.Case("cg", "plain", "openmpi", 0.0), bc.Case("cg", "odd", "openmpi", 0.0, topology=broken)]
    records = br.Runner(BASE, FakeTestbed(up=BASE), io.StringIO()).run(cases, fake_job)
    assert records[0].ok and not records[1].ok
    assert records[1].error.startswith("testbed broken: ") and "cluster[0].name" in records[1].error


def test_a_testbed_taken_down_under_the_run_is_brought_up_again():
    fake = FakeTestbed(up=BASE)

    def vandal(case, t):                  # something else removes the testbed during case 2
        if case.rep == 2:
            fake.up = None
            raise bc.BenchError("exit status 15: killed")
        return fake_job(case, t)
    cases = bc.plan(["cg"], ["plain"], ["openmpi"], [0.0], 3)
    runner = br.Runner(BASE, fake, io.StringIO())
    records = runner.run(cases, vandal)
    assert [r.status for r in records] == ["ok", "failed", "ok"]
    assert runner.rebuilt == 1 and fake.log.count(("up", BASE.source)) == 1
    assert fake.up is BASE


def test_a_broken_testbed_that_cannot_come_back_fails_the_remaining_cases_and_the_run_ends(tmp_path, monkeypatch):
    fake = FakeTestbed(up=BASE, fail_up="two-clusters")

    def vandal(case, t):
        fake.broken = True
        return fake_job(case, t)
    monkeypatch.setattr(bench_suite, "execute", lambda case, t, timeout, rules=None: vandal(case, t))
    out = tmp_path / "s.json"
    status = bench_suite.run(BASE, ["cg"], ["plain"], ["openmpi"], [0.0], 3, "S", None, str(out), 60,
                             runner=br.Runner(BASE, fake, io.StringIO()))
    doc = json.loads(out.read_text())
    assert status == 1 and [c["status"] for c in doc["cases"]][:3] == ["ok", "failed", "failed"]
    assert "could not be brought up again" in doc["cases"][1]["error"]


def test_an_interrupted_suite_keeps_the_cases_it_ran(tmp_path, monkeypatch):
    calls = []

    def stop_at_third(case, t, timeout, rules=None):
        calls.append(case)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return fake_job(case, t)
    monkeypatch.setattr(bench_suite, "execute", stop_at_third)
    out = tmp_path / "s.json"
    with pytest.raises(KeyboardInterrupt):
        bench_suite.run(BASE, ["cg"], ["plain"], ["openmpi"], [0.0], 5, "S", None, str(out), 60,
                        runner=br.Runner(BASE, FakeTestbed(up=BASE), io.StringIO()))
    doc = json.loads(out.read_text())
    assert [c["status"] for c in doc["cases"]][:4] == ["ok", "ok", "pending", "pending"]
