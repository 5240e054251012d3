"""The rules `wanmpi tune` derives from its measurements (bench/crossovers.py)
and the rules file format they are written in (rules.py): pure, no testbed."""
from __future__ import annotations

import pytest

from wanmpi import rules
from wanmpi.bench.crossovers import Cell, choose, rules_text


def cell(op: str, size: int, multi: float, single: float, mpi: float, delay: float = 10, name: str = "openmpi"):
    return Cell(name, delay, op, size, {"multi": multi, "single": single, "mpi": mpi})


def body(text: str) -> str:
    """The rules file without its version line and header."""
    return text.split("#\n", 1)[1]


def derive(cells) -> str:
    text = rules_text(cells, clusters=2, ranks=8, header=["written by a test", ""])
    rules.parse(text, "derived.rules")                    # every file tune writes reads back
    return text


def test_the_header_comes_after_the_version_line():
    assert derive([cell("bcast", 8, 3, 2, 1)]).startswith("wanmpi-rules 1\n# written by a test\n#\n")


def test_neighbouring_sizes_merge_split_at_the_geometric_mean_and_end_with_the_largest_measured():
    text = derive([cell("bcast", 8, 3, 2, 1), cell("bcast", 512, 3, 2, 1), cell("bcast", 32768, 2, 1, 3),
                   cell("bcast", 1 << 20, 1, 2, 3), cell("bcast", 4 << 20, 1, 2, 3)])
    assert body(text) == (
        "\n# bcast, openmpi, 10 ms: best of ours / openmpi's own: 8:2.00 512:2.00 32K:0.33 1M:0.33 4M:0.33\n"
        "bcast                mpi        mpi=openmpi clusters=2 ranks=8 bytes=-4K\n"
        "bcast                singlelane mpi=openmpi clusters=2 ranks=8 bytes=4K-185364\n"
        "bcast                multilane  mpi=openmpi clusters=2 ranks=8 bytes=185364-4194305\n")
    last = rules.parse(text, "derived.rules")[-1].ranges["bytes"]
    assert last.holds(4 << 20) and not last.holds((4 << 20) + 1)     # past 4 MiB: the built-in choice


def test_the_mpis_own_is_kept_unless_ours_is_more_than_two_percent_faster():
    assert choose({"multi": 0.981, "single": 2, "mpi": 1}).setting == "mpi"
    assert choose({"multi": 0.979, "single": 2, "mpi": 1}).setting == "multi"
    assert choose({"multi": 0.5, "single": 0.4, "mpi": 1}).setting == "single"
    assert choose({"multi": 0.5, "single": 0.4}).setting == "single"          # the MPI's jobs failed
    assert choose({"mpi": 1}).setting == "mpi"
    assert choose({}) is None
    text = derive([cell("allreduce", 64, 0.99, 1.5, 1), cell("allreduce", 4096, 0.97, 1.5, 1)])
    assert body(text) == (
        "\n# allreduce, openmpi, 10 ms: best of ours / openmpi's own: 64:0.99 4K:0.97\n"
        "allreduce            mpi        mpi=openmpi clusters=2 ranks=8 bytes=-512\n"
        "allreduce            multilane  mpi=openmpi clusters=2 ranks=8 bytes=512-4097\n")


def test_delays_split_at_the_midpoint_and_alike_delays_merge():
    cells = []
    for delay, small in ((0, "mpi"), (2, "mpi"), (10, "multi"), (20, "multi")):
        fast = {"mpi": (3, 2, 1), "multi": (1, 2, 3)}[small]
        cells += [cell("reduce", 64, *fast, delay=delay), cell("reduce", 1 << 20, 1, 2, 3, delay=delay)]
    assert body(derive(cells)) == (
        "\n# reduce, openmpi, 0 ms: best of ours / openmpi's own: 64:2.00 1M:0.33\n"
        "# reduce, openmpi, 2 ms: best of ours / openmpi's own: 64:2.00 1M:0.33\n"
        "reduce               mpi        mpi=openmpi clusters=2 ranks=8 delay=-6ms bytes=-8K\n"
        "reduce               multilane  mpi=openmpi clusters=2 ranks=8 delay=-6ms bytes=8K-1048577\n"
        "# reduce, openmpi, 10 ms: best of ours / openmpi's own: 64:0.33 1M:0.33\n"
        "# reduce, openmpi, 20 ms: best of ours / openmpi's own: 64:0.33 1M:0.33\n"
        "reduce               multilane  mpi=openmpi clusters=2 ranks=8 delay=6ms- bytes=-1048577\n")


def test_a_delay_boundary_between_whole_milliseconds_is_written_in_microseconds():
    cells = [cell("bcast", 8, 3, 2, 1, delay=2), cell("bcast", 8, 1, 2, 3, delay=5)]
    assert "delay=-3500us bytes=-9\n" in derive(cells) and "delay=3500us- bytes=-9\n" in derive(cells)


def test_alltoall_settings_are_named_as_alltoall_algorithms_and_alltoallv_has_no_bytes():
    cells = [cell("alltoall", 64, 3, 2, 1), cell("alltoall", 1 << 20, 3, 0.5, 1),
             cell("alltoallv", 64, 3, 2, 1), cell("alltoallv", 1 << 20, 0.5, 2, 1)]
    assert body(derive(cells)) == (
        "\n# alltoall, openmpi, 10 ms: best of ours / openmpi's own: 64:2.00 1M:0.50\n"
        "alltoall             mpi        mpi=openmpi clusters=2 ranks=8 bytes=-8K\n"
        "alltoall             paced      mpi=openmpi clusters=2 ranks=8 bytes=8K-1048577\n"
        "\n# alltoallv, openmpi, 10 ms: best of ours / openmpi's own: 1M:0.50\n"
        "alltoallv            scheduled  mpi=openmpi clusters=2 ranks=8\n")


def test_each_mpi_gets_its_own_rules():
    cells = [cell("barrier", 0, 1, 2, 3), cell("barrier", 0, 3, 2, 1, name="mpich")]
    assert body(derive(cells)) == (
        "\n# barrier, openmpi, 10 ms: best of ours / openmpi's own: any:0.33\n"
        "barrier              multilane  mpi=openmpi clusters=2 ranks=8\n"
        "\n# barrier, mpich, 10 ms: best of ours / mpich's own: any:2.00\n"
        "barrier              mpi        mpi=mpich clusters=2 ranks=8\n")


# ---- the file format ---------------------------------------------------------------------
def test_a_rules_file_reads_back_in_base_units():
    parsed = rules.parse("# tuned\n\nwanmpi-rules 1\nallreduce mpi mpi=mpich clusters=2 delay=5ms- bytes=-16K # c\n"
                         "alltoall scheduled rate=1Gbit ranks=4-9\n")
    assert parsed[0] == rules.Rule("allreduce", "mpi", "mpich", {"clusters": rules.Range(2, 3),
                                                                  "delay": rules.Range(5000, None),
                                                                  "bytes": rules.Range(None, 16384)})
    assert parsed[1].ranges == {"rate": rules.Range(10**9, 10**9 + 1), "ranks": rules.Range(4, 9)}
    assert parsed[0].line() == "allreduce            mpi        mpi=mpich clusters=2 delay=5ms- bytes=-16K"


@pytest.mark.parametrize("line, problem", [
    ("bcast fast", "line 2: unknown algorithm 'fast' for bcast (expected multilane, singlelane or mpi)"),
    ("alltoall multilane", "line 2: unknown algorithm 'multilane' for alltoall (expected scheduled, paced or mpi)"),
    ("neighbor_alltoall mpi", "line 2: unknown collective 'neighbor_alltoall'"),
    ("bcast mpi delay=5", "line 2: delay='5': missing unit"),
    ("bcast mpi bytes=4Q", "line 2: bytes='4Q': unknown unit 'Q'"),
    ("bcast mpi bytes=8K-4K", "line 2: bytes='8K-4K': empty range"),
    ("bcast mpi bytes=1 bytes=2", "line 2: bytes= given twice"),
    ("alltoallv mpi bytes=-1K", "line 2: an alltoallv rule may not have a bytes condition"),
    ("gatherv mpi bytes=-1K", "line 2: a gatherv rule may not have a bytes condition"),
    ("scatterv multilane bytes=1K-", "line 2: a scatterv rule may not have a bytes condition"),
    ("bcast mpi mpi=lam", "line 2: mpi='lam': expected openmpi, mpich, openmpi5 or intelmpi"),
    ("bcast mpi colour=red", "line 2: 'colour=red' is not a condition"),
])
def test_a_bad_line_is_named_with_the_file_and_its_number(line, problem):
    with pytest.raises(rules.RulesError) as e:
        rules.parse(f"wanmpi-rules 1\n{line}\n", "x.rules")
    assert str(e.value).startswith(f"rules x.rules {problem}")


def test_the_version_line_comes_first():
    with pytest.raises(rules.RulesError, match="line 1: expected the version line 'wanmpi-rules 1' first"):
        rules.parse("bcast mpi\n", "x.rules")
