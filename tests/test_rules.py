"""Rules files (docs/tuning.md) on the testbed: libwanmpi takes, per call, the
algorithm the first matching rule names, with exact results for every choice;
an explicit WANMPI_<COLL> wins over the rules; a bad file is reported once,
naming the file and the line, and the job runs on the MPI library's own
algorithms; ranks that read different rules do not hang but agree on the MPI
library's."""
from __future__ import annotations

import re

import pytest

from conftest import EVERY_MPI, MPIS, wanmpi
from test_libwanmpi import calls, run, stats
from wanmpi import paths, rules
from wanmpi.job import launch

DECISION = re.compile(r"^wanmpi\[(\d+)\]: (\w+) of (\d+) bytes: (\w+) \(rules line (\d+)\)$", re.M)
OURS = ("bcast", "allreduce", "reduce", "allgather", "allgatherv", "reduce_scatter_block")
ROOTED = ("gather", "scatter", "gatherv", "scatterv")     # drawn fewer times: not every range is seen

BY_SIZE = """\
wanmpi-rules 1
# on the testbed's 10 ms: never the first, always the second
reduce    mpi         delay=-5ms
reduce    singlelane  clusters=2 delay=5ms- rate=100Mbit-1Gbit
{ours}
alltoall  mpi         bytes=-16K
alltoall  paced       bytes=16K-256K
alltoall  scheduled
alltoallv paced
gatherv   mpi        delay=-5ms
gatherv   multilane
scatterv  singlelane
""".format(ours="\n".join(f"{c:<20} mpi bytes=-1K\n{c:<20} singlelane bytes=1K-64K\n{c:<20} multilane"
                         for c in (*OURS, "gather", "scatter", "scan", "exscan") if c != "reduce"))


def expected(coll: str, size: int) -> str:
    if coll == "reduce":
        return "singlelane"
    if coll == "alltoall":
        return "mpi" if size < 16384 else "paced" if size < 262144 else "scheduled"
    if coll == "alltoallv":
        return "paced"
    if coll in ("gatherv", "scatterv"):                 # no sizes in their rules
        return "multilane" if coll == "gatherv" else "singlelane"
    return "mpi" if size < 1024 else "singlelane" if size < 65536 else "multilane"


def decisions(stderr: str) -> list[tuple[str, int, str]]:
    return [(m[2], int(m[3]), m[4]) for m in DECISION.finditer(stderr)]


@pytest.mark.parametrize("mpi", MPIS)
def test_rules_choose_each_call_exactly(two_clusters, tmp_path, mpi):
    rules = tmp_path / "by-size.rules"
    rules.write_text(BY_SIZE)
    env = [f"WANMPI_RULES={rules}", "WANMPI_DEBUG=1", f"WANMPI_STATS={tmp_path}/stats-%r.json"]
    done = run(mpi, "collcheck", "--seed", "21", "--cases", "200", "--max-bytes", "1000000",
               "--only", ",".join(OURS + ROOTED), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 200 cases ok" in done.stdout
    made = decisions(done.stderr)
    for coll, size, alg in made:
        assert alg == expected(coll, size), f"{coll} of {size} bytes ran {alg}"
    for coll in OURS:
        seen = {alg for c, _, alg in made if c == coll}
        want = {"singlelane"} if coll == "reduce" else {"mpi", "singlelane", "multilane"}
        assert seen == want, f"{coll}: the rules chose {seen}"
    for coll in ROOTED:
        assert [c for c, _, _ in made if c == coll], f"no {coll} call was decided by the rules"
    ranks = stats(tmp_path)
    assert calls(ranks, "bcast", "multilane") > 0 and calls(ranks, "bcast", "mpi") > 0

    done = run(mpi, "collcheck", "--seed", "21", "--cases", "40", "--max-bytes", "1000000", "--only", "scan,exscan",
               env=env[:2])
    assert done.returncode == 0, done.stdout + done.stderr
    made = decisions(done.stderr)
    for coll, size, alg in made:
        assert alg == expected(coll, size), f"{coll} of {size} bytes ran {alg}"
    assert {c for c, _, _ in made} == {"scan", "exscan"}, "no scan or exscan call was decided by the rules"

    done = run(mpi, "a2acheck", env=env[:2])
    assert done.returncode == 0, done.stdout + done.stderr
    made = decisions(done.stderr)
    for coll, size, alg in made:
        assert alg == expected(coll, size), f"{coll} of {size} bytes ran {alg}"
    assert {alg for c, _, alg in made if c == "alltoall"} == {"mpi", "paced", "scheduled"}
    assert {alg for c, _, alg in made if c == "alltoallv"} == {"paced"}


def test_explicit_setting_wins_over_the_rules(two_clusters, tmp_path):
    rules = tmp_path / "by-size.rules"
    rules.write_text(BY_SIZE)
    done = run("openmpi", "collcheck", "--seed", "22", "--cases", "40", "--max-bytes", "400000",
               "--only", ",".join(OURS), env=[f"WANMPI_RULES={rules}", "WANMPI_DEBUG=1", "WANMPI_BCAST=mpi",
                    f"WANMPI_STATS={tmp_path}/stats-%r.json"])
    assert done.returncode == 0, done.stdout + done.stderr
    made = decisions(done.stderr)
    assert not [d for d in made if d[0] == "bcast"]
    assert [d for d in made if d[0] == "allreduce"]
    ranks = stats(tmp_path)
    assert calls(ranks, "bcast", "mpi") > 0
    assert calls(ranks, "bcast", "multilane") == calls(ranks, "bcast", "singlelane") == 0


@pytest.mark.parametrize("text, message", [
    ("wanmpi-rules 1\nbcast mpi bytes=-1K\nbcast fast\n",
     "line 3: unknown algorithm 'fast' for bcast (expected multilane, singlelane or mpi)"),
    ("bcast mpi\n", "line 1: expected 'wanmpi-rules 1' first"),
    ("# tuned\nwanmpi-rules 2\n", "line 2: version 2 is not supported"),
    ("wanmpi-rules 1\n\nallreduce multilane bytes=64K-4K\n", "line 3: bytes=64K-4K is empty"),
    ("wanmpi-rules 1\nallreduce multilane delay=10\n", "line 2: delay: '10' has no valid unit (with us, ms or s)"),
    ("wanmpi-rules 1\nalltoallv scheduled bytes=1M-\n", "line 2: alltoallv rules cannot have a bytes condition"),
    ("wanmpi-rules 1\nalltoall multilane\n", "line 2: unknown algorithm 'multilane' for alltoall"),
    ("wanmpi-rules 1\nneighbor_alltoall mpi\n", "line 2: unknown collective 'neighbor_alltoall'"),
    ("wanmpi-rules 1\ngatherv mpi bytes=-1K\n", "line 2: gatherv rules cannot have a bytes condition"),
    ("wanmpi-rules 1\nbcast mpi ranks=8 ranks=4\n", "line 2: condition 'ranks' given twice"),
    ("wanmpi-rules 1\nbcast mpi mpi=intel\n", "line 2: mpi=intel: expected openmpi, mpich, openmpi5 or intelmpi"),
    ("", "line 1: no rules: the file is empty"),
    (None, "cannot be read (No such file or directory)"),
])
@pytest.mark.parametrize("mpi", MPIS)
def test_bad_rules_file_is_named_and_the_mpi_runs(two_clusters, tmp_path, mpi, text, message):
    rules = tmp_path / "bad.rules"
    if text is not None:
        rules.write_text(text)
    done = run(mpi, "collcheck", "--seed", "23", "--cases", "30", "--max-bytes", "200000",
               env=[f"WANMPI_RULES={rules}", f"WANMPI_STATS={tmp_path}/stats-%r.json"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collcheck: 30 cases ok" in done.stdout
    said = [line for line in done.stderr.splitlines() if line.startswith("wanmpi: rules")]
    assert len(said) == 1, done.stderr
    assert said[0].startswith(f"wanmpi: rules {rules} {message}"), said[0]
    assert said[0].endswith(": every collective goes to the MPI library")
    ranks = stats(tmp_path)
    for coll in OURS:
        assert calls(ranks, coll, "multilane") == calls(ranks, coll, "singlelane") == 0
    assert sum(calls(ranks, coll, "mpi") for coll in OURS) > 0


@pytest.mark.parametrize("mpi", MPIS)
def test_ranks_that_read_different_rules_agree_on_the_mpi(two_clusters, tmp_path, mpi):
    a, b = tmp_path / "a.rules", tmp_path / "b.rules"
    a.write_text("wanmpi-rules 1\nbcast multilane\nallreduce multilane\n")
    b.write_text("wanmpi-rules 1\nbcast singlelane\nallreduce singlelane\n")
    for other in (b, tmp_path / "missing.rules"):
        done = run(mpi, "rulesplit", str(a), str(other), env=[f"WANMPI_STATS={tmp_path}/stats-%r.json"],
                   timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "rulesplit: ok" in done.stdout
        assert "read different rules (the file missing or different on some node?)" in done.stderr
        ranks = stats(tmp_path)
        for coll in ("bcast", "allreduce"):
            assert calls(ranks, coll, "mpi") == 8 * 6
            assert calls(ranks, coll, "multilane") == calls(ranks, coll, "singlelane") == 0


def mpi_rules(this: str) -> str:
    """bcast rules for every MPI name, ours (this) the only multilane one."""
    others = [m for m in rules.MPIS if m != this]
    return "wanmpi-rules 1\n" + "".join(f"bcast singlelane mpi={m}\n" for m in others) + \
        f"bcast multilane mpi={this}\nbcast mpi\n"


@pytest.mark.parametrize("mpi", EVERY_MPI)
def test_mpi_condition_names_the_mpi_it_runs_under(two_clusters, tmp_path, mpi):
    """mpi=NAME holds under the MPI `wanmpi run --mpi NAME` launches and no
    other (Open MPI 4.1 and 5 told apart, Intel MPI apart from MPICH)."""
    path = tmp_path / "mpis.rules"
    path.write_text(mpi_rules(mpi))
    done = run(mpi, "collcheck", "--seed", "24", "--cases", "20", "--max-bytes", "200000", "--only", "bcast",
               env=[f"WANMPI_RULES={path}", "WANMPI_DEBUG=1"])
    assert done.returncode == 0, done.stdout + done.stderr
    made = decisions(done.stderr)
    assert made and {alg for _, _, alg in made} == {"multilane"}, made


@pytest.mark.parametrize("mpi", [p for p in EVERY_MPI if launch.launcher(p.values[0]).standard_abi()])
def test_mpi_condition_under_the_standard_abi_is_the_running_mpi(two_clusters, tmp_path, mpi):
    """One libwanmpi for the ABI: mpi= is decided at run time."""
    path = tmp_path / "mpis.rules"
    path.write_text(mpi_rules(mpi))
    done = wanmpi("run", "--mpi", mpi, "-n", "8", "--timeout", "200", "-x", f"WANMPI_RULES={path}",
                  "-x", "WANMPI_DEBUG=1", str(paths.BUILD / "abi" / "collcheck"), "--seed", "24", "--cases", "20",
                  "--max-bytes", "200000", "--only", "bcast", timeout=260)
    assert done.returncode == 0, done.stdout + done.stderr
    made = decisions(done.stderr)
    assert made and {alg for _, _, alg in made} == {"multilane"}, made
