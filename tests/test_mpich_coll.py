"""The tool that runs MPICH 4.0.2's collective tests against libwanmpi
(bench/mpich_coll, docs/testing.md "MPICH's collective test suite"): its
verdicts on a fixed results file, and how it reads MPICH's test lists.
Nothing here downloads, builds or runs MPI."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "mpich_coll"))

import analyze  # noqa: E402
import suite  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "mpich-coll-results.csv"


@pytest.fixture(scope="module")
def verdicts() -> dict[tuple, str]:
    rows = analyze.read_results(FIXTURE)
    return {(o.mpi, o.test, o.np, o.args): o.verdict() for o in analyze.outcomes(rows)}


@pytest.mark.parametrize("key, expected", [
    (("mpich", "allred", 4, "-count=10"), "pass"),          # exactly 1.3 x: not slower
    (("mpich", "allred", 4, "-count=100"), "slower"),       # 1.31 x
    (("mpich", "alltoallv0", 8, ""), "pass"),               # best 5.0 s against best 4.0 s
    (("mpich", "gather", 4, ""), "fails with wanmpi"),      # one failed run of two is a failure
    (("openmpi", "gather2", 4, ""), "fails with wanmpi"),   # status 0 without " No Errors"
    (("openmpi", "oplxor", 4, ""), "fails alone"),
    (("openmpi", "nonblocking2", 4, ""), "fails alone"),    # one crash alone of two runs
    (("openmpi", "nonblocking3", 4, ""), "incomplete"),     # killed alone, never run with wanmpi
    (("openmpi", "allredmany", 4, ""), "incomplete"),
])
def test_each_entry_gets_the_verdict_of_its_runs(verdicts, key, expected):
    assert verdicts[key] == expected


def test_every_entry_of_the_fixture_is_judged(verdicts):
    assert len(verdicts) == 9


def test_the_slack_in_seconds_widens_the_bound():
    rows = analyze.read_results(FIXTURE)
    outcome = next(o for o in analyze.outcomes(rows) if o.args == "-count=100")
    assert outcome.verdict(slower=1.3, slack=0.0) == "slower"
    assert outcome.verdict(slower=1.3, slack=0.5) == "pass"
    assert outcome.verdict(slower=1.5, slack=0.0) == "pass"


def test_best_times_are_the_minimum_over_repetitions():
    rows = analyze.read_results(FIXTURE)
    outcome = next(o for o in analyze.outcomes(rows) if o.test == "alltoallv0")
    assert (outcome.best("alone"), outcome.best("wanmpi")) == (4.0, 5.0)
    assert outcome.ratio() == pytest.approx(1.25)


def test_the_report_is_bad_only_for_failures_with_wanmpi_and_slower_entries():
    rows = analyze.read_results(FIXTURE)
    _, bad = analyze.report(rows, analyze.DEFAULT_SLOWER, analyze.DEFAULT_SLACK, show_all=False)
    assert bad
    harmless = [r for r in rows if r["test"] in ("alltoallv0", "oplxor", "nonblocking3")]
    text, bad = analyze.report(harmless, analyze.DEFAULT_SLOWER, analyze.DEFAULT_SLACK, show_all=False)
    assert not bad
    assert "mpich: 1 entries: 1 pass" in text
    assert "openmpi: 2 entries: 1 fails alone, 1 incomplete" in text


def test_testlist_lines_give_entries_capped_at_the_testbed_size():
    assert suite.parse_testlist_line("allred 4 arg=-count=10", 8) == suite.Entry("allred", 4, "-count=10")
    assert suite.parse_testlist_line("allred3 10", 8) == suite.Entry("allred3", 8)
    assert suite.parse_testlist_line("ibarrier 2 timeLimit=30", 8) == suite.Entry("ibarrier", 2, "", 30)
    assert suite.parse_testlist_line("p_bcast 4 strict=false", 8) == suite.Entry("p_bcast", 4)
    assert suite.parse_testlist_line("@largetest@gather_big 8 mem=20.1", 8) is None
    assert suite.parse_testlist_line("# the opxxx tests", 8) is None


def test_dtpools_entries_number_their_seeds_over_the_whole_config():
    # maint/gentests_dtp.sh: seeds count from 1 over every line and type,
    # two per count in pt2pt; the test size falls as the count rises
    config = ("# comment\n"
              "attr/fkeyvaltype::1::1:1024::0\n"
              "pt2pt/sendrecv1::1 2::2:8:8:0\n"
              "coll/bcast::1 512::4:16:1024:0\n"
              "coll/bcast::262144:timeLimit=420 mem=1.2:4:16::0\n")
    lines = suite.dtpools_lines(config)
    assert [" ".join(line.split()) for line in lines] == [
        "bcast 4 arg=-type=MPI_INT arg=-count=1 arg=-seed=11 arg=-testsize=1024",
        "bcast 4 arg=-type=MPI_INT arg=-count=512 arg=-seed=12 arg=-testsize=16",
        "bcast 4 arg=-type=MPI_INT:4+MPI_DOUBLE:8 arg=-count=1 arg=-seed=13 arg=-testsize=1024",
        "bcast 4 arg=-type=MPI_INT:4+MPI_DOUBLE:8 arg=-count=512 arg=-seed=14 arg=-testsize=16",
        "bcast 4 arg=-type=MPI_INT arg=-count=262144 arg=-seed=15 arg=-testsize=16 timeLimit=420 mem=1.2",
        "bcast 4 arg=-type=MPI_INT:4+MPI_DOUBLE:8 arg=-count=262144 arg=-seed=16 arg=-testsize=16 "
        "timeLimit=420 mem=1.2",
    ]
    assert suite.parse_testlist_line(lines[-1], 8).time_limit == 420


def test_makefile_programs_join_continuation_lines():
    text = ("noinst_PROGRAMS =      \\\n    allred   \\\n    nbcoll2\n\n"
            "nbcoll2_SOURCES = coll2.c\nnbcoll2_CPPFLAGS   = -DUSE_MTEST_NBC $(AM_CPPFLAGS)\n")
    variables = suite.makefile_variables(text)
    assert variables["noinst_PROGRAMS"].split() == ["allred", "nbcoll2"]
    assert variables["nbcoll2_CPPFLAGS"] == "-DUSE_MTEST_NBC $(AM_CPPFLAGS)"


def test_runs_of_another_library_build_are_left_out_when_asked(monkeypatch):
    built_now = {"mpich": "0123456789ab", "openmpi": "fedcba987654"}
    monkeypatch.setattr(suite, "library_digest", lambda mpi: built_now[mpi])
    rows = analyze.of_current_library(analyze.read_results(FIXTURE))
    verdicts = {(o.mpi, o.test): o.verdict() for o in analyze.outcomes(rows)}
    assert verdicts[("mpich", "gather")] == "fails with wanmpi"
    assert verdicts[("openmpi", "gather2")] == "incomplete"     # its run with libwanmpi is stale
    assert len(rows) == 22 - 4                                  # the 4 openmpi runs with libwanmpi
