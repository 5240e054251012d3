"""libwanmpi's trees inside clusters under SMPI (coll/tree.c, docs/scale.md
"Trees whose inner ranks do not overlap"): where the sites form a chain and
every site's copy on to the next leaves from a leaf of its trees (the least
busy one, not always the last position), every broadcast is exact."""
from __future__ import annotations

import json

import pytest

from wanmpi.cli.main import main

from test_sim import THREE, nothing_left_behind, testbed_lock  # noqa: F401 (fixtures)


@pytest.mark.parametrize("fan", ["2", "3"])
def test_trees_in_a_chain_of_sites_are_exact(tmp_path, monkeypatch, fan):
    """Three sites of 5 and 7 ranks 100 us apart: 4 MiB goes site to site (a
    star would send extra copies from the root's site), down trees of
    fan-out 2 and 3; with 5 ranks and fan-out 2 the second tree's copy on
    leaves from a leaf before its last position. collbench checks every byte."""
    monkeypatch.setenv("WANMPI_FAN", fan)
    for nodes in ("5", "7"):
        out = tmp_path / f"t{nodes}.json"
        assert main(["sim", "-t", str(THREE), "--nodes-per-cluster", nodes, "--nic-rate", "10Gbit",
                     "--wan-rate", "100Gbit", "--delay", "100us", "--coll", "bcast", "--bytes", "4MiB", "64KiB",
                     "--json", str(out), "--timeout", "300"]) == 0
        document = json.loads(out.read_text())
        assert document["counts"] == {"cases": 1, "ok": 1, "failed": 0}
        stats = document["cases"][0]["metrics"]["wanmpi_stats"]["collectives"]["bcast"]
        assert stats["multilane"] == stats["calls"] == 4, stats


@pytest.mark.parametrize("fan", ["2", "3", "4", "6"])
def test_trees_in_a_star_of_sites_and_interleaved_owners_are_exact(tmp_path, monkeypatch, fan):
    """Three sites of 7 ranks 10 ms apart: the broadcast's sites form a star,
    one segment per non-root rank of the root's site, more segments than the
    fan-out, so consecutive segments start their trees in turn in each of
    the fan blocks (wm_interleave); the reductions' pieces take their owners
    in the same order, down trees of up to the broadcast model's widest
    fan-out, 4 (with 7 ranks: the root's children and one more level), and
    6, the reductions' (every other rank of the site a child of the owner).
    collbench checks every byte of both."""
    monkeypatch.setenv("WANMPI_FAN", fan)
    out = tmp_path / "star.json"
    assert main(["sim", "-t", str(THREE), "--nodes-per-cluster", "7", "--nic-rate", "10Gbit",
                 "--wan-rate", "100Gbit", "--delay", "10ms", "--coll", "bcast", "allreduce",
                 "--bytes", "4MiB", "64KiB", "--json", str(out), "--timeout", "300"]) == 0
    document = json.loads(out.read_text())
    assert document["counts"] == {"cases": 1, "ok": 1, "failed": 0}
    rows = document["cases"][0]["metrics"]["rows"]
    assert len(rows) == 4 and all(row["checked"] for row in rows), rows
    collectives = document["cases"][0]["metrics"]["wanmpi_stats"]["collectives"]
    for op in ("bcast", "allreduce"):
        assert collectives[op]["multilane"] == collectives[op]["calls"] == 4, collectives
